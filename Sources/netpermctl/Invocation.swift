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

    /// The command line read word by word, before the command is known: the options seen, the other words, and the
    /// first problem (kept until the command is known, so the message can show that command's usage).
    private struct Words {
        var words: [String] = []
        var help = false, version = false, dashDash = false, json = false, terse = false
        var problem: UsageError?
        var onlyFor: [(option: String, commands: [Command])] = []
    }

    static func parse(_ argv: [String], defaultSocket: String) throws(UsageError) -> Invocation {
        var inv = Invocation(action: .version, socketPath: defaultSocket)
        let w = read(argv, into: &inv)
        guard let name = w.words.first else {
            if w.version { inv.action = .version; return inv }
            if w.help { inv.action = .help(nil); return inv }
            if case let .unknownOption(option, _)? = w.problem { throw .unknownOption(option, nil) }
            if let problem = w.problem { throw problem }
            throw .noCommand
        }
        guard let command = Command(rawValue: name) else { throw .unknownCommand(name) }
        inv.args = Array(w.words.dropFirst())
        if w.version { inv.action = .version; return inv }
        if w.help { inv.action = .help(command); return inv }
        if case let .unknownOption(option, _)? = w.problem { throw .unknownOption(option, command) }
        if w.json && w.terse { throw .bad("--json and --terse do not go together", command) }
        inv.mode = w.json ? .json : w.terse ? .terse : .human
        if command == .agent && inv.mode != .human {
            // Its questions are for a person: a script that answers prompts subscribes to them itself.
            throw .bad("agent asks a person: it has no \(w.json ? "--json" : "--terse") form (a script subscribes to prompts: "
                + "'SUBSCRIBE prompts' on the socket, then 'ANSWER ID CHOICE')", command)
        }
        if w.dashDash && command != .wait && command != .run { throw .bad("'-- COMMAND' is only for wait and run", command) }
        if let wrong = w.onlyFor.first(where: { !$0.commands.contains(command) }) {
            throw .bad("\(wrong.option) is only for " + wrong.commands.map(\.rawValue).joined(separator: " and "), command)
        }
        switch w.problem {
        case let .bad(message, nil)?: throw .bad(message, command)
        case let problem?: throw problem
        case nil: break
        }
        inv.action = try inv.checkArguments(of: command, name)
        return inv
    }

    /// The options into `inv`, the rest into the words.
    private static func read(_ argv: [String], into inv: inout Invocation) -> Words {
        var w = Words()
        var i = 0
        func value(_ option: String, _ what: String, for command: Command? = nil) -> String? {
            guard i < argv.count, !argv[i].hasPrefix("-") else {
                w.problem = w.problem ?? .bad("\(option) needs \(what)", command)
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
                w.dashDash = true
                inv.program = Array(argv[i...])
                i = argv.count
            case "--socket": inv.socketPath = value(a, "a path") ?? inv.socketPath
            case "-j", "--json": w.json = true
            case "-t", "--terse": w.terse = true
            case "-h", "--help": w.help = true
            case "--version": w.version = true
            case "--once":
                inv.once = true
                w.onlyFor.append((a, [.decide]))
            case "--notify":
                inv.notify = true
                w.onlyFor.append((a, [.agent]))
            case "--output":
                inv.output = value(a, "a file", for: .metrics)
                w.onlyFor.append((a, [.metrics]))
            case "--app":
                inv.waitApp = value(a, "an app id", for: .wait)
                w.onlyFor.append((a, [.wait, .run]))
            case "--timeout":
                w.onlyFor.append((a, [.wait]))
                guard let v = value(a, "seconds, e.g. 30 or 0.5", for: .wait) else { break }
                guard let usec = Seconds.parseMicroseconds(v) else {
                    w.problem = w.problem ?? .bad("--timeout needs seconds, e.g. 30 or 0.5, not '\(v)'", .wait)
                    break
                }
                inv.waitTimeout = usec
            default:
                if a.hasPrefix("-") && a != "-" {
                    w.problem = w.problem ?? .unknownOption(a, nil)
                } else {
                    w.words.append(a)
                }
            }
        }
        return w
    }

    /// The command's arguments checked: what it is to do (help's topic is a command's help).
    private func checkArguments(of command: Command, _ name: String) throws(UsageError) -> Action {
        let (required, optional) = command.arguments
        if args.count < required.count {
            throw .bad("\(name) needs " + required.joined(separator: " ") + " (missing "
                + Self.list(Array(required[args.count...])) + ")", command)
        }
        if args.count > required.count + optional.count {
            throw .bad("\(name): unexpected argument '\(args[required.count + optional.count])'", command)
        }
        if command == .help {
            guard let topic = args.first else { return .help(nil) }
            guard let c = Command(rawValue: topic) else { throw .unknownCommand(topic) }
            return .help(c)
        }
        // `usage APP1 APP2` is no reset: one app at most.
        if command == .usage, args.count == 2, args[0] != "reset" {
            throw .bad("usage: unexpected argument '\(args[1])'", command)
        }
        // `report APP1 APP2`, `report on APP`: only clear takes an app after it.
        if command == .report, args.count == 2, args[0] != "clear" {
            throw .bad("report: unexpected argument '\(args[1])'", command)
        }
        if command == .run {
            guard waitApp != nil else { throw .bad("run needs --app APP", command) }
            guard !program.isEmpty else { throw .bad("run needs -- COMMAND", command) }
        }
        return .run(command)
    }

    /// "A", "A and B", "A, B and C"
    private static func list(_ items: [String]) -> String {
        items.count <= 1 ? items.joined() : items.dropLast().joined(separator: ", ") + " and " + items.last!
    }
}
