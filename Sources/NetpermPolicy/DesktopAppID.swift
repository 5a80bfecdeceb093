// SPDX-License-Identifier: LGPL-2.1-or-later
/// A desktop application's ID from the unit its user's service manager runs it in, as desktops name them
/// (systemd.io/DESKTOP_ENVIRONMENTS) and as xdg-desktop-portal reads them back:
/// - `app[-LAUNCHER]-APPID-RANDOM.scope` (GNOME Shell, Phosh: `app-gnome-org.gnome.Maps-4242.scope`; Flatpak:
///   `app-flatpak-org.gnome.Maps-4242.scope`), and `.slice` alike;
/// - `app[-LAUNCHER]-APPID[@RANDOM].service` (KDE Plasma: `app-org.kde.okular@9c2d.service`);
/// - `dbus-:BUS-APPID@N.service`, a D-Bus activated app (`dbus-:1.2-org.gnome.Calculator@0.service`).
/// The ID is unescaped as systemd escapes unit names (`\x2d` for `-`) and must be a valid application ID (the
/// Desktop Entry spec's, GApplication's: at least two dot-separated elements of letters, digits, `_` and `-`, none
/// starting with a digit, at most 255 bytes). Anything else is no app: a terminal's `vte-spawn-*.scope` runs its
/// user's command, not the terminal; `session.slice` and `background.slice` units (portals, the shell, pipewire)
/// are the desktop's own, and have no `app-` name. Pure: a name in, an ID or nil out.
public enum DesktopAppID {
    /// The slices of a user's manager whose units are the desktop's own, whatever their names: never an app.
    public static let desktopSlices: Set<String> = ["session.slice", "background.slice"]

    /// The app a unit in `slice` of a user's manager is.
    public static func from(unit: String, slice: String?) -> String? {
        if let slice, desktopSlices.contains(slice) { return nil }
        return from(unit: unit)
    }

    public static func from(unit: String) -> String? {
        let u = Array(unit.utf8)
        if u.starts(with: Array("dbus-:".utf8)) { return fromDBus(u) }
        guard u.starts(with: Array("app-".utf8)) else { return nil }
        let rest = u.dropFirst(4)
        if let body = rest.stripping(suffix: ".scope") ?? rest.stripping(suffix: ".slice") {
            // The random part: after the last '-', letters and digits only (maybe none).
            guard let dash = body.lastIndex(of: 0x2D), body[(dash + 1)...].allSatisfy(isAlnum) else { return nil }
            return validated(withoutLauncher(body[..<dash]))
        }
        if let body = rest.stripping(suffix: ".service") {
            var id = body
            if let at = body.lastIndex(of: 0x40) {
                guard body[(at + 1)...].allSatisfy(isAlnum) else { return nil }
                id = body[..<at]
            } else if let trimmed = body.stripping(suffix: "-autostart") {
                id = trimmed
            }
            return validated(withoutLauncher(id))
        }
        return nil
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

    private static func validated(_ escaped: ArraySlice<UInt8>) -> String? {
        guard let id = BackslashEscapes.decode(String(decoding: escaped, as: UTF8.self), marker: UInt8(ascii: "x"),
                                               radix: 16, digits: 2, strict: true),
              isValid(id) else { return nil }
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
