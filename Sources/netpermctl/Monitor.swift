import Glibc
import NetpermCore
import NetpermIO

/// `netpermctl monitor [APP]`: follows the daemon's events, reconnecting (with a notice) when it restarts.
enum Monitor {
    static func run(socketPath: String, app: String?, json: Bool) -> Never {
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
                while let line = try conn.readLine() {
                    if json {
                        Output.out(line + "\n")
                    } else if let event = try? JSONParser.parse(line), let text = describe(event, app: app) {
                        Output.out(text + "\n")
                    }
                }
            } catch {}
            Output.err("netpermctl: lost the connection to netpermd; reconnecting\n")
            announcedLoss = true
        }
    }

    static func describe(_ e: JSON, app: String?) -> String? {
        let seq = e["seq"]?.intValue ?? 0
        switch e["event"]?.stringValue ?? "" {
        case "snapshot":
            var out = "[\(seq)] snapshot:"
            for l in e["links"]?.arrayValue ?? [] { out += "\n  " + link(l) }
            for v in e["apps"]?.arrayValue ?? [] where app == nil || v["app"]?.stringValue == app {
                out += "\n  app \(v["app"]?.stringValue ?? "?"): \(Render.because(v))"
            }
            if let p = e["policy"] { out += "\n  policy generation \(p["generation"]?.intValue ?? 0)" }
            return out
        case "link":
            return "[\(seq)] link \(e["change"]?.stringValue ?? "?"): \(e["link"].map(link) ?? "?")"
        case "app":
            if let app, e["app"]?.stringValue != app { return nil }
            return "[\(seq)] app \(e["app"]?.stringValue ?? "?"): \(Render.because(e))"
        case "policy":
            if let err = e["error"]?.stringValue { return "[\(seq)] policy reload failed (still generation "
                + "\(e["generation"]?.intValue ?? 0)): \(err)" }
            return "[\(seq)] policy generation \(e["generation"]?.intValue ?? 0): \(e["apps"]?.intValue ?? 0) apps"
        case "stopping": return "[\(seq)] netpermd is stopping"
        case "overflow": return "netpermd dropped this monitor: it fell too far behind"
        case let other: return "[\(seq)] \(other)"
        }
    }

    static func link(_ l: JSON) -> String {
        "\(l["name"]?.stringValue ?? "?") (\(l["kind"]?.stringValue ?? "?")): "
            + (l["usable"]?.boolValue == true ? "usable" : "not usable")
            + ", admin \(l["admin_up"]?.boolValue == true ? "up" : "down")"
            + ", carrier \(l["carrier"]?.boolValue == true ? "on" : "off")"
            + ", default route \(l["metric"]?.intValue.map { "metric \($0)" } ?? "none")"
    }
}

extension String {
    func replacingFirst(_ a: String, with b: String) -> String {
        hasPrefix(a) ? b + dropFirst(a.count) : self
    }
}
