// SPDX-License-Identifier: LGPL-2.1-or-later
/// A desktop application's ID from the unit its user's service manager runs it in, as desktops name them
/// (systemd.io/DESKTOP_ENVIRONMENTS) and as xdg-desktop-portal reads them back:
/// - `app[-LAUNCHER]-APPID-RANDOM.scope` (GNOME Shell, Phosh: `app-gnome-org.gnome.Maps-4242.scope`; Flatpak:
///   `app-flatpak-org.gnome.Maps-4242.scope`; uwsm and app2unit: `app-DESKTOP-APPID-RANDOM.scope`; KDE:
///   `app-APPID-RANDOM.scope`), and `.slice` alike;
/// - `app[-LAUNCHER]-APPID[@RANDOM].service` (KDE Plasma: `app-org.kde.okular@9c2d.service`; uwsm, app2unit:
///   `app-DESKTOP-APPID@RANDOM.service`), `app[-LAUNCHER]-APPID-autostart.service` (xdg-autostart);
/// - `dbus-:BUS-APPID@N.service`, a D-Bus activated app (`dbus-:1.2-org.gnome.Calculator@0.service`);
/// - `snap.SNAP.APP.UUID.scope`, older snapd's `snap.SNAP.APP-UUID.scope`: the desktop ID `SNAP_APP`, as snapd
///   names its desktop files (`firefox_firefox.desktop`).
/// The ID is unescaped as systemd escapes unit names (`\x2d` for `-`: GNOME Shell escapes every byte outside
/// `[A-Za-z0-9:_.]`, so `app-gnome-firefox\x2desr-4242.scope` is `firefox-esr` and nothing else). A valid
/// application ID (the Desktop Entry spec's reverse-DNS form, GApplication's: at least two dot-separated elements
/// of letters, digits, `_` and `-`, none starting with a digit, at most 255 bytes) is an app by its name, as
/// before; any other desktop-file ID (`firefox-esr`, `vlc`, `firefox_firefox`) only where the unit's user has an
/// entry of that ID installed (InstalledDesktopApps): a name read from a unit whose dashes were not escaped may be
/// read more than one way (`app-gnome-vlc-12.scope`: `vlc` after the launcher `gnome`, or `gnome-vlc`), and the
/// installed one is the app. A terminal's `vte-spawn-*.scope` inside the terminal's own slice
/// (`app-org.gnome.Terminal.slice`) is the terminal's app. Anything else is no app: `session.slice` and
/// `background.slice` units (portals, the shell, pipewire) are the desktop's own. Pure: a name in, an ID or nil out.
public enum DesktopAppID {
    /// The slices of a user's manager whose units are the desktop's own, whatever their names: never an app.
    public static let desktopSlices: Set<String> = ["session.slice", "background.slice"]

    /// The app a unit in `slice` of a user's manager is, by its name alone: a reverse-DNS ID, never another.
    public static func from(unit: String, slice: String?) -> String? {
        from(unit: unit, slice: slice, uid: nil, installed: InstalledDesktopApps())
    }

    public static func from(unit: String) -> String? { from(unit: unit, slice: nil) }

    /// The app a unit in `slice` of user `uid`'s manager is: the first way of reading its name that gives a
    /// reverse-DNS ID (as read before IDs of other forms were known), or an ID `installed` has for `uid`.
    public static func from(unit: String, slice: String?, uid: UInt32?, installed: InstalledDesktopApps) -> String? {
        if let slice, desktopSlices.contains(slice) { return nil }
        // A terminal's command scope inside the terminal's own slice (GNOME Terminal:
        // `app-org.gnome.Terminal.slice/vte-spawn-X.scope`) is the terminal's, as macOS holds a command to Terminal.
        let named = isTerminalScope(unit) ? slice.flatMap(sliceCandidates) ?? [] : candidates(unit: unit)
        for c in named {
            if c.byName, isValid(c.id) { return c.id }
            if let uid, installed.contains(c.id, uid: uid) { return c.id }
        }
        return nil
    }

    /// The desktop-file IDs a unit's name may be read as, the likeliest first; `byName`: the one reading that a
    /// reverse-DNS ID is taken from without an installed entry.
    public static func candidates(unit: String) -> [(id: String, byName: Bool)] {
        let u = Array(unit.utf8)
        guard u.count <= 1024 else { return [] }
        if u.starts(with: Array("dbus-:".utf8)) { return fromDBus(u).map { [($0, true)] } ?? [] }
        if u.starts(with: Array("snap.".utf8)) { return fromSnap(u).map { [($0, false)] } ?? [] }
        guard u.starts(with: Array("app-".utf8)) else { return [] }
        let rest = u.dropFirst(4)
        var named: ArraySlice<UInt8>
        if let body = rest.stripping(suffix: ".scope") ?? rest.stripping(suffix: ".slice") {
            // The random part: after the last '-', letters and digits only (maybe none).
            guard let dash = body.lastIndex(of: 0x2D), body[(dash + 1)...].allSatisfy(isAlnum) else { return [] }
            named = body[..<dash]
        } else if let body = rest.stripping(suffix: ".service") {
            named = body
            if let at = body.lastIndex(of: 0x40) {
                guard body[(at + 1)...].allSatisfy(isAlnum) else { return [] }
                named = body[..<at]
            } else if let trimmed = body.stripping(suffix: "-autostart") {
                named = trimmed
            }
        } else {
            return []
        }
        var out: [(id: String, byName: Bool)] = []
        let stripped = withoutLauncher(named)
        let readings = stripped.startIndex == named.startIndex ? [named] : [stripped, named]
        for (i, reading) in readings.enumerated() {
            if let id = unescaped(reading), isFileID(id) { out.append((id, i == 0)) }
        }
        return out
    }

    /// A terminal's per-command scope (VTE's `vte-spawn-UUID.scope`): what runs in it is the terminal's, or an app
    /// of its own when it runs one (ExecIndex).
    public static func isTerminalScope(_ unit: some StringProtocol) -> Bool {
        unit.hasPrefix("vte-spawn-") && unit.hasSuffix(".scope")
    }

    /// The IDs an app's slice (`app-org.gnome.Terminal.slice`, `app-gnome-org.gnome.Terminal-12.slice`) may be read
    /// as: with a random part or without.
    static func sliceCandidates(_ slice: String) -> [(id: String, byName: Bool)]? {
        let u = Array(slice.utf8)
        guard u.count <= 1024, u.starts(with: Array("app-".utf8)), let body = u.dropFirst(4).stripping(suffix: ".slice")
        else { return nil }
        var out = candidates(unit: slice)
        for (i, reading) in [body, withoutLauncher(body)].enumerated() where i == 0 || reading.startIndex != body.startIndex {
            if let id = unescaped(reading), isFileID(id), !out.contains(where: { $0.id == id }) { out.append((id, i == 0)) }
        }
        return out
    }

    /// A launcher's scope for app `id` (`app-LAUNCHER-ID-RANDOM.scope`), the ID escaped as GNOME Shell escapes it
    /// (every byte outside `[A-Za-z0-9:_.]` as `\xNN`), so that the name has one reading: `firefox-esr` is
    /// `app-netpermd-firefox\x2desr-4242.scope`.
    public static func unitName(launcher: String, id: String, random: String) -> String {
        var escaped = ""
        for b in id.utf8 {
            if isAlnum(b) || b == 0x3A || b == 0x5F || b == 0x2E {
                escaped.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                let hex = String(b, radix: 16)
                escaped += "\\x" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return "app-\(launcher)-\(escaped)-\(random).scope"
    }

    /// A desktop-file ID this daemon takes (the spec allows any file name; faces and the protocol need an app id):
    /// a letter, then letters, digits, `.`, `-` and `_`, at most 255 bytes. Debian's `firefox-esr`, `vlc`,
    /// `libreoffice-writer`, Snap's `firefox_firefox`, KDE 4's `kde4-okular` are; `0ad` and names with spaces are not.
    public static func isFileID(_ id: String) -> Bool {
        guard id.utf8.count <= 255, let first = id.utf8.first, isLetter(first) else { return false }
        return id.utf8.allSatisfy { isAlnum($0) || $0 == 0x2E || $0 == 0x2D || $0 == 0x5F }
    }

    /// The desktop-file ID of a file at `path` below `applications/` (the spec: `/` turned into `-`, `.desktop`
    /// dropped: `kde4/okular.desktop` is `kde4-okular`), nil when that is no ID this daemon takes.
    public static func fileID(relativePath path: [String]) -> String? {
        guard let last = path.last, last.hasSuffix(".desktop"), last.utf8.count > 8 else { return nil }
        let id = (path.dropLast() + [String(last.dropLast(8))]).joined(separator: "-")
        return isFileID(id) ? id : nil
    }

    /// `snap.SNAP.APP.UUID.scope` or `snap.SNAP.APP-UUID.scope`: `SNAP_APP`. A hook's scope
    /// (`snap.SNAP.hook.NAME-UUID.scope`) and a parallel instance's (`SNAP_KEY`) are no desktop app.
    private static func fromSnap(_ u: [UInt8]) -> String? {
        guard let body = u.dropFirst(5).stripping(suffix: ".scope"), body.count > 37 else { return nil }
        let uuid = body.suffix(36)
        let sep = body[body.endIndex - 37]
        guard sep == 0x2E || sep == 0x2D else { return nil }
        for (i, c) in uuid.enumerated() {
            let dash = i == 8 || i == 13 || i == 18 || i == 23
            guard dash ? c == 0x2D : ((0x30...0x39).contains(c) || (0x61...0x66).contains(c)) else { return nil }
        }
        let named = body.prefix(body.count - 37)
        let parts = named.split(separator: 0x2E, omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { isAlnum($0) || $0 == 0x2D } }) else {
            return nil
        }
        let id = String(decoding: parts[0], as: UTF8.self) + "_" + String(decoding: parts[1], as: UTF8.self)
        return isFileID(id) ? id : nil
    }

    /// `dbus-:1.2-APPID@N.service`: the bus's unique name, then the ID.
    private static func fromDBus(_ u: [UInt8]) -> String? {
        guard let body = u.dropFirst(6).stripping(suffix: ".service"), let at = body.lastIndex(of: 0x40),
              body[(at + 1)...].allSatisfy(isAlnum) else { return nil }
        let named = body[..<at]
        guard let dash = named.firstIndex(of: 0x2D),
              named[..<dash].allSatisfy({ $0 == 0x2E || (0x30...0x39).contains($0) }) else { return nil }
        return validated(named[(dash + 1)...])
    }

    /// The optional launcher: letters and digits, then '-', before the ID; only when what follows is an ID (an ID's
    /// first element may itself be letters and digits only, as `org` of `org.gnome.Maps` is).
    private static func withoutLauncher(_ s: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        guard let dash = s.firstIndex(of: 0x2D), dash > s.startIndex, s[..<dash].allSatisfy(isAlnum) else { return s }
        return s[(dash + 1)...]
    }

    private static func isAlnum(_ c: UInt8) -> Bool {
        (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c)
    }

    private static func isLetter(_ c: UInt8) -> Bool { (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c) }

    private static func unescaped(_ escaped: ArraySlice<UInt8>) -> String? {
        BackslashEscapes.decode(String(decoding: escaped, as: UTF8.self), marker: UInt8(ascii: "x"), radix: 16,
                                digits: 2, strict: true)
    }

    private static func validated(_ escaped: ArraySlice<UInt8>) -> String? {
        guard let id = unescaped(escaped), isValid(id) else { return nil }
        return id
    }

    /// GApplication's and the Desktop Entry spec's rule for an application ID.
    public static func isValid(_ id: String) -> Bool {
        let b = Array(id.utf8)
        guard !b.isEmpty, b.count <= 255, b.first != 0x2E else { return false }
        let elements = b.split(separator: 0x2E, omittingEmptySubsequences: false)
        guard elements.count >= 2 else { return false }
        for e in elements {
            guard let first = e.first, !(0x30...0x39).contains(first),
                  e.allSatisfy({ isAlnum($0) || $0 == 0x5F || $0 == 0x2D }) else { return false }
        }
        return true
    }
}

private extension ArraySlice where Element == UInt8 {
    func stripping(suffix: String) -> ArraySlice<UInt8>? {
        let s = Array(suffix.utf8)
        guard count > s.count, self.suffix(s.count).elementsEqual(s) else { return nil }
        return self.dropLast(s.count)
    }
}
