// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermProtocol

/// `netpermctl monitor [APP]`: follows the daemon's events, reconnecting (with a notice) when it restarts.
enum Monitor {
    static func run(socketPath: String, app: String?, mode: OutputMode) -> Never {
        var announcedLoss = false
        while true {
            let conn: Connection
            do { conn = try Connection(path: socketPath) } catch {
                let why = Unreachable(error)
                guard why.mayResolveItself else { die(why.message(socketPath), .unreachable) }
                if !announcedLoss {
                    Screen.err("netpermctl: \(SafeText.escape(why.message(socketPath))); waiting for it\n")
                    announcedLoss = true
                }
                usleep(200_000)
                continue
            }
            if announcedLoss { Screen.err("netpermctl: connected to netpermd\n") }
            announcedLoss = false
            do {
                try conn.send("SUBSCRIBE")
                guard let ack = try conn.readLine() else { throw Errno(ECONNRESET) }
                if let r = (try? JSONParser.parse(ack))?.forTerminal, r["ok"]?.boolValue != true {
                    Screen.err("netpermctl: \(r["message"]?.stringValue ?? SafeText.escape(ack))\n")
                    exit(.failed)
                }
                var state = MonitorState()
                // Events are escaped before anything reads them; APP is compared in the same form.
                let shownApp = app.map { SafeText.escape($0) }
                var first = true
                while let line = try conn.readLine() {
                    // An APP the snapshot does not name (not in the policy, or not this user's) would print nothing
                    // for ever: said, as `query` says it.
                    if first, let app {
                        first = false
                        let apps = (try? JSONParser.parse(line))?["apps"]?.arrayValue?.compactMap { $0["app"]?.stringValue }
                        if let apps, !apps.contains(app) {
                            die("no [App \(app)] in the policy that you may follow (not-found)", .failed)
                        }
                    }
                    let change = { (try? JSONParser.parse(line)).flatMap { state.apply($0.forTerminal) } }
                    let text: String?
                    switch mode {
                    case .json:
                        Output.out(line + "\n")
                        continue
                    case .human: text = change().flatMap { MonitorText.describe($0, app: shownApp) }
                    case .terse: text = change().flatMap { MonitorTerse.describe($0, app: shownApp) }
                    }
                    if let text { Screen.out(text + "\n") }
                }
            } catch {}
            Screen.err("netpermctl: lost the connection to netpermd; reconnecting\n")
            announcedLoss = true
        }
    }
}
