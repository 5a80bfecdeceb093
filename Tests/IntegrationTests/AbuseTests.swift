// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The abuse suite: the classes of attack and mistake that broke the daemon before (issue 14), replayed against
/// the real daemon in its namespace while a link flaps, with a well-behaved client asking all along. The daemon
/// must answer every framed line of garbage exactly once, keep the good client's QUERY quick, survive signal
/// storms and SIGKILLs without losing an acknowledged decision, tell every subscriber when it stops, and end with
/// its descriptors back where they were and its memory near it. Seeded (NETPERMD_ABUSE_SEED=N replays) and
/// bounded: it stops by itself in well under a minute.
final class AbuseTests: IntegrationTestCase {
    static let policy = IntegrationTestCase.standardConfig + """

        [App asker]
        User=4242
        WWAN=ask

        [App updater]
        Executable=/usr/bin/updater
        WWAN=deny

        """ + (0..<20).map { "[App app\($0)]\nExecutable=/opt/app\($0)\nWWAN=ask\n" }.joined(separator: "\n")

    func testHostileLoadLeavesNothingBehind() throws {
        let env = ProcessInfo.processInfo.environment
        let seed = env["NETPERMD_ABUSE_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("abuse: seed \(seed) (replay with NETPERMD_ABUSE_SEED=\(seed))")
        var rng = SplitMix64(state: seed)
        raiseOpenFilesLimit()

        let ns = try makeNamespace()
        try ns.addVethPair("wlan0", peer: "wlan0p")
        try ns.addVethPair("wwan0", peer: "wwan0p")
        try ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        try ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0", "metric", "200")
        let dir = try makeTempDir()
        // nobody must reach the socket.
        chmod(dir, 0o755)
        let config = try writeConfig(Self.policy, in: dir)
        let socket = dir + "/netpermd.sock"
        // A small netlink buffer: the flapping overruns it now and then, and the daemon must resync meanwhile.
        let args = ["--netlink-rcvbuf", "32768"]
        var daemon = try startDaemon(in: ns, socket: socket, config: config, extraArgs: args)

        let flapper = Flapper(ns: ns, dir: dir)
        let good = GoodClient(socket: socket, app: "updater")
        addTeardownBlock { flapper.stop(); good.stop() }
        try good.start()
        // Warm up (sd-event makes its timerfd at the first timer, a storm's or a reload's), then take the
        // baseline the daemon must come back to.
        flapper.start()
        XCTAssertEqual(try request(socket, "RELOAD")["ok"] as? Bool, true)
        usleep(300_000)
        let baseFDs = try openFiles(daemon.pid)
        let baseList = describeFiles(daemon.pid)
        let baseRSS = try rssKiB(daemon.pid)
        var inputs = 0

        // 1. Garbage from an unprivileged user, through socat: a reply per line, never a privileged verb's effect.
        for c in 0..<5 {
            var bytes: [UInt8] = []
            var lines = 0
            for _ in 0..<60 {
                bytes += Self.garbageLine(&rng) + [0x0A]
                lines += 1
            }
            bytes += Array("DECIDE asker wwan allow\nRELOAD\nFORGET asker\n".utf8)
            lines += 3
            let r = try Subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "socat", "-t", "5",
                                        "-", "UNIX-CONNECT:\(socket)"], input: bytes, timeout: 30)
            XCTAssertEqual(r.lines.count, lines, "unprivileged garbage \(c): one reply per line: \(r.summary.prefix(500))")
            // A user decides (and forgets) for their own processes only; RELOAD is root's.
            XCTAssertEqual(r.lines.suffix(3).map { (try? JSONValue.object($0))?["error"] as? String },
                           [nil, "permission-denied", nil])
            XCTAssertEqual(((try? JSONValue.object(r.lines.suffix(3).first ?? ""))?["decided"] as? [String: Any])?["for_uid"]
                           as? Int, 65534, r.summary.prefix(500).description)
            inputs += lines
        }
        XCTAssertEqual(try queryAsker(socket)["wwan"], "no-agent", "nothing decided by the unprivileged")

        // Then as root: random requests, unknown verbs, random bytes, NULs, invalid UTF-8, overlong lines,
        // pipelined on 40 connections. Every framed line that is not blank gets exactly one reply, valid JSON.
        var conns: [(EvChannel, Int)] = []
        for c in 0..<40 {
            let ch = try EvChannel.connect(socket, name: "garbage \(c)")
            var lines = 0
            var bytes: [UInt8] = []
            for _ in 0..<(120 + rng.below(120)) {
                bytes += Self.garbageLine(&rng)
                bytes.append(0x0A)
                lines += 1
            }
            try ch.send(bytes: bytes, timeout: 20)
            conns.append((ch, lines))
            inputs += lines
        }
        for (ch, lines) in conns {
            for i in 0..<lines {
                // Generous: root's garbage holds DECIDEs (each a written, synced file) and RELOADs, and a loaded
                // machine once took over 10 s for a connection's backlog (load average 7, fuzzers running).
                guard let line = try ch.readLine(timeout: 30) else {
                    XCTFail("\(ch.name): the daemon closed after \(i) of \(lines) replies")
                    break
                }
                let o = try JSONValue.object(line)
                XCTAssertTrue(o["ok"] as? Bool == true || o["error"] is String, "\(ch.name): \(line.prefix(200))")
            }
            XCTAssertFalse(ch.hasDataWaiting(), "\(ch.name): more replies than lines")
            ch.close()
        }
        // 2. Many clients at once: 1,500 connections held open, each answered.
        var many: [EvChannel] = []
        for i in 0..<1500 { many.append(try EvChannel.connect(socket, name: "many \(i)")) }
        for ch in many { try ch.send("PING\n") }
        for ch in many { XCTAssertEqual(try ch.readLine(timeout: 10), #"{"ok":true,"pong":true}"#) }
        for ch in many { ch.close() }
        many = []

        // 3. Flooders that never read: pipelined QUERY until their sockets are full.
        var flooders: [EvChannel] = []
        var flooded = 0
        for i in 0..<16 {
            let ch = try EvChannel.connect(socket, name: "flooder \(i)")
            flooded += Self.fill(ch, with: Array("QUERY asker\n".utf8), upTo: 4 << 20)
            flooders.append(ch)
        }
        usleep(500_000)
        for ch in flooders { ch.close() }

        // 4. A SIGHUP storm: 500 signals, each a reload; the daemon reads at most one at a time and stays up.
        for _ in 0..<500 { daemon.signal(SIGHUP) }
        let reload = try request(socket, "RELOAD")
        XCTAssertEqual(reload["ok"] as? Bool, true, "\(reload)")

        // Back to the baseline: every descriptor of those clients closed, memory near where it was.
        flapper.stop()
        var fds = 0
        try waitUntil("the daemon's descriptors are back to \(baseFDs)", timeout: 10) {
            fds = try self.openFiles(daemon.pid)
            return (fds == baseFDs, "\(fds) open: \(self.describeFiles(daemon.pid)); at the start: \(baseList)")
        }
        // Memory goes back a second after clients leave.
        var rss = 0
        try? waitUntil("anonymous RSS back within 1 MiB of \(baseRSS) KiB", timeout: 5) {
            rss = try self.rssKiB(daemon.pid)
            return (rss < baseRSS + 1024, "\(rss) KiB")
        }
        good.stop()
        let latencies = good.latencies.sorted()
        let p99 = latencies[Int(Double(latencies.count) * 0.99)]
        let worst = latencies.last ?? 0
        print("abuse: \(inputs) garbage lines, 1500 clients at once, \(flooded) flooded requests, 500 SIGHUPs; "
            + "good client \(latencies.count) QUERY: median \(String(format: "%.2f", latencies[latencies.count / 2] * 1000)) ms, "
            + "p99 \(String(format: "%.2f", p99 * 1000)) ms, worst \(String(format: "%.1f", worst * 1000)) ms; "
            + "anonymous RSS \(baseRSS) -> \(rss) KiB, fds \(baseFDs) -> \(fds)")
        XCTAssertGreaterThan(latencies.count, 100, "the good client kept asking")
        XCTAssertEqual(good.failures, [], "every QUERY of the good client answered")
        // A debug build on a shared 2-CPU machine: the bounds say the daemon never stalled, not that it is fast.
        XCTAssertLessThan(p99, 0.1, "p99 of the good client's QUERY")
        XCTAssertLessThan(worst, 0.5, "worst QUERY of the good client")
        XCTAssertLessThan(rss, baseRSS + 1024, "anonymous RSS back within 1 MiB of its baseline (\(baseRSS) KiB)")

        // 5. SIGKILL right after DECIDE is acknowledged, 25 times: each acknowledged decision is on disk, and every
        // restarted daemon has them all.
        var decided: [String: String] = [:]
        for round in 0..<25 {
            let app = "app\(round % 20)", decision = rng.chance(50) ? "allow" : "deny"
            XCTAssertEqual(try request(socket, "DECIDE \(app) wwan \(decision)")["ok"] as? Bool, true)
            decided[app] = decision
            daemon.signal(SIGKILL)
            XCTAssertNotNil(daemon.waitForExit(timeout: 5))
            daemon = try startDaemon(in: ns, socket: socket, config: config, extraArgs: args)
            for (app, decision) in decided {
                let q = try request(socket, "QUERY \(app)")
                XCTAssertEqual((q["permissions"] as? [String: Any])?["wwan"] as? String, decision,
                               "round \(round): \(app)'s acknowledged decision survived SIGKILL: \(q)")
            }
        }

        // 6. SIGTERM with 1,000 subscribers: each is told, the daemon exits 0 at once.
        var subscribers: [EvChannel] = []
        for i in 0..<1000 {
            let ch = try EvChannel.connect(socket, name: "subscriber \(i)")
            try ch.send("SUBSCRIBE links\n")
            subscribers.append(ch)
        }
        for ch in subscribers { _ = try ch.readLine(timeout: 10); _ = try ch.readLine(timeout: 10) }
        let t = monotonicNow()
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(timeout: 5), 0)
        XCTAssertLessThan(monotonicNow() - t, 2, "stopped at once")
        for ch in subscribers {
            var told = false
            while let line = try ch.readLine(timeout: 5) { if line.contains("\"stopping\"") { told = true } }
            XCTAssertTrue(told, "\(ch.name) was told the daemon is stopping")
            ch.close()
        }
    }

    // MARK: - Helpers

    private func queryAsker(_ socket: String) throws -> [String: String] {
        let q = try request(socket, "QUERY asker")
        return (q["sources"] as? [String: String]) ?? [:]
    }

    private func openFiles(_ pid: pid_t) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
    }

    private func describeFiles(_ pid: pid_t) -> String {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return fds.sorted { Int($0) ?? 0 < Int($1) ?? 0 }.map { fd in
            "\(fd)=\((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) ?? "?")"
        }.joined(separator: " ")
    }

    /// Anonymous resident memory (RssAnon): the heap and stacks. File-backed pages are the binary's code and
    /// data, which grow as more of it runs (start-up's pages are released once ready) and are not a leak.
    private func rssKiB(_ pid: pid_t) throws -> Int {
        let status = try readProcFile("/proc/\(pid)/status")
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
              let kb = Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" })[1]) else {
            throw HarnessError("no VmRSS for \(pid)")
        }
        return kb
    }

    private func raiseOpenFilesLimit() {
        var l = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &l)
        l.rlim_cur = l.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &l)
    }

    /// Writes `line` again and again until the socket would block or `limit` bytes went; returns the lines sent.
    private static func fill(_ ch: EvChannel, with line: [UInt8], upTo limit: Int) -> Int {
        let chunk = Array([[UInt8]](repeating: line, count: 1024).joined())
        var sent = 0
        while sent < limit {
            let n = chunk.withUnsafeBytes { write(ch.writeFD, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            sent += n
        }
        return sent / line.count
    }

    static let verbs = ["QUERY", "query", "STATUS", "LINKS", "PING", "APPS", "PROMPTS", "HELP", "DECIDE", "FORGET",
                        "Query", "QUERYY", "SUBSCRIBEX", "WAITING", "", "\u{7f}", "QUERY\u{0}", "ÄPPS", "😀"]

    /// One request line (no newline, never blank): a verb with random arguments, or random bytes, or one of the
    /// shapes that broke parsers elsewhere. No SUBSCRIBE, WAIT or QUIT: each would change what a reply count is.
    static func garbageLine(_ rng: inout SplitMix64) -> [UInt8] {
        var line: [UInt8]
        switch rng.below(10) {
        case 0, 1, 2, 3:
            line = Array(rng.pick(verbs).utf8)
            for _ in 0..<rng.below(5) { line += [0x20] + randomToken(&rng) }
        case 4:
            line = (0..<(1 + rng.below(200))).map { _ in UInt8(rng.below(256)) }.filter { $0 != 0x0A }
        case 5:
            line = Array("QUERY ".utf8) + [0xC3, 0x28, 0xFF, 0xFE]   // invalid UTF-8
        case 6:
            line = Array("PING".utf8) + [0] + Array("X".utf8)
        case 7:
            line = [UInt8](repeating: UInt8(ascii: "A"), count: 4097 + rng.below(20_000))   // over the line limit
        case 8:
            line = Array("DECIDE ".utf8) + randomToken(&rng) + Array(" wwan ".utf8) + Array(rng.pick(["allow", "deny", "maybe", "allow --once", "allow --twice"]).utf8)
        default:
            line = Array("QUERY ".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: rng.below(4000))
        }
        // Blank lines get no reply; make every line count.
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { line = Array("PING".utf8) }
        return line
    }

    static func randomToken(_ rng: inout SplitMix64) -> [UInt8] {
        switch rng.below(6) {
        case 0: return Array(rng.pick(["asker", "updater", "app1", "wwan", "wifi", "--once", "*", "..", "/"]).utf8)
        case 1: return Array("\u{1b}[2K\u{1b}[1A".utf8)
        case 2: return Array(String(repeating: "é", count: rng.below(50)).utf8)
        case 3: return (0..<(1 + rng.below(30))).map { _ in UInt8(33 + rng.below(94)) }
        case 4: return Array("\u{202e}evil".utf8)
        default: return Array(String(rng.next() % 1_000_000_007).utf8)
        }
    }
}

/// Toggles wlan0's peer down and up, in batches, until stopped.
private final class Flapper: @unchecked Sendable {
    let ns: TestNamespace
    let dir: String
    private let lock = NSLock()
    private var running = false
    private var thread: Thread?

    init(ns: TestNamespace, dir: String) { self.ns = ns; self.dir = dir }

    private var isRunning: Bool { lock.lock(); defer { lock.unlock() }; return running }

    func start() {
        lock.lock(); running = true; lock.unlock()
        let t = Thread { [self] in
            let lines = (0..<50).map { "link set wlan0p \($0 % 2 == 0 ? "down" : "up")" }
            while isRunning {
                try? ns.batch(lines, scratchDir: dir)
                usleep(20_000)
            }
        }
        thread = t
        t.start()
    }

    func stop() {
        lock.lock(); let was = running; running = false; lock.unlock()
        guard was else { return }
        // The thread finishes its batch (a few ms).
        usleep(200_000)
    }
}
