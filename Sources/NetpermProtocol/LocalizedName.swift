// SPDX-License-Identifier: LGPL-2.1-or-later
/// An app's name in a person's language, from its desktop file's `Name[LOCALE]=` (the daemon's `names`, by locale)
/// as the Desktop Entry spec matches a locale: `lang_COUNTRY@MODIFIER`, `lang_COUNTRY`, `lang@MODIFIER`, `lang`,
/// then the C locale's `Name=`. One matcher for the daemon and every face that reads `names`.
public enum LocalizedName {
    /// The name for `locale` (`de_DE.UTF-8@euro`; nil, `C`, `POSIX`: none), nil when `names` has none for it.
    public static func pick(_ names: [String: String], locale: String?) -> String? {
        guard let locale, !names.isEmpty, locale != "C", locale != "POSIX" else { return nil }
        var l = Substring(locale)
        var modifier: Substring?
        if let at = l.firstIndex(of: "@") { modifier = l[l.index(after: at)...]; l = l[..<at] }
        if let dot = l.firstIndex(of: ".") { l = l[..<dot] }
        let parts = l.split(separator: "_", maxSplits: 1)
        guard let lang = parts.first else { return nil }
        let country = parts.count == 2 ? parts[1] : nil
        var tries: [String] = []
        if let country, let modifier { tries.append("\(lang)_\(country)@\(modifier)") }
        if let country { tries.append("\(lang)_\(country)") }
        if let modifier { tries.append("\(lang)@\(modifier)") }
        tries.append(String(lang))
        for t in tries { if let n = names[t] { return n } }
        return nil
    }

    /// The locale messages are shown in, as POSIX's `setlocale(LC_MESSAGES, "")` takes it from the environment:
    /// `LC_ALL`, else `LC_MESSAGES`, else `LANG` (an empty one is unset).
    public static func messagesLocale(_ env: (String) -> String?) -> String? {
        for key in ["LC_ALL", "LC_MESSAGES", "LANG"] { if let v = env(key), !v.isEmpty { return v } }
        return nil
    }

    /// A reply's `names` member as a map (strings only).
    public static func names(_ json: JSON?) -> [String: String] {
        guard case let .object(members)? = json else { return [:] }
        var out: [String: String] = [:]
        for (k, v) in members { if let s = v.stringValue { out[k] = s } }
        return out
    }
}
