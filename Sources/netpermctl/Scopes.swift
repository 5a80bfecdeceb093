// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermProtocol
import NetpermSystemd

/// `netpermctl scopes`: makes the scopes netpermd wants for this user's apps found by what they run (docs/APPS.md,
/// "Apps known by what they run"), through this user's own manager, which a daemon under the shipped unit
/// (`DynamicUser=`) cannot reach: its private socket takes only root and the user. Runs in every session of the user
/// (netpermd-scopes.service, a user unit), one scope at a time, each answered with `SCOPE ID made|failed WHY`.
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
        Screen.err("netpermctl: making the scopes netpermd wants for uid \(uid)'s apps\n")
        while true {
            let line: String?
            do { line = try c.readLine() } catch { die("lost the connection to netpermd: \(error)", .unreachable) }
            guard let line else { die("netpermd closed the connection", .unreachable) }
            // Replies to SCOPE are {"ok":true}, or not-found for one answered too late: nothing to do either way.
            guard let e = try? JSONParser.parse(line) else { continue }
            guard e["event"]?.stringValue == EventName.scopeWanted.rawValue, let id = e["id"]?.intValue,
                  let pid = e["pid"]?.intValue, let unit = e["unit"]?.stringValue,
                  let app = e["app"]?.stringValue else { continue }
            let answer: String
            do {
                try TransientScope.start(name: unit, pids: [UInt32(truncatingIfNeeded: pid)],
                                         description: "\(app), found by what it runs (netpermd)",
                                         slice: e["slice"]?.stringValue ?? "app.slice", ofUser: uid)
                answer = "SCOPE \(id) made"
            } catch {
                answer = String("SCOPE \(id) failed \(error)".map { $0.isNewline ? " " : $0 })
                Screen.err("netpermctl: no scope for pid \(pid) (\(app)): \(error)\n")
            }
            do { try c.send(String(answer.prefix(Request.maxLine))) } catch {
                die("lost the connection to netpermd: \(error)", .unreachable)
            }
        }
    }
}
