import Glibc
import NetpermCore
import NetpermIO

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
                    Output.err("netpermctl: \(why.message(socketPath)); waiting for it\n")
                    announcedLoss = true
                }
                usleep(200_000)
                continue
            }
            if announcedLoss { Output.err("netpermctl: connected to netpermd\n") }
            announcedLoss = false
            do {
                try conn.send("SUBSCRIBE")
                guard let ack = try conn.readLine() else { throw Errno(ECONNRESET) }
                if let r = try? JSONParser.parse(ack), r["ok"]?.boolValue != true {
                    Output.err("netpermctl: \(r["message"]?.stringValue ?? ack)\n")
                    exit(.failed)
                }
                var state = MonitorState()
                while let line = try conn.readLine() {
                    let change = { (try? JSONParser.parse(line)).flatMap { state.apply($0) } }
                    let text: String?
                    switch mode {
                    case .json: text = line
                    case .human: text = change().flatMap { MonitorText.describe($0, app: app) }
                    case .terse: text = change().flatMap { MonitorTerse.describe($0, app: app) }
                    }
                    if let text { Output.out(text + "\n") }
                }
            } catch {}
            Output.err("netpermctl: lost the connection to netpermd; reconnecting\n")
            announcedLoss = true
        }
    }
}
