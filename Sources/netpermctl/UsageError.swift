// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermIO
import NetpermProtocol

/// A command line netpermctl cannot run. Reported in a line or two and a pointer to `help`, never the whole
/// command list, so the one thing that is wrong stays visible.
enum UsageError: Error {
    case noCommand
    case unknownCommand(String)
    case unknownOption(String, Command?)
    /// Wrong arguments or option values for a command: the message, then the command's usage line.
    case bad(String, Command?)

    func report() -> Never {
        switch self {
        case .noCommand:
            Screen.err(Help.overview())
        case let .unknownCommand(name):
            Screen.err("netpermctl: unknown command '\(SafeText.escape(name))'\n" + Self.hint(nil))
        case let .unknownOption(option, command):
            Screen.err("netpermctl: unknown option '\(SafeText.escape(option))'\n" + Self.hint(command))
        case let .bad(message, command):
            Screen.err("netpermctl: \(SafeText.escape(message))\n" + (command.map(Help.usage) ?? "") + Self.hint(command))
        }
        exit(.usage)
    }

    private static func hint(_ command: Command?) -> String {
        "try 'netpermctl help\(command.map { " " + $0.rawValue } ?? "")'\n"
    }
}
