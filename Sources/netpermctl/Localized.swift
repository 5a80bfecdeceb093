// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO

/// The notification agent's words in the person's language (gettext domain `netpermctl`, catalogues in
/// po/netpermctl/): started by `agent --notify`, so every other command's output stays as scripts read it.
enum Localized {
    nonisolated(unsafe) private static var messages: Messages?

    /// Binds the catalogues: `$NETPERMCTL_LOCALEDIR`, else `share/locale` beside the program's `bin`.
    static func start() {
        var dir = getenv("NETPERMCTL_LOCALEDIR").map { String(cString: $0) }
        if dir == nil, let exe = realpath("/proc/self/exe", nil) {
            defer { free(exe) }
            var path = String(cString: exe).split(separator: "/").dropLast(2).joined(separator: "/")
            path = "/" + path + "/share/locale"
            dir = path
        }
        messages = Messages(domain: "netpermctl", directory: dir ?? "/usr/share/locale")
    }

    /// `text` in the person's language (English before `start()` or without a catalogue).
    static func tr(_ text: String) -> String { messages?(text) ?? text }

    /// `tr(text)` with its `{name}`s filled: a translation may put them in any order.
    static func tr(_ text: String, _ values: [(String, String)]) -> String {
        values.reduce(tr(text)) { s, kv in s.replacing("{" + kv.0 + "}", with: kv.1) }
    }

    /// Marks a word for the catalogue without translating it (the daemon's labels, translated where shown).
    static func N_(_ text: String) -> String { text }
}
