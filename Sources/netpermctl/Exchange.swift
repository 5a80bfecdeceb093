// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermProtocol

/// One request, one reply: every command that asks the daemon once and prints the answer.
enum Exchange {
    /// The daemon's successful reply (its line as sent, and parsed). An error reply or a failed connection
    /// is reported here, and netpermctl exits.
    static func run(_ request: String, socketPath: String, mode: OutputMode) -> (line: String, reply: JSON) {
        let line = answer(request, socketPath: socketPath)
        let reply: JSON
        do { reply = try JSONParser.parse(line) } catch {
            die("unreadable reply from netpermd: \(SafeText.excerpt(line, maxBytes: 200))", .failed)
        }
        guard reply["ok"]?.boolValue == true else { refused(line, reply.forTerminal, mode: mode) }
        return (line, reply)
    }

    /// The daemon's line for `request`. A function of its own, returning the line: written as `let line: String`
    /// set inside a do/catch whose other ways out call die(), swiftc 6.3.1 -O read an uninitialised stack slot for
    /// it on the error path below, and every `--json` error reply crashed the release build (issue 23).
    static func answer(_ request: String, socketPath: String) -> String {
        let conn = Connection.open(socketPath)
        do {
            if let line = try conn.request(request) { return line }
        } catch { die("lost the connection to netpermd: \(error)", .unreachable) }
        die("netpermd closed the connection without answering", .unreachable)
    }

    /// An error reply: the daemon's JSON as it is with --json, its code and message on stderr otherwise; exit 1.
    static func refused(_ line: String, _ shown: JSON, mode: OutputMode) -> Never {
        switch mode {
        case .json:
            Output.out(line + "\n")
            exit(.failed)
        case .human, .terse:
            die("\(shown["error"]?.stringValue ?? "error"): \(shown["message"]?.stringValue ?? line)", .failed)
        }
    }
}
