// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// What an app's `.desktop` file says of it (the Desktop Entry Specification): its name and icon, read from the
/// `[Desktop Entry]` group. Pure: bytes in, an entry or nil out. Anyone may write such a file for their own apps, so
/// the text is untrusted: at most `maxBytes` read, valid UTF-8 only, names and icons bounded and made safe to show.
public struct DesktopEntry: Equatable, Sendable {
    /// `Name=`, the C locale's name: what the daemon, which has no locale of its own, shows.
    public var name: String?
    /// `Name[LOCALE]=`, by locale (`de`, `pt_BR`, `sr@latin`): at most `maxLocales` of them.
    public var localizedNames: [String: String] = [:]
    /// `Icon=`: a theme's icon name, or an absolute path.
    public var icon: String?
    /// `NoDisplay=true` or `Hidden=true`: installed but not shown in menus (an app still, when it runs).
    public var hidden = false

    public static let maxBytes = 65536
    public static let maxNameBytes = 200
    public static let maxIconBytes = 1024
    public static let maxLocales = 64

    public init(name: String? = nil, icon: String? = nil, hidden: Bool = false) {
        self.name = name; self.icon = icon; self.hidden = hidden
    }

    /// The entry of a `.desktop` file's bytes; nil when it is not one (not UTF-8, too large, no `[Desktop Entry]`
    /// group first, or `Type=` other than `Application`).
    public static func parse(_ bytes: some Collection<UInt8>) -> DesktopEntry? {
        guard bytes.count <= maxBytes, let text = String(validating: bytes, as: UTF8.self) else { return nil }
        var entry = DesktopEntry()
        var group: Substring?
        var type: Substring?
        for raw in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            if line.first == "#" || line.allSatisfy({ $0 == " " || $0 == "\t" }) { continue }
            if line.first == "[" {
                guard line.last == "]" else { return nil }
                // The spec: the first group is `[Desktop Entry]`; later groups are actions and the like.
                if group == nil, line != "[Desktop Entry]" { return nil }
                group = line.dropFirst().dropLast()
                continue
            }
            guard group == "Desktop Entry", let eq = line.firstIndex(of: "=") else {
                if group == nil { return nil }
                continue
            }
            let key = line[..<eq].trimmingSpaces
            let value = unescape(line[line.index(after: eq)...].trimmingSpaces)
            switch key {
            case "Name": entry.name = bounded(value, maxBytes: maxNameBytes)
            case "Icon": entry.icon = bounded(value, maxBytes: maxIconBytes)
            case "Type": type = Substring(value)
            case "NoDisplay", "Hidden": if value == "true" { entry.hidden = true }
            default:
                if key.hasPrefix("Name["), key.hasSuffix("]"), entry.localizedNames.count < maxLocales {
                    let locale = String(key.dropFirst(5).dropLast())
                    if isLocale(locale), let name = bounded(value, maxBytes: maxNameBytes) {
                        entry.localizedNames[locale] = name
                    }
                }
            }
        }
        guard group != nil, type == nil || type == "Application" else { return nil }
        return entry
    }

    /// The name for a locale (`de_DE.UTF-8@euro`) as the spec matches it: `lang_COUNTRY@MODIFIER`,
    /// `lang_COUNTRY`, `lang@MODIFIER`, `lang`, then `Name=`.
    public func name(locale: String?) -> String? {
        guard let locale, !localizedNames.isEmpty else { return name }
        var l = Substring(locale)
        var modifier: Substring?
        if let at = l.firstIndex(of: "@") { modifier = l[l.index(after: at)...]; l = l[..<at] }
        if let dot = l.firstIndex(of: ".") { l = l[..<dot] }
        let lang = l.split(separator: "_", maxSplits: 1).first ?? l
        let country = l.contains("_") ? l.split(separator: "_", maxSplits: 1).last : nil
        var tries: [String] = []
        if let country, let modifier { tries.append("\(lang)_\(country)@\(modifier)") }
        if let country { tries.append("\(lang)_\(country)") }
        if let modifier { tries.append("\(lang)@\(modifier)") }
        tries.append(String(lang))
        for t in tries { if let n = localizedNames[t] { return n } }
        return name
    }

    /// The spec's escapes in string values: `\s`, `\n`, `\t`, `\r`, `\\`.
    static func unescape(_ s: Substring) -> String {
        guard s.contains("\\") else { return String(s) }
        var out = ""
        var escaped = false
        for c in s {
            if escaped {
                switch c {
                case "s": out.append(" ")
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                default: out.append(c)
                }
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else {
                out.append(c)
            }
        }
        return out
    }

    /// Empty is none; controls escaped (a name is shown on terminals and in notifications); cut to `maxBytes`.
    static func bounded(_ s: String, maxBytes: Int) -> String? {
        guard !s.isEmpty else { return nil }
        return SafeText.excerpt(s, maxBytes: maxBytes)
    }

    static func isLocale(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 32 && s.unicodeScalars.allSatisfy {
            AppPolicy.isLetter($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "@" || $0 == "-" || $0 == "."
        }
    }
}

/// The desktop files the daemon found: for everyone (`XDG_DATA_DIRS`, Flatpak's system exports) and each user's own
/// (`~/.local/share`, `~/.local/share/flatpak/exports/share`), by application ID. A user's file names only that
/// user's apps: another uid never sees its name or icon.
public struct DesktopCatalog: Equatable, Sendable {
    public var system: [String: DesktopEntry] = [:]
    public var users: [UInt32: [String: DesktopEntry]] = [:]

    public init(system: [String: DesktopEntry] = [:], users: [UInt32: [String: DesktopEntry]] = [:]) {
        self.system = system; self.users = users
    }

    /// What `uid` sees of app `id` (its own file first, as `XDG_DATA_HOME` comes before `XDG_DATA_DIRS`); for nil,
    /// everyone's.
    public func entry(_ id: String, uid: UInt32?) -> DesktopEntry? {
        if let uid, let e = users[uid]?[id] { return e }
        return system[id]
    }
}

private extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return s
    }
}
