// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermProtocol
import NetpermSystemd

/// `netpermctl scopes`: makes the scopes netpermd wants for this user's apps found by what they run (docs/APPS.md,
/// "Apps known by what they run"), through this user's own manager, which a daemon under the shipped unit
/// (`DynamicUser=`) cannot reach: its private socket takes only root and the user. Runs in every session of the user
/// (netpermd-scopes.service, a user unit), one scope at a time over one connection to the manager kept open, each
/// answered with `SCOPE ID made|failed WHY`.
/// The manager moves only processes of this user, and only within its own tree: the daemon's word cannot make it
/// move anyone else's.
enum Scopes {
    static func run(socketPath: String) -> Never {
        let c: Connection
        let first: String?
        do {
            c = try Connection(path: socketPath)
            first = try c.request("SUBSCRIBE scopes")
        } catch {
            die("cannot reach netpermd at \(socketPath): \(error)", .unreachable)
        }
        guard let reply = first.flatMap({ try? JSONParser.parse($0) }), reply["ok"]?.boolValue == true else {
            die("netpermd refused SUBSCRIBE scopes: \(first ?? "no reply")", .failed)
        }
        let uid = getuid()
        // One connection to the manager for every scope, read while idle (UserManagerConnection).
        let manager = UserManagerConnection(uid: uid)
        Screen.err("netpermctl: making the scopes netpermd wants for uid \(uid)'s apps\n")
        // Apps own their IDs as names on the session bus: the daemon, which cannot reach the bus, is told who owns which.
        var names: SessionBusNames?
        do { names = try SessionBusNames() } catch {
            Screen.err("netpermctl: \(error); apps are known by what they run only\n")
        }
        func send(_ line: String) {
            do { try c.send(String(line.prefix(Request.maxLine))) } catch {
                die("lost the connection to netpermd: \(error)", .unreachable)
            }
        }
        func tellNames() {
            do {
                for (name, pid) in try names?.taken() ?? [] { send("OWNS \(name) \(pid)") }
            } catch {
                Screen.err("netpermctl: \(error); apps are known by what they run only\n")
                names = nil
            }
        }
        tellNames()
        while true {
            while c.hasLine {
                let line: String?
                do { line = try c.readLine() } catch { die("lost the connection to netpermd: \(error)", .unreachable) }
                if let line, let answer = make(line, manager: manager) { send(answer) }
            }
            let bus = manager.pollFD
            var fds = [pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)] + (bus.map { [$0] } ?? [])
                + (names.map { [$0.pollFD] } ?? [])
            var wait: Int32 = -1
            if let t = names?.timeout, t != UInt64.max {
                let now = UInt64(Clock.monotonicMicroseconds())
                wait = t <= now ? 0 : Int32(min((t - now) / 1000 + 1, 60_000))
            }
            if poll(&fds, nfds_t(fds.count), wait) < 0 && errno != EINTR {
                die("poll: \(Errno(errno))", .failed)
            }
            if bus != nil && fds[1].revents != 0 { manager.drain() }
            if fds[0].revents != 0 {
                do {
                    guard try c.fill() else { die("netpermd closed the connection", .unreachable) }
                } catch { die("lost the connection to netpermd: \(error)", .unreachable) }
            }
            tellNames()
        }
    }

    /// A `scope-wanted` event made into its scope: the SCOPE answer to send (nil for any other line: replies to SCOPE
    /// and OWNS, {"ok":...}, need nothing).
    private static func make(_ line: String, manager: UserManagerConnection) -> String? {
        guard let e = try? JSONParser.parse(line), e["event"]?.stringValue == EventName.scopeWanted.rawValue,
              let id = e["id"]?.intValue, let pid = e["pid"]?.intValue, let unit = e["unit"]?.stringValue,
              let app = e["app"]?.stringValue else { return nil }
        do {
            try manager.start(name: unit, pids: [UInt32(truncatingIfNeeded: pid)],
                              description: "\(app), found by what it runs (netpermd)",
                              slice: e["slice"]?.stringValue ?? "app.slice")
            return "SCOPE \(id) made"
        } catch {
            Screen.err("netpermctl: no scope for pid \(pid) (\(app)): \(error)\n")
            return String("SCOPE \(id) failed \(error)".map { $0.isNewline ? " " : $0 })
        }
    }
}
