// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermPolicy
import NetpermProtocol
import NetpermSystemd

/// `netpermctl run --app NAME -- COMMAND`: moves itself into a new transient scope named for app NAME (RunScope),
/// through the caller's own service manager (the system's as root, the user's own otherwise), checks that the
/// daemon now takes it for NAME, waits (with enforcement on) until the kernel's rules name the scope, and execs
/// COMMAND there: COMMAND and its children are app NAME, for the daemon and for the kernel's rules from their first
/// packet (docs/ENFORCEMENT.md). Exit status, signals and the terminal are then COMMAND's.
enum Run {
    static func run(socketPath: String, app: String, command: [String]) -> Never {
        let tag = "\(getpid())_" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        guard let unit = RunScope.unitName(app: app, tag: tag) else {
            die("'\(app)' is not an app id (a letter, then letters, digits, '.', '-', '_'; at most about 200)", .usage)
        }
        // The daemon is asked from inside the scope only: it keeps a process's identity (its cgroup too) from its
        // first request, so a question asked before the move would be answered for the old cgroup afterwards. An
        // unknown app then runs nothing: the empty scope goes when netpermctl exits.
        let user = getuid() != 0
        do {
            try TransientScope.start(name: unit, pids: [UInt32(getpid())],
                                     description: "netpermctl run --app \(app) -- \(command[0])", user: user)
        } catch {
            die("cannot start the scope \(unit): \(error)", .scopeFailed)
        }
        // A new connection: the daemon reads who this process is (its cgroup) afresh.
        let inside = query(socketPath, "QUERY")
        let unitSeen = inside["identity"]?["unit"]?.stringValue
        guard inside["app"]?.stringValue == app, unitSeen == unit else {
            if inside["ok"]?.boolValue == true, unitSeen == unit { notInPolicy(app) }
            die("netpermd does not take \(unit) for app \(app) (it answered for "
                + "\(inside["app"]?.stringValue ?? inside["error"]?.stringValue ?? "nothing"), unit "
                + "\(unitSeen ?? "none"))", .failed)
        }
        waitForRules(socketPath, unit: unit, command: command[0], first: inside)
        Wait.exec(command)
    }

    /// The daemon follows a new cgroup with inotify and loads the rules again, a few milliseconds (a whole table of
    /// 10,000 apps: up to seconds); until then its answer to this process says `cgroup-pending`. The daemon has no
    /// event for it, so it is asked again every 2 ms, for at most `waitLimit`: COMMAND never starts uncovered.
    private static func waitForRules(_ socketPath: String, unit: String, command: String, first: JSON) {
        let start = Clock.monotonicSeconds()
        var answer = first
        while answer["enforced_why"]?.stringValue == "cgroup-pending" {
            guard Clock.monotonicSeconds() - start < waitLimit else {
                die("netpermd's rules do not name \(unit) after \(Int(waitLimit)) s; not running \(command) "
                    + "(netpermd's log or `netpermctl status` says why)", .timedOut)
            }
            usleep(2000)
            answer = query(socketPath, "QUERY")
        }
    }

    static let waitLimit = 10.0

    private static func notInPolicy(_ app: String) -> Never {
        die("app '\(app)' is not in netpermd's policy (netpermctl apps lists them)", .failed)
    }

    /// One request on a connection of its own; the reply parsed (an error reply too). Unreachable: exit 3.
    private static func query(_ socketPath: String, _ request: String) -> JSON {
        let conn = Connection.open(socketPath)
        do {
            guard let line = try conn.request(request) else {
                die("netpermd closed the connection without answering", .unreachable)
            }
            return (try? JSONParser.parse(line)) ?? .null
        } catch { die("lost the connection to netpermd: \(error)", .unreachable) }
    }
}
