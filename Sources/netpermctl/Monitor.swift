import Glibc
import NetpermCore
import NetpermIO

/// `netpermctl monitor [APP]`: follows the daemon's events, reconnecting (with a notice) when it restarts.
enum Monitor {
    static func run(socketPath: String, app: String?, json: Bool) -> Never {
        var announcedLoss = false
        while true {
            guard let conn = try? Connection(path: socketPath) else {
                if !announcedLoss {
                    Output.err("netpermctl: netpermd is not reachable at \(socketPath); waiting for it\n")
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
                    exit(1)
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

/// `netpermctl wait`: blocks until the app may use the network, then execs the command.
enum Wait {
    /// Exit code when the time-out passes before the app may use the network.
    static let timeoutExit: Int32 = 4

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static func run(socketPath: String, app: String?, timeout: Double?, command: [String], json: Bool) -> Never {
        let deadline = timeout.map { now() + $0 }
        while true {
            let remaining = deadline.map { max(0, $0 - now()) }
            var request = "WAIT"
            if let app { request += " \(app)" }
            if let remaining { request += " " + String(format3(remaining)) }
            do {
                let conn = try Connection(path: socketPath)
                guard let line = try conn.request(request) else { throw Errno(ECONNRESET) }
                let reply = try? JSONParser.parse(line)
                if json { Output.out(line + "\n") }
                if reply?["ok"]?.boolValue == true {
                    if !json && command.isEmpty { Output.out("\(reply?["app"]?.stringValue ?? "app"): "
                        + Render.because(reply ?? .null) + "\n") }
                    exec(command)
                }
                if reply?["error"]?.stringValue == "timeout" {
                    if !json { Output.err("netpermctl: timed out: \(reply?["app"]?.stringValue ?? "app") "
                        + Render.because(reply ?? .null).replacingFirst("no: ", with: "may not use the network: ") + "\n") }
                    exit(timeoutExit)
                }
                Output.err("netpermctl: \(reply?["error"]?.stringValue ?? "error"): "
                    + "\(reply?["message"]?.stringValue ?? line)\n")
                exit(1)
            } catch {
                // The daemon is restarting (or not up yet): keep waiting within the time-out.
                if let deadline, now() >= deadline {
                    Output.err("netpermctl: netpermd not reachable at \(socketPath) before the time-out\n")
                    exit(3)
                }
                usleep(200_000)
            }
        }
    }

    static func format3(_ seconds: Double) -> String {
        let ms = Int((seconds * 1000).rounded(.up))
        let frac = String(ms % 1000)
        return "\(ms / 1000)." + String(repeating: "0", count: 3 - frac.count) + frac
    }

    static func exec(_ command: [String]) -> Never {
        guard !command.isEmpty else { exit(0) }
        var cargs: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) }
        cargs.append(nil)
        execvp(command[0], &cargs)
        Output.err("netpermctl: cannot run \(command[0]): \(Errno.current)\n")
        exit(127)
    }
}

extension String {
    func replacingFirst(_ a: String, with b: String) -> String {
        hasPrefix(a) ? b + dropFirst(a.count) : self
    }
}
