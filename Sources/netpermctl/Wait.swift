// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermProtocol

/// `netpermctl wait`: blocks until the app may use the network, then execs the command.
enum Wait {
    /// `timeout` in microseconds, as parsed by the daemon's own rule (Seconds.parseMicroseconds): what is left of
    /// it is sent to the microsecond, never rounded up, so every time-out accepted here is one the daemon accepts.
    static func run(socketPath: String, app: String?, timeout: UInt64?, command: [String], mode: OutputMode) -> Never {
        let deadline = timeout.map { Clock.monotonicMicroseconds() + $0 }
        while true {
            let now = Clock.monotonicMicroseconds()
            let remaining = deadline.map { $0 > now ? $0 - now : 0 }
            let request = Request.wait(app: app, timeout: remaining).line
            let conn: Connection
            do { conn = try Connection(path: socketPath) } catch {
                // Not running yet, or restarting: keep trying within the time-out. A refusal stays a refusal.
                let why = Unreachable(error)
                guard why.mayResolveItself else { die(why.message(socketPath), .unreachable) }
                if let deadline, Clock.monotonicMicroseconds() >= deadline {
                    die(why.message(socketPath) + "; gave up at the time-out", .unreachable)
                }
                usleep(200_000)
                continue
            }
            let line: String
            do {
                guard let l = try conn.request(request) else { throw Errno(ECONNRESET) }
                line = l
            } catch {
                // The daemon went away while we waited (a restart): ask the next one, within the time-out.
                if let deadline, Clock.monotonicMicroseconds() >= deadline {
                    die("lost the connection to netpermd: \(error); gave up at the time-out", .unreachable)
                }
                usleep(200_000)
                continue
            }
            // Only shown, never sent back: escaped at once.
            let reply = (try? JSONParser.parse(line))?.forTerminal ?? .null
            let ok = reply["ok"]?.boolValue == true
            let timedOut = reply["error"]?.stringValue == "timeout"
            // Scripts get the verdict that held either way; people get a line, on stderr when it failed.
            switch mode {
            case .json: Output.out(line + "\n")
            case .terse: if ok || timedOut { Screen.out(Terse.lines(Terse.query(reply))) }
            case .human:
                if ok && command.isEmpty {
                    Screen.out("\(reply["app"]?.stringValue ?? "app"): " + Render.because(reply) + "\n")
                } else if timedOut {
                    Screen.err("netpermctl: timed out: \(reply["app"]?.stringValue ?? "app") "
                        + Render.because(reply).replacingFirst("no: ", with: "may not use the network: ") + "\n")
                }
            }
            if ok { exec(command) }
            if timedOut { exit(.timedOut) }
            // --json printed the daemon's error reply: that is all, as for every other command.
            if mode == .json { exit(.failed) }
            Screen.err("netpermctl: \(reply["error"]?.stringValue ?? "error"): "
                + "\(reply["message"]?.stringValue ?? SafeText.escape(line))\n")
            exit(.failed)
        }
    }

    static func exec(_ command: [String]) -> Never {
        guard !command.isEmpty else { exit(.ok) }
        let e = Exec.replace(with: command)
        Screen.err("netpermctl: cannot run \(SafeText.escape(command[0])): \(e)\n")
        exit(127)
    }
}

extension String {
    func replacingFirst(_ a: String, with b: String) -> String {
        hasPrefix(a) ? b + dropFirst(a.count) : self
    }
}
