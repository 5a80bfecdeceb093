// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One run of the command matrix: a netpermctl command line, who runs it, against what, and what must come of it in
/// each output mode (CommandMatrixTests).
struct MatrixCase: CustomStringConvertible {
    enum User { case root, nobody }
    /// The daemon's socket, a path where none is, or one in a directory only root may enter.
    enum Socket { case daemon, missing, locked }

    /// What --json prints: the daemon's reply to `verb` (asked by the same user through socat; `exact`, or with the
    /// same members where the reply changes from one request to the next), one error reply with that code, events
    /// (objects, one a line), nothing, or words (the command has no JSON: help, agent, run).
    enum JSONOutput {
        case reply(String, exact: Bool)
        case error(String)
        case objects
        case nothing
        case words
    }

    /// What -t prints: key:value lines, table rows of N fields, event records, nothing, or words.
    enum TerseOutput {
        case keyValue
        case rows(Int)
        case records
        case nothing
        case words
    }

    var command: String
    /// What the case is: success, not-found, permission-denied, usage, broken-policy, unreachable, timeout, ...
    var kind: String
    var args: [String]
    var user = User.root
    var socket = Socket.daemon
    /// The exit code the README documents for it.
    var exit: Int32
    var json: JSONOutput
    var terse: TerseOutput
    /// Whether the human output has something on stdout.
    var humanOutput: Bool
    var input: [UInt8] = []
    /// Runs until stopped (monitor): it must still run once it printed, then it is stopped with SIGINT.
    var untilInterrupted = false
    /// Put before netpermctl (after setpriv): an environment, a mount namespace.
    var wrapper: [String] = []
    /// Only in people's form (-t and --json are refused: the agent), or only in the machine forms.
    var humanOnly: Bool? = nil

    var description: String {
        "\(command) [\(kind)] as \(user == .root ? "root" : "nobody"): netpermctl \(args.joined(separator: " "))"
    }
}

extension MatrixCase {
    /// A command the daemon answers with a reply: the same reply printed in each mode.
    static func success(_ command: String, _ args: [String], verb: String?, exact: Bool = true,
                        terse: TerseOutput = .keyValue, user: User = .root) -> MatrixCase {
        MatrixCase(command: command, kind: "success", args: args, user: user, exit: 0,
                   json: verb.map { .reply($0, exact: exact) } ?? .objects, terse: terse, humanOutput: true)
    }

    /// The daemon answered with an error: exit 1, its reply with --json, only a message on stderr otherwise.
    static func refused(_ command: String, _ kind: String, _ args: [String], code: String,
                        user: User = .root) -> MatrixCase {
        MatrixCase(command: command, kind: kind, args: args, user: user, exit: 1, json: .error(code), terse: .nothing,
                   humanOutput: false)
    }

    static func usage(_ command: String, _ args: [String], user: User = .root) -> MatrixCase {
        MatrixCase(command: command, kind: "usage", args: args, user: user, exit: 2, json: .nothing, terse: .nothing,
                   humanOutput: false)
    }

    static func unreachable(_ command: String, _ args: [String], user: User, socket: Socket = .missing) -> MatrixCase {
        MatrixCase(command: command, kind: "unreachable", args: args, user: user, socket: socket, exit: 3,
                   json: .nothing, terse: .nothing, humanOutput: false)
    }

    /// The usual cases of a command that asks the daemon once: success and unreachable as root and as nobody, and
    /// a usage error.
    static func asking(_ command: String, _ args: [String] = [], verb: String, exact: Bool = true,
                       terse: TerseOutput = .keyValue, usage: [String]) -> [MatrixCase] {
        [success(command, args, verb: verb, exact: exact, terse: terse),
         success(command, args, verb: verb, exact: exact, terse: terse, user: .nobody),
         self.usage(command, usage),
         unreachable(command, args, user: .root), unreachable(command, args, user: .nobody)]
    }

    /// A command any user may use for their own processes (`[Defaults] UserDecisions=yes`, the default), root for
    /// everyone's: success as root and as nobody, a usage error, unreachable.
    static func own(_ command: String, _ args: [String] = [], verb: String, exact: Bool = true,
                    terse: TerseOutput = .keyValue, usage: [String]) -> [MatrixCase] {
        asking(command, args, verb: verb, exact: exact, terse: terse, usage: usage)
    }

    /// A privileged command: success as root, permission-denied as nobody, a usage error, unreachable.
    static func privileged(_ command: String, _ args: [String] = [], verb: String, exact: Bool = true,
                           terse: TerseOutput = .keyValue, usage: [String]) -> [MatrixCase] {
        [success(command, args, verb: verb, exact: exact, terse: terse),
         refused(command, "permission-denied", args, code: "permission-denied", user: .nobody),
         self.usage(command, usage),
         unreachable(command, args, user: .root), unreachable(command, args, user: .nobody)]
    }
}

/// The lines of -t output as records: key:value lines (each key once), or rows of one number of fields.
enum TerseRecords {
    /// Splits a -t line on the ':' that are not escaped, and unescapes the fields.
    static func fields(_ line: String) -> [String] {
        var fields = [""]
        var escaped = false
        for c in line {
            if escaped {
                fields[fields.count - 1].append(c)
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else if c == ":" {
                fields.append("")
            } else {
                fields[fields.count - 1].append(c)
            }
        }
        return fields
    }

    /// Why `lines` are not key:value records, or nil.
    static func keyValueProblem(_ lines: [String]) -> String? {
        guard !lines.isEmpty else { return "no lines" }
        var keys: Set<String> = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { return "no ':' in '\(line)'" }
            let key = String(line[..<colon])
            guard !key.isEmpty, key.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" }) else {
                return "'\(key)' is not a key, in '\(line)'"
            }
            guard keys.insert(key).inserted else { return "the key '\(key)' twice" }
            guard fields(line).count == 2 else { return "an unescaped ':' in the value of '\(line)'" }
        }
        return nil
    }

    static func rowsProblem(_ lines: [String], fields n: Int) -> String? {
        for line in lines where fields(line).count != n { return "'\(line)' has \(fields(line).count) fields, not \(n)" }
        return nil
    }
}
