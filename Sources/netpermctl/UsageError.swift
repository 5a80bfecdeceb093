import NetpermIO

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
            Output.err(Help.overview())
        case let .unknownCommand(name):
            Output.err("netpermctl: unknown command '\(name)'\n" + Self.hint(nil))
        case let .unknownOption(option, command):
            Output.err("netpermctl: unknown option '\(option)'\n" + Self.hint(command))
        case let .bad(message, command):
            Output.err("netpermctl: \(message)\n" + (command.map(Help.usage) ?? "") + Self.hint(command))
        }
        exit(.usage)
    }

    private static func hint(_ command: Command?) -> String {
        "try 'netpermctl help\(command.map { " " + $0.rawValue } ?? "")'\n"
    }
}
