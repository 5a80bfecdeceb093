// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// What an app's `.desktop` file says of it (the Desktop Entry Specification, as GLib reads it): its name (and its
/// translations), icon, what it runs, and whether it is there and listed, from the `[Desktop Entry]` group. Pure:
/// bytes in, an entry or nil out. Anyone may write such a file for their own apps, so the text is untrusted: at
/// most `maxBytes` read, valid UTF-8 only, names and icons bounded and made safe to show.
public struct DesktopEntry: Equatable, Sendable {
    /// `Name=`, the C locale's name: what the daemon, which has no locale of its own, shows.
    public var name: String?
    /// `Name[LOCALE]=`, by locale (`de`, `pt_BR`, `sr@latin`): at most `maxLocales` of them.
    public var localizedNames: [String: String] = [:]
    /// `Icon=`: a theme's icon name, or an absolute path.
    public var icon: String?
    /// `Hidden=true`: the spec's "deleted": the app is not there (a user's own such file deletes everyone's entry
    /// of that ID for that user).
    public var hidden = false
    /// `NoDisplay=true`: installed, not shown in menus (GLib's `g_app_info_should_show` is false): not listed
    /// before it runs, and an app still when it runs.
    public var noDisplay = false
    /// `TryExec=`: a program that must be there for the entry to count.
    public var tryExec: String?
    /// Set by the reader (DesktopFiles): `TryExec=` names a program that is not there, so GLib drops the entry.
    public var tryExecMissing = false
    /// `Exec=`'s arguments, field codes dropped (DesktopExec); nil when it has none or it does not parse.
    public var exec: [String]?
    /// The file `Exec=`'s program runs, as the reader resolved it (a bare name looked up in `PATH`); nil when not.
    public var program: String?
    /// `DBusActivatable=true`: started over the session bus under its ID, not by `Exec=`.
    public var dbusActivatable = false
    /// Set by the reader: the file the program is (device and inode, `stat` following symlinks, as /proc/PID/exe
    /// names the file that runs), when the entry may be known by what it runs (ExecIndex): for everyone's entries
    /// only a program in directories only root can write.
    public var programFile: FileKey?
    /// Set by the reader for an interpreted app (`Exec=python3 /usr/bin/foo`, or a program starting with `#!`):
    /// the interpreter /proc/PID/exe names, and the script it runs.
    public var interpreterFile: FileKey?
    public var scriptFile: FileKey?
    /// `OnlyShowIn=` and `NotShowIn=`: the desktops a menu shows it in, or not. The daemon has no desktop, so
    /// these hide nothing here: a face on a desktop may judge (APPS gives them).
    public var onlyShowIn: [String] = []
    public var notShowIn: [String] = []

    public static let maxBytes = 65536
    public static let maxNameBytes = 200
    public static let maxIconBytes = 1024
    public static let maxLocales = 64
    /// Desktops kept of `OnlyShowIn=`/`NotShowIn=`, each at most `maxDesktopBytes`.
    public static let maxDesktops = 16
    public static let maxDesktopBytes = 64
    public static let maxExecBytes = 4096

    public init(name: String? = nil, icon: String? = nil, noDisplay: Bool = false, hidden: Bool = false) {
        self.name = name; self.icon = icon; self.noDisplay = noDisplay; self.hidden = hidden
    }

    /// Whether the app is there: not deleted (`Hidden=`), its `TryExec=` program found.
    public var isInstalled: Bool { !hidden && !tryExecMissing }
    /// Whether menus list it, and so APPS before it runs.
    public var isListed: Bool { isInstalled && !noDisplay }

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
            case "Hidden": entry.hidden = value == "true"
            case "NoDisplay": entry.noDisplay = value == "true"
            case "DBusActivatable": entry.dbusActivatable = value == "true"
            case "TryExec": entry.tryExec = value.isEmpty || value.utf8.count > maxExecBytes ? nil : value
            case "Exec": entry.exec = value.utf8.count > maxExecBytes ? nil : DesktopExec.arguments(value)
            case "OnlyShowIn": entry.onlyShowIn = desktops(value)
            case "NotShowIn": entry.notShowIn = desktops(value)
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

    /// The name for a locale (`de_DE.UTF-8@euro`) as the spec matches it (LocalizedName): `lang_COUNTRY@MODIFIER`,
    /// `lang_COUNTRY`, `lang@MODIFIER`, `lang`, then `Name=`.
    public func name(locale: String?) -> String? {
        LocalizedName.pick(localizedNames, locale: locale) ?? name
    }

    /// A `;`-separated list of desktop names (`GNOME;KDE;`), bounded and safe to show.
    static func desktops(_ value: String) -> [String] {
        value.split(separator: ";").prefix(maxDesktops).compactMap { bounded(String($0), maxBytes: maxDesktopBytes) }
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

/// The desktop files the daemon found: for everyone (`XDG_DATA_DIRS`, Flatpak's and Snap's system exports) and each
/// user's own (`~/.local/share`, `~/.local/share/flatpak/exports/share`), by desktop-file ID: the first file of an ID
/// in the order of the directories, whether or not it deletes the app (`Hidden=true`, a missing `TryExec=`), as GLib
/// takes them. A user's file names only that user's apps: another uid never sees its name or icon.
public struct DesktopCatalog: Equatable, Sendable {
    public var system: [String: DesktopEntry] = [:]
    public var users: [UInt32: [String: DesktopEntry]] = [:]

    public init(system: [String: DesktopEntry] = [:], users: [UInt32: [String: DesktopEntry]] = [:]) {
        self.system = system; self.users = users
    }

    /// What `uid` sees of app `id` (its own file first, as `XDG_DATA_HOME` comes before `XDG_DATA_DIRS`, even when
    /// it deletes the app); for nil, everyone's. nil when the app is not installed for it.
    public func entry(_ id: String, uid: UInt32?) -> DesktopEntry? {
        let e = uid.flatMap { users[$0]?[id] } ?? system[id]
        return e?.isInstalled == true ? e : nil
    }

    /// The IDs each uid has installed (what makes a unit of an ID that is not reverse-DNS an app).
    public var installed: InstalledDesktopApps {
        InstalledDesktopApps(system: Set(system.filter { $0.value.isInstalled }.keys),
                             users: users.mapValues { Set($0.filter { $0.value.isInstalled }.keys) }.filter { !$0.value.isEmpty },
                             deleted: users.mapValues { Set($0.filter { !$0.value.isInstalled }.keys) }.filter { !$0.value.isEmpty })
    }

    /// The IDs menus list for `uid` (nil: everyone): installed and not `NoDisplay=`.
    public func listed(uid: UInt32?) -> Set<String> {
        var ids = Set(system.filter { $0.value.isListed }.keys)
        if let uid, let own = users[uid] {
            for (id, e) in own { if e.isListed { ids.insert(id) } else { ids.remove(id) } }
        }
        return ids
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
