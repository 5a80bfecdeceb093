// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Connections past the daemon's means. Issue 14, defect 2: under `prlimit --nofile=64:64` with 100 connections
/// the daemon spun at 100% CPU and logged 26.6 MB of "accept failed: Too many open files" in 3 s, because the
/// listening socket stays readable while accept fails. Now the daemon serves at most a number of connections that
/// its descriptors allow, in total and per uid, refuses the rest with one `too-many-connections` line, and when
/// descriptors run out anyway it stops watching the socket for a while, warning at a limited rate.
final class ConnectionLimitTests: IntegrationTestCase {
    static let pong = #"{"ok":true,"pong":true}"#

    /// What the daemon said to each of `clients` after each sent PING: "pong", "refused: MESSAGE" (a
    /// too-many-connections line, then the end of the stream), or what else happened. One deadline for all.
    private func answers(_ clients: [RawClient], timeout: Double = 10) throws -> [String] {
        // A refused client may be closed before its PING is sent: that is EPIPE, and the line is still there to read.
        for c in clients { try? c.send("PING\n") }
        let deadline = monotonicNow() + timeout
        return clients.map { c in
            guard let line = try? c.readLine(timeout: max(deadline - monotonicNow(), 0.01)) else {
                return c.end.map { "closed (\($0)) without a reply" } ?? "no reply"
            }
            if line == Self.pong { return "pong" }
            guard let o = try? JSONValue.object(line), o["error"] as? String == "too-many-connections" else {
                return "unexpected: \(line)"
            }
            // Then the end of the stream (a reset only if the PING came after the daemon had taken what was
            // sent and before it closed: the line was read before it, which is what matters).
            let after = (try? c.readLine(timeout: max(deadline - monotonicNow(), 0.01))) ?? nil
            guard after == nil, c.end != nil else { return "refused, then \(after ?? "nothing")" }
            return "refused: \(o["message"] as? String ?? "")"
        }
    }

    private func count(_ answers: [String], _ prefix: String) -> Int { answers.filter { $0.hasPrefix(prefix) }.count }

    /// CPU time the daemon uses over `seconds` of doing nothing for anyone.
    private func idleCPU(_ daemon: DaemonProcess, over seconds: Double = 1) throws -> Double {
        let before = try ProcessStats.cpuSeconds(daemon.pid)
        usleep(UInt32(seconds * 1e6))
        return try ProcessStats.cpuSeconds(daemon.pid) - before
    }

    /// The issue's reproduction: 100 clients of a daemon started with 64 descriptors.
    func testWithSixtyFourDescriptorsTheExtraClientsAreRefusedAndNothingSpins() throws {
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        let config = try writeConfig(in: dir)
        let socket = dir + "/netpermd.sock"
        let daemon = try startDaemon(in: ns, socket: socket, config: config, wrapper: ["prlimit", "--nofile=64:64"])
        XCTAssertTrue(daemon.log.contains("at most 32 connections"), "the limit follows the descriptors: \(daemon.logTail)")

        var clients = try (0..<100).map { _ in try RawClient(path: socket) }
        let first = try answers(clients)
        let served = count(first, "pong")
        XCTAssertEqual(served, 32, "\(first)")
        XCTAssertEqual(count(first, "refused: "), 100 - served, "every other client is refused with one line: \(first)")
        XCTAssertTrue(first.last?.contains("32 connections") == true, "the refusal says why: \(first.last ?? "")")

        let cpu = try idleCPU(daemon)
        XCTAssertLessThan(cpu, 0.1, "CPU seconds used in the second after")
        let log = daemon.log
        XCTAssertLessThan(log.utf8.count, 16384, "log size")
        XCTAssertEqual(log.components(separatedBy: "accept failed").count - 1, 0, "no accept failed: \(daemon.logTail)")
        XCTAssertLessThanOrEqual(log.components(separatedBy: "too-many-connections").count - 1, 1,
                                 "refusals are logged at a limited rate: \(daemon.logTail)")

        // Room is made by leaving: ten served clients go, ten new ones are served.
        let servedIndices = first.indices.filter { first[$0] == "pong" }
        for i in servedIndices.prefix(10).reversed() { clients.remove(at: i) }
        let next = try answers(try (0..<10).map { _ in try RawClient(path: socket) })
        XCTAssertEqual(next, Array(repeating: "pong", count: 10))
        withExtendedLifetime(clients) {}
    }

    /// Descriptors running out while the daemon runs (its limit lowered under it): it stops watching the socket
    /// instead of spinning, says so once, takes the next client when one leaves, and catches up when descriptors
    /// come back.
    func testOutOfDescriptorsAcceptingPausesAndResumes() throws {
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        let config = try writeConfig(in: dir)
        let socket = dir + "/netpermd.sock"
        let daemon = try startDaemon(in: ns, socket: socket, config: config)
        // Only the soft limit: raising a hard limit again takes CAP_SYS_RESOURCE, which a test may not have.
        let limits = try readProcFile("/proc/\(daemon.pid)/limits")
        let nofile = try XCTUnwrap(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }?
            .split(separator: " ").dropFirst(3).prefix(2).map(String.init), limits)
        let original = nofile.joined(separator: ":")
        let open = try ProcessStats.openDescriptors(daemon.pid)
        try Subprocess.check(["prlimit", "--pid", "\(daemon.pid)", "--nofile=\(open + 3):\(nofile[1])"])
        defer { _ = try? Subprocess.run(["prlimit", "--pid", "\(daemon.pid)", "--nofile=\(original)"]) }

        var clients = try (0..<20).map { _ in try RawClient(path: socket) }
        for c in clients { try c.send("PING\n") }
        // The first few are served, the others wait in the backlog.
        let firstServed = try clients.prefix(3).map { try $0.readLine(timeout: 5) }
        XCTAssertEqual(firstServed.filter { $0 == Self.pong }.count, 3, "\(firstServed)")
        let waiting = Array(clients[3...])

        let cpu = try idleCPU(daemon)
        XCTAssertLessThan(cpu, 0.1, "CPU seconds used in a second out of descriptors")
        let warnings = daemon.log.components(separatedBy: "accept failed").count - 1
        XCTAssertGreaterThanOrEqual(warnings, 1, "running out of descriptors is logged: \(daemon.logTail)")
        XCTAssertLessThanOrEqual(warnings, 2, "and at a limited rate: \(daemon.logTail)")
        XCTAssertLessThan(daemon.log.utf8.count, 16384, "log size")

        // One served client leaves: the next one is taken at once, not at the next retry.
        clients.removeFirst()
        let t = monotonicNow()
        XCTAssertEqual(try waiting[0].readLine(timeout: 5), Self.pong)
        print(String(format: "out of descriptors: a waiting client was served %.1f ms after another left",
                     (monotonicNow() - t) * 1000))

        // Descriptors come back: everyone waiting is served.
        try Subprocess.check(["prlimit", "--pid", "\(daemon.pid)", "--nofile=\(original)"])
        for (i, c) in waiting.dropFirst().enumerated() {
            XCTAssertEqual(try c.readLine(timeout: 5), Self.pong, "waiting client \(i + 2)")
        }
        XCTAssertTrue(daemon.log.contains("accepting again"), daemon.logTail)
        withExtendedLifetime(clients) {}
    }

    /// Holds `count` connections as uid 65534 (nobody) and reports what each got for its PING; the connections
    /// stay open until stdin ends.
    static let nobodyScript = """
        import socket, sys
        socks = []
        for i in range(int(sys.argv[2])):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(sys.argv[1])
            s.sendall(b"PING\\n")
            socks.append(s)
        for s in socks:
            data = b""
            while not data.endswith(b"\\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            print(data.decode().strip() or "EOF", flush=True)
        print("held", flush=True)
        sys.stdin.read()
        """

    /// One uid may not hold more than its share; root may (but not more than the total); a refused client is
    /// told why; and a closed connection makes room.
    func testLimitsPerUIDAndInTotal() throws {
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        chmod(dir, 0o755)   // nobody must reach the socket
        let config = try writeConfig(in: dir)
        let socket = dir + "/netpermd.sock"
        _ = try startDaemon(in: ns, socket: socket, config: config,
                            extraArgs: ["--max-connections", "6", "--max-connections-per-uid", "3"])

        let input = try Subprocess.makePipe()
        let output = try Subprocess.makePipe()
        let nobody = try Subprocess.spawn(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                           Subprocess.python, "-c", Self.nobodyScript, socket, "4"],
                                          stdin: .fd(input.read), stdout: .fd(output.write), stderr: .devNull)
        close(input.read)
        close(output.write)
        let reader = FDLineReader(fd: output.read)
        var inputOpen = true
        func endInput() {
            if inputOpen { close(input.write) }
            inputOpen = false
        }
        defer {
            endInput()
            if nobody.wait(timeout: 5) == nil { nobody.killAndReap() }
            close(output.read)
        }
        var got: [String] = []
        while got.last != "held", let line = reader.nextLine(timeout: 10) { got.append(line) }
        XCTAssertEqual(got.count, 5, "\(got)")
        XCTAssertEqual(got.prefix(3).filter { $0 == Self.pong }.count, 3, "\(got)")
        let refusal = try JSONValue.object(got.count > 3 ? got[3] : "")
        XCTAssertEqual(refusal["ok"] as? Bool, false)
        XCTAssertEqual(refusal["error"] as? String, "too-many-connections")
        XCTAssertEqual(refusal["message"] as? String, "uid 65534 has 3 connections open, the most one user may have")

        // Root is not held to the per-uid limit, only to the total: 3 of nobody's and 3 of root's make 6.
        var mine = try (0..<4).map { _ in try RawClient(path: socket) }
        let answered = try answers(mine)
        XCTAssertEqual(answered.prefix(3), ["pong", "pong", "pong"], "\(answered)")
        XCTAssertEqual(answered.last, "refused: netpermd serves at most 6 connections at once; try again later")

        // nobody leaves: room for three more.
        endInput()
        XCTAssertNotNil(nobody.wait(timeout: 5), "the nobody client exits when its stdin ends")
        mine.removeLast()
        let more = try (0..<3).map { _ in try RawClient(path: socket) }
        XCTAssertEqual(try answers(more), ["pong", "pong", "pong"])
        withExtendedLifetime((mine, more)) {}
    }
}
