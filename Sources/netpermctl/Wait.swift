import Glibc
import NetpermCore
import NetpermIO

/// `netpermctl wait`: blocks until the app may use the network, then execs the command.
enum Wait {
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
                    exit(.timedOut)
                }
                Output.err("netpermctl: \(reply?["error"]?.stringValue ?? "error"): "
                    + "\(reply?["message"]?.stringValue ?? line)\n")
                exit(.failed)
            } catch {
                // The daemon is restarting (or not up yet): keep waiting within the time-out.
                if let deadline, now() >= deadline {
                    Output.err("netpermctl: netpermd not reachable at \(socketPath) before the time-out\n")
                    exit(.unreachable)
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
        guard !command.isEmpty else { exit(.ok) }
        var cargs: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) }
        cargs.append(nil)
        execvp(command[0], &cargs)
        Output.err("netpermctl: cannot run \(command[0]): \(Errno.current)\n")
        exit(127)
    }
}
