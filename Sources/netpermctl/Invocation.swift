// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// What a command line asks for: options may come before or after the command, never after `--`.
struct Invocation {
    enum Action {
        case run(Command)
        case help(Command?)
        case version
    }

    var action: Action
    var socketPath: String
    var mode = OutputMode.human
    /// The positional arguments after the command's name.
    var args: [String] = []
    var once = false
    /// `agent --notify`: desktop notifications, not the terminal.
    var notify = false
    var waitApp: String?
    /// In microseconds, as the daemon takes a WAIT's time-out.
    var waitTimeout: UInt64?
    /// `metrics --output FILE`.
    var output: String?
    /// What follows `--`: the program `wait` runs.
    var program: [String] = []

    static func parse(_ argv: [String], defaultSocket: String) throws(UsageError) -> Invocation {
        var inv = Invocation(action: .version, socketPath: defaultSocket)
        var words: [String] = []
        var help = false, version = false, dashDash = false, json = false, terse = false
        // Kept until the command is known, so the message can show that command's usage.
        var problem: UsageError?
        var onlyFor: [(option: String, commands: [Command])] = []
        var i = 0
        func value(_ option: String, _ what: String, for command: Command? = nil) -> String? {
            guard i < argv.count, !argv[i].hasPrefix("-") else {
                problem = problem ?? .bad("\(option) needs \(what)", command)
                return nil
            }
            i += 1
            return argv[i - 1]
        }
        while i < argv.count {
            let a = argv[i]
            i += 1
            switch a {
            case "--":
                dashDash = true
                inv.program = Array(argv[i...])
                i = argv.count
            case "--socket": inv.socketPath = value(a, "a path") ?? inv.socketPath
            case "-j", "--json": json = true
            case "-t", "--terse": terse = true
            case "-h", "--help": help = true
            case "--version": version = true
            case "--once":
                inv.once = true
                onlyFor.append((a, [.decide]))
            case "--notify":
                inv.notify = true
                onlyFor.append((a, [.agent]))
            case "--output":
                inv.output = value(a, "a file", for: .metrics)
                onlyFor.append((a, [.metrics]))
            case "--app":
                inv.waitApp = value(a, "an app id", for: .wait)
                onlyFor.append((a, [.wait, .run]))
            case "--timeout":
                onlyFor.append((a, [.wait]))
                guard let v = value(a, "seconds, e.g. 30 or 0.5", for: .wait) else { break }
                guard let usec = Seconds.parseMicroseconds(v) else {
                    problem = problem ?? .bad("--timeout needs seconds, e.g. 30 or 0.5, not '\(v)'", .wait)
                    break
                }
                inv.waitTimeout = usec
            default:
                if a.hasPrefix("-") && a != "-" {
                    problem = problem ?? .unknownOption(a, nil)
                } else {
                    words.append(a)
                }
            }
        }

        guard let name = words.first else {
            if version { inv.action = .version; return inv }
            if help { inv.action = .help(nil); return inv }
            if case let .unknownOption(option, _)? = problem { throw .unknownOption(option, nil) }
            if let problem { throw problem }
            throw .noCommand
        }
        guard let command = Command(rawValue: name) else { throw .unknownCommand(name) }
        inv.args = Array(words.dropFirst())
        if version { inv.action = .version; return inv }
        if help { inv.action = .help(command); return inv }
        if case let .unknownOption(option, _)? = problem { throw .unknownOption(option, command) }
        if json && terse { throw .bad("--json and --terse do not go together", command) }
        inv.mode = json ? .json : terse ? .terse : .human
        if command == .agent && inv.mode != .human {
            // Its questions are for a person: a script that answers prompts subscribes to them itself.
            throw .bad("agent asks a person: it has no \(json ? "--json" : "--terse") form (a script subscribes to prompts: "
                + "'SUBSCRIBE prompts' on the socket, then 'ANSWER ID CHOICE')", command)
        }
        if dashDash && command != .wait && command != .run { throw .bad("'-- COMMAND' is only for wait and run", command) }
        if let wrong = onlyFor.first(where: { !$0.commands.contains(command) }) {
            throw .bad("\(wrong.option) is only for " + wrong.commands.map(\.rawValue).joined(separator: " and "), command)
        }
        switch problem {
        case let .bad(message, nil)?: throw .bad(message, command)
        case let problem?: throw problem
        case nil: break
        }
        let (required, optional) = command.arguments
        if inv.args.count < required.count {
            throw .bad("\(name) needs " + required.joined(separator: " ") + " (missing "
                + Self.list(Array(required[inv.args.count...])) + ")", command)
        }
        if inv.args.count > required.count + optional.count {
            throw .bad("\(name): unexpected argument '\(inv.args[required.count + optional.count])'", command)
        }
        if command == .help {
            guard let topic = inv.args.first else { inv.action = .help(nil); return inv }
            guard let c = Command(rawValue: topic) else { throw .unknownCommand(topic) }
            inv.action = .help(c)
            return inv
        }
        // `usage APP1 APP2` is no reset: one app at most.
        if command == .usage, inv.args.count == 2, inv.args[0] != "reset" {
            throw .bad("usage: unexpected argument '\(inv.args[1])'", command)
        }
        // `report APP1 APP2`, `report on APP`: only clear takes an app after it.
        if command == .report, inv.args.count == 2, inv.args[0] != "clear" {
            throw .bad("report: unexpected argument '\(inv.args[1])'", command)
        }
        if command == .run {
            guard inv.waitApp != nil else { throw .bad("run needs --app APP", command) }
            guard !inv.program.isEmpty else { throw .bad("run needs -- COMMAND", command) }
        }
        inv.action = .run(command)
        return inv
    }

    /// "A", "A and B", "A, B and C"
    private static func list(_ items: [String]) -> String {
        items.count <= 1 ? items.joined() : items.dropLast().joined(separator: ", ") + " and " + items.last!
    }
}
