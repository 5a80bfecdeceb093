// SPDX-License-Identifier: LGPL-2.1-or-later
/// The transient scope `netpermctl run --app NAME -- COMMAND` starts COMMAND in: `app-netpermd-NAME-TAG.scope`,
/// NAME escaped as systemd escapes unit names (`-` is `\x2d`), TAG letters, digits and `_` (the caller's pid and a
/// random number, so a scope that outlives its first process never blocks the next run). The daemon takes a
/// process in such a scope, and the rules take its cgroup, for `[App NAME]` whatever that app's other keys: that is
/// how an app the kernel cannot otherwise tell (`Executable=` only) gets a cgroup. Started by root it is a system
/// unit; started by a user it is that user's own unit, which only narrows (docs/ENFORCEMENT.md).
public enum RunScope {
    static let prefix = "app-netpermd-"
    static let suffix = ".scope"
    /// systemd's limit on a unit name's length (UNIT_NAME_MAX, its NUL included).
    public static let maxNameLength = 255

    /// The scope's unit name; nil when `app` is no valid app id or the name would be too long.
    public static func unitName(app: String, tag: String) -> String? {
        guard AppPolicy.isValidID(app), isTag(tag) else { return nil }
        let name = prefix + escape(app) + "-" + tag + suffix
        return name.utf8.count <= maxNameLength ? name : nil
    }

    /// The app a unit name is a run scope of; nil for any other unit (or an escaping systemd would not make).
    public static func app(fromUnit unit: String) -> String? {
        // Every unit the rules see is asked about (thousands, names up to the kernel's 4 KiB from users): the bytes
        // first, as a run scope's name is no longer than systemd's limit, before a walk by Character.
        let u = unit.utf8
        guard u.count <= maxNameLength, u.starts(with: prefix.utf8), unit.hasSuffix(suffix) else { return nil }
        let middle = unit.dropFirst(prefix.count).dropLast(suffix.count)
        guard let dash = middle.lastIndex(of: "-"), isTag(middle[middle.index(after: dash)...]) else { return nil }
        let escaped = String(middle[..<dash])
        guard let app = unescape(escaped), AppPolicy.isValidID(app), escape(app) == escaped else { return nil }
        return app
    }

    /// As `systemd-escape`: of an app id's characters only `-` is not valid in a unit name's part.
    static func escape(_ app: String) -> String {
        var out = ""
        for c in app.unicodeScalars {
            if c == "-" { out += "\\x2d" } else { out.unicodeScalars.append(c) }
        }
        return out
    }

    static func unescape(_ s: String) -> String? {
        BackslashEscapes.decode(s, marker: UInt8(ascii: "x"), radix: 16, digits: 2, strict: true)
    }

    static func isTag<S: StringProtocol>(_ s: S) -> Bool {
        !s.isEmpty && s.unicodeScalars.allSatisfy {
            AppPolicy.isLetter($0) || ("0"..."9").contains($0) || $0 == "_"
        }
    }
}
