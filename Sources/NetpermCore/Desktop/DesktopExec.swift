// SPDX-License-Identifier: LGPL-2.1-or-later
/// A desktop entry's `Exec=` and `TryExec=` as the Desktop Entry spec and GLib read them: the command line split
/// into arguments (double quotes with `\"`, `` \` ``, `\$`, `\\` inside; GLib's shell rules also take single quotes
/// and a backslash outside quotes), the field codes (`%f %F %u %U %i %c %k`, the deprecated `%d %D %n %N %v %m`)
/// dropped, `%%` made `%`; the program is the first argument, a bare name looked up in `PATH` as
/// `g_find_program_in_path` does. Stored so that a later step can know an app by the program it runs. Pure but for
/// the `isExecutable` the caller gives.
public enum DesktopExec {
    /// Arguments kept of one command line; the rest are no use for knowing the program.
    public static let maxArguments = 64
    /// `PATH` when the daemon has none (systemd's default for services).
    public static let defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    /// The arguments of an `Exec=` value (already unescaped as a string value); nil when it is not one (an
    /// unterminated quote, nothing but field codes).
    public static func arguments(_ value: String) -> [String]? {
        var args: [String] = []
        var current = ""
        var inArg = false
        var quote: Character?
        var escaped = false
        for c in value {
            if escaped {
                // In double quotes only these four are escapes; elsewhere (GLib's shell rules) any character.
                if quote == "\"", !"\"`$\\".contains(c) { current.append("\\") }
                current.append(c)
                escaped = false
                continue
            }
            switch (quote, c) {
            case ("'", "'"), ("\"", "\""): quote = nil
            case ("'", _): current.append(c)
            case (_, "\\"): escaped = true; inArg = true
            case (nil, "\""), (nil, "'"): quote = c; inArg = true
            case (nil, " "), (nil, "\t"), (nil, "\n"):
                if inArg { args.append(current); current = ""; inArg = false }
            default: current.append(c); inArg = true
            }
        }
        guard quote == nil, !escaped else { return nil }
        if inArg { args.append(current) }
        let kept = args.compactMap(expandingFieldCodes).prefix(maxArguments)
        return kept.isEmpty || kept[0].isEmpty ? nil : Array(kept)
    }

    /// An argument with its field codes gone (nil: it was one field code alone, which expands to the files, URLs
    /// or icon the launcher gives: never the program), `%%` made `%`.
    static func expandingFieldCodes(_ arg: String) -> String? {
        guard arg.contains("%") else { return arg }
        if arg.count == 2, arg.first == "%", arg.last != "%" { return nil }
        var out = ""
        var percent = false
        for c in arg {
            if percent {
                if c == "%" { out.append("%") }
                percent = false
            } else if c == "%" {
                percent = true
            } else {
                out.append(c)
            }
        }
        return out
    }

    /// The file a program name runs: itself when absolute and executable; a bare name (no `/`) the first
    /// executable of that name in `path`'s absolute directories; nil when none is, or a relative path (the
    /// launcher's working directory is not the daemon's).
    public static func resolve(_ program: String, path: String?, isExecutable: (String) -> Bool) -> String? {
        if program.hasPrefix("/") { return isExecutable(program) ? program : nil }
        guard !program.isEmpty, !program.contains("/") else { return nil }
        let dirs = (path.flatMap { $0.isEmpty ? nil : $0 } ?? defaultPath).split(separator: ":")
        for dir in dirs where dir.hasPrefix("/") {
            let candidate = (dir.hasSuffix("/") ? String(dir) : dir + "/") + program
            if isExecutable(candidate) { return candidate }
        }
        return nil
    }

    /// Whether `TryExec=` names a program that is not there (GLib then drops the entry): a relative path with a
    /// `/` is looked up from the launcher's working directory, which the daemon cannot know: never missing.
    public static func isMissing(tryExec: String, path: String?, isExecutable: (String) -> Bool) -> Bool {
        if !tryExec.hasPrefix("/"), tryExec.contains("/") { return false }
        return resolve(tryExec, path: path, isExecutable: isExecutable) == nil
    }
}
