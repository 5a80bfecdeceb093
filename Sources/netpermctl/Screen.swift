// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermIO
import NetpermProtocol

/// What netpermctl prints for people and scripts (not --json, which is the daemon's JSON as it is: it escapes every
/// control itself). Names, paths and messages come from the daemon, which got them from whoever named a directory,
/// a link or a unit: every string of a reply is escaped where it is parsed (`JSON.forTerminal`), so none can add a
/// line, and what is written is escaped again but for the newlines that are ours, so nothing that was missed can
/// reach the terminal as a control either. Escaping twice changes nothing (`SafeText`).
enum Screen {
    static func out(_ text: String) { Output.out(SafeText.escape(text, keepingNewlines: true)) }
    static func err(_ text: String) { Output.err(SafeText.escape(text, keepingNewlines: true)) }
}

extension JSON {
    /// The same value with every string, and every key, escaped: what human and -t output read. Requests sent back
    /// to the daemon (the agent's DECIDE) and names compared with the command line use the value as it came.
    var forTerminal: JSON {
        switch self {
        case .null, .bool, .int: return self
        case let .string(s): return .string(SafeText.escape(s))
        case let .array(a): return .array(a.map(\.forTerminal))
        case let .object(members): return .object(members.map { (SafeText.escape($0.0), $0.1.forTerminal) })
        }
    }
}
