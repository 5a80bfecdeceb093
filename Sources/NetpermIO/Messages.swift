// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// A program's words in the person's language (gettext): the catalogue of `domain` under `directory`
/// (`LANG/LC_MESSAGES/DOMAIN.mo`), for the locale `LC_ALL`, `LC_MESSAGES` or `LANG` names. Only LC_MESSAGES is taken
/// from the environment: numbers and dates a program writes for other programs keep the C locale's form.
public struct Messages: Sendable {
    public let domain: String

    public init(domain: String, directory: String) {
        _ = setlocale(LC_MESSAGES, "")
        _ = bindtextdomain(domain, directory)
        // The catalogue's own UTF-8, whatever LC_CTYPE says (the C locale's would turn every CJK letter into '?').
        _ = bind_textdomain_codeset(domain, "UTF-8")
        self.domain = domain
    }

    /// `text` translated, or itself when the catalogue has no translation of it.
    public func callAsFunction(_ text: String) -> String {
        // Without a translation dgettext returns its argument: the C string lives only inside this closure, so the
        // result is copied here (read after the call, it was freed memory, and the agent died on its first prompt).
        text.withCString { msgid in
            guard let translated = dgettext(domain, msgid), translated != UnsafeMutablePointer(mutating: msgid) else { return text }
            return String(cString: translated)
        }
    }
}
