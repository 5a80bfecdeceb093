// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermControl
import NetpermIO
import TestSupport
import XCTest

/// The control socket's transport on a test loop, with no daemon behind it: replies in order, held requests
/// waiting, the bounds on what a client that does not read can cost, line framing at the edges.
final class TransportTests: XCTestCase {
    final class Recorder: ControlDelegate {
        var server: ControlServer!
        var opened: [UInt64] = []
        var connectors: [Credentials] = []
        var frames: [(UInt64, LineFramer.Frame)] = []
        var senders: [Credentials] = []
        var closed: [UInt64] = []
        /// What to do with each frame; the default replies "r:LINE".
        var onFrame: ((UInt64, LineFramer.Frame) -> Void)?

        func opened(_ id: UInt64, fd: Int32, connector: Credentials) {
            opened.append(id)
            connectors.append(connector)
        }
        func frame(_ id: UInt64, _ frame: LineFramer.Frame, sender: Credentials) {
            frames.append((id, frame))
            senders.append(sender)
            if let onFrame { onFrame(id, frame) } else { reply(id, frame) }
        }
        func closed(_ id: UInt64) { closed.append(id) }
        var caughtUp: [(UInt64, Int)] = []
        func caughtUp(_ id: UInt64, dropped: Int) { caughtUp.append((id, dropped)) }
        func refusalLine(_ refusal: ControlServer.Refusal) -> [UInt8] { Array("refused \(refusal)\n".utf8) }

        func reply(_ id: UInt64, _ frame: LineFramer.Frame) {
            let text: String
            switch frame {
            case let .line(b): text = "r:" + String(decoding: b, as: UTF8.self) + "\n"
            case .tooLong: text = "too-long\n"
            }
            Array(text.utf8).withUnsafeBytes { server.reply(id, $0) }
        }

        var lines: [String] {
            frames.map { f in
                switch f.1 {
                case let .line(b): return String(decoding: b, as: UTF8.self)
                case .tooLong: return "<too long>"
                }
            }
        }
    }

    private var loop: TestLoop!
    private var bed: SocketBed!
    private var recorder: Recorder!
    private var server: ControlServer!
    private var path: String { bed.path }
    private var clients: [Int32] { bed.clients }

    private func start(_ limits: ControlServer.Limits = ControlServer.Limits()) throws {
        loop = TestLoop()
        bed = try SocketBed(loop: loop, prefix: "npt-transport")
        addTeardownBlock { [unowned self] in
            server?.closeAll()
            bed.close()
        }
        recorder = Recorder()
        server = try ControlServer(loop: loop, listenFD: try bed.listen(), limits: limits, delegate: recorder)
        recorder.server = server
    }

    private func connect() throws -> Int32 {
        let fd = try bed.connect()
        XCTAssertTrue(loop.run(until: { recorder.opened.count == clients.count }), "accepted")
        return fd
    }

    private func write(_ fd: Int32, _ text: String) throws { try bed.write(fd, text) }

    private func read(_ fd: Int32, until done: (String) -> Bool, timeout: Double = 5) -> String {
        bed.read(fd, until: done, timeout: timeout)
    }

    /// Runs `sh -c SCRIPT` with the client's socket as its stdout, to completion; returns its pid.
    private func runWriter(_ fd: Int32, _ script: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fd, 1)
        let argv = ["/bin/sh", "-c", script]
        let cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for p in cArgs { free(p) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/sh", &actions, nil, cArgs, nil) == 0 else { throw Errno(errno) }
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        return pid
    }

    /// Each line comes with the credentials of the process that sent it, also when several share the socket; a
    /// line begun by one and ended by another is the first one's. With SO_PASSCRED the kernel never hands over
    /// bytes of two senders in one read.
    func testEachLineCarriesItsSender() throws {
        try start()
        let c = try connect()
        XCTAssertEqual(recorder.connectors.map(\.pid), [getpid()])
        try write(c, "A\n")
        let child = try runWriter(c, "printf 'B\\n'")
        try write(c, "C\nD")
        let finisher = try runWriter(c, "printf 'E\\n'")
        XCTAssertTrue(loop.run(until: { recorder.frames.count == 4 }), "\(recorder.lines)")
        XCTAssertEqual(recorder.lines, ["A", "B", "C", "DE"])
        XCTAssertEqual(recorder.senders.map(\.pid), [getpid(), child, getpid(), getpid()])
        XCTAssertNotEqual(finisher, getpid())
        XCTAssertEqual(recorder.senders.map(\.uid), Array(repeating: getuid(), count: 4))
    }

    /// Socket activation: the client connected and wrote before the daemon existed, so before anyone set
    /// SO_PASSCRED on the listener. Since Linux 6.16 a socket takes the listener's flags at connect(): the request
    /// must still come with its sender (it came with none under a real systemd).
    func testAClientThatWroteBeforeTheServerStartedStillHasItsSender() throws {
        loop = TestLoop()
        bed = try SocketBed(loop: loop, prefix: "npt-transport")
        addTeardownBlock { [unowned self] in
            server?.closeAll()
            bed.close()
        }
        let listenFD = try bed.listen()
        // As systemd passes it without PassCredentials=yes.
        var off: Int32 = 0
        XCTAssertEqual(setsockopt(listenFD, SOL_SOCKET, SO_PASSCRED, &off, socklen_t(MemoryLayout<Int32>.size)), 0)
        let early = try bed.connect()
        let bytes = Array("EARLY\n".utf8)
        XCTAssertEqual(try FD.send(early, bytes), bytes.count)
        recorder = Recorder()
        server = try ControlServer(loop: loop, listenFD: listenFD, limits: ControlServer.Limits(), delegate: recorder)
        recorder.server = server
        XCTAssertTrue(loop.run(until: { recorder.frames.count == 1 }), "\(recorder.lines)")
        XCTAssertEqual(recorder.lines, ["EARLY"])
        XCTAssertEqual(recorder.senders.map(\.pid), [getpid()])
        XCTAssertEqual(recorder.senders.map(\.uid), [getuid()])
    }

    /// A burst of connections is accepted a batch per pass of the loop, so clients already there are served in
    /// between.
    func testConnectionsAreAcceptedABatchPerPass() throws {
        var limits = ControlServer.Limits()
        limits.acceptBatch = 4
        try start(limits)
        for _ in 0..<10 { _ = try bed.connect() }
        loop.runOnce(timeoutMilliseconds: 100)
        XCTAssertEqual(recorder.opened.count, 4, "one batch in one pass")
        XCTAssertTrue(loop.run(until: { recorder.opened.count == 10 }))
    }

    /// Past a uid's share, a client gets one line saying why and the end of the stream.
    func testAConnectionPastItsUIDsShareIsRefusedWithOneLine() throws {
        var limits = ControlServer.Limits()
        limits.maxConnectionsPerUID = 2
        limits.unlimitedUIDs = []
        try start(limits)
        _ = try connect()
        _ = try connect()
        let third = try UnixSocket.connect(path)
        try FD.setNonBlocking(third)
        defer { FD.close(third) }
        XCTAssertEqual(read(third) { _ in false }, "refused perUID(uid: \(getuid()), limit: 2)\n", "then the end")
        XCTAssertEqual(recorder.opened.count, 2)
    }

    /// Past the total, everyone is refused, the uids set apart from the per-uid share too; one leaving makes room.
    func testAConnectionPastTheTotalIsRefusedUntilOneLeaves() throws {
        var limits = ControlServer.Limits()
        limits.maxConnections = 3
        limits.maxConnectionsPerUID = 1
        limits.unlimitedUIDs = [getuid()]
        try start(limits)
        for _ in 0..<3 { _ = try connect() }
        let fourth = try UnixSocket.connect(path)
        try FD.setNonBlocking(fourth)
        XCTAssertEqual(read(fourth) { _ in false }, "refused total(limit: 3)\n")
        FD.close(fourth)
        bed.disconnect(clients.last!)
        XCTAssertTrue(loop.run(until: { recorder.closed.count == 1 }))
        _ = try bed.connect()
        XCTAssertTrue(loop.run(until: { recorder.opened.count == 4 }), "the next one is served")
    }

    func testRepliesComeInOrderAndRequestsAfterAHeldOneWait() throws {
        try start()
        recorder.onFrame = { [unowned self] id, frame in
            if case .line(Array("B".utf8)) = frame { server.hold(id) } else { recorder.reply(id, frame) }
        }
        let c = try connect()
        try write(c, "A\nB\nC\n")
        XCTAssertEqual(read(c) { $0.contains("r:A\n") }, "r:A\n")
        XCTAssertEqual(recorder.lines, ["A", "B"], "C is not taken while B's reply is held")

        // B's reply, then the release: C is served only at serveReleased(), never inside the release.
        let id = recorder.opened[0]
        recorder.reply(id, .line(Array("B".utf8)))
        server.resume(id)
        XCTAssertEqual(recorder.lines, ["A", "B"])
        server.serveReleased()
        XCTAssertEqual(recorder.lines, ["A", "B", "C"])
        XCTAssertEqual(read(c) { $0.contains("r:C\n") }, "r:B\nr:C\n")
    }

    func testAClientThatDoesNotReadStopsBeingReadAndLosesNothing() throws {
        var limits = ControlServer.Limits()
        limits.maxQueuedBytes = 32 * 1024
        try start(limits)
        // Replies much larger than the requests, and more of them than the client's socket can hold.
        let big = String(repeating: "x", count: 30_000)
        recorder.onFrame = { [unowned self] id, frame in
            guard case let .line(b) = frame else { return }
            Array((String(decoding: b, as: UTF8.self) + ":" + big + "\n").utf8).withUnsafeBytes { server.reply(id, $0) }
        }
        let c = try connect()
        let requests = (0..<100).map { "q\($0)" }
        try write(c, requests.map { $0 + "\n" }.joined())
        for _ in 0..<50 { loop.runOnce(timeoutMilliseconds: 2) }
        let taken = recorder.frames.count
        XCTAssertLessThan(taken, requests.count, "with nobody reading, requests stop being taken")
        XCTAssertGreaterThan(taken, 0)
        XCTAssertLessThanOrEqual(server.queuedBytes(recorder.opened[0]) ?? 0, limits.maxQueuedBytes + 31_000,
                                 "the queue is bounded by one reply past the limit")

        // Reading it all: every request answered, in order.
        let all = read(c, until: { $0.hasSuffix("q\(requests.count - 1):" + big + "\n") }, timeout: 20)
        let answered = all.split(separator: "\n").map { String($0.prefix { $0 != ":" }) }
        XCTAssertEqual(answered, requests)
    }

    /// A subscriber that falls `maxEventBytes` behind loses the events it has not read, never a reply; once it
    /// has read everything, the processor hears how many it missed (and sends the whole state again).
    func testASubscriberFallingBehindLosesEventsNotRepliesAndCatchesUp() throws {
        var limits = ControlServer.Limits()
        limits.maxEventBytes = 256 * 1024
        try start(limits)
        let c = try connect()
        let id = recorder.opened[0]
        server.keepOpenAfterInputEnds(id)
        let head = Array("{\"event\":\"link\",\"seq\":1".utf8)
        let tail = Array((",\"pad\":\"" + String(repeating: "p", count: 32_000) + "\"}\n").utf8)
        func event() { head.withUnsafeBytes { h in tail.withUnsafeBytes { t in server.event(id, head: h, tail: t) } } }
        var sent = 0
        for i in 0..<200 {
            event()
            sent += 1
            // A reply in the middle of the backlog: it must survive the drop.
            if i == 100 { Array("{\"ok\":true,\"reply\":1}\n".utf8).withUnsafeBytes { server.reply(id, $0) } }
        }
        XCTAssertEqual(recorder.closed, [], "falling behind does not close the connection")
        XCTAssertLessThan(server.queuedBytes(id) ?? 0, limits.maxEventBytes, "the backlog was dropped")
        XCTAssertTrue(recorder.caughtUp.isEmpty, "not caught up before it reads")

        let got = read(c, until: { $0.contains("\"reply\":1}\n") && !recorder.caughtUp.isEmpty })
        let lines = got.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("{\"event\":\"link\"") || $0 == "{\"ok\":true,\"reply\":1}" },
                      "whole lines only")
        XCTAssertEqual(lines.filter { $0.hasPrefix("{\"ok\"") }.count, 1, "the reply came through")
        let events = lines.filter { $0.hasPrefix("{\"event\"") }.count
        XCTAssertEqual(recorder.caughtUp.first?.0, id)
        XCTAssertEqual(events + (recorder.caughtUp.first?.1 ?? 0), sent, "every event either sent or counted as dropped")
        XCTAssertGreaterThan(recorder.caughtUp.first?.1 ?? 0, 0)

        // Caught up: events flow again.
        event()
        XCTAssertTrue(read(c, until: { $0.hasSuffix("\"}\n") }).hasPrefix("{\"event\":\"link\""))
    }

    /// One that does not read at all is closed `maxLagMicroseconds` after falling behind, with a last overflow
    /// line, and what it had is whole lines.
    func testASubscriberThatStopsReadingIsClosedAfterItsTime() throws {
        var limits = ControlServer.Limits()
        limits.maxEventBytes = 256 * 1024
        limits.maxLagMicroseconds = 200_000
        try start(limits)
        let c = try connect()
        let id = recorder.opened[0]
        server.keepOpenAfterInputEnds(id)
        let head = Array("{\"event\":\"link\",\"seq\":1".utf8)
        let tail = Array((",\"pad\":\"" + String(repeating: "p", count: 32_000) + "\"}\n").utf8)
        for _ in 0..<200 { head.withUnsafeBytes { h in tail.withUnsafeBytes { t in server.event(id, head: h, tail: t) } } }
        XCTAssertTrue(loop.run(until: { loop.armedTimers > 0 }), "its time runs")
        loop.advance(byMicroseconds: 199_999)
        XCTAssertEqual(recorder.closed, [])
        loop.advance(byMicroseconds: 1)
        XCTAssertTrue(loop.run(until: { recorder.closed == [id] }, timeout: 5), "closed once its time ran out")
        let got = read(c) { _ in false }
        let lines = got.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        XCTAssertGreaterThan(lines.count, 2, "the events the socket could hold")
        XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("{\"event\":") && $0.hasSuffix("}") }, "whole lines")
        // PROTOCOL.md's last line: it used to go behind a full socket buffer, and nobody ever got it.
        XCTAssertEqual(lines.last, "{\"event\":\"overflow\"}", "the overflow line, last")
        XCTAssertEqual(lines.filter { $0.contains("overflow") }.count, 1)
        XCTAssertTrue(recorder.caughtUp.isEmpty)
    }

    /// Subscribers that never read hold one copy of the events they share, not one each: 300 of them, each more
    /// than 1 MiB behind on the same events, used to hold 300 MiB (2,000 held 2.3 GB in the daemon).
    func testSubscribersThatNeverReadShareTheirEvents() throws {
        try start()
        let ids = try subscribers(300)
        let before = try residentBytes()
        let head = Array("{\"event\":\"link\",\"seq\":1".utf8)
        for n in 0..<40 {
            let tail = Array((",\"n\":\(n),\"pad\":\"" + String(repeating: "p", count: 32_000) + "\"}\n").utf8)
            let body = tail.withUnsafeBytes { server.body($0) }
            for id in ids { head.withUnsafeBytes { server.event(id, head: $0, body: body) } }
        }
        let grown = try residentBytes() - before
        XCTAssertEqual(recorder.closed, [], "behind, not closed")
        XCTAssertLessThan(server.queuedTotal, 8 << 20, "all queues hold \(server.queuedTotal >> 20) MiB")
        XCTAssertLessThan(grown, 32 << 20, "RSS grew by \(grown >> 20) MiB")
    }

    /// What all queues hold together is bounded too, not only each: 300 subscribers with events of their own
    /// (not shared) past `maxTotalQueuedBytes` lose them, as if each had fallen behind on its own.
    func testAllQueuesTogetherAreBounded() throws {
        var limits = ControlServer.Limits()
        limits.maxTotalQueuedBytes = 16 << 20
        try start(limits)
        let ids = try subscribers(300)
        let head = Array("{\"event\":\"link\",\"seq\":1".utf8)
        let tail = Array((",\"pad\":\"" + String(repeating: "p", count: 32_000) + "\"}\n").utf8)
        var peak = 0
        for _ in 0..<40 {
            for id in ids { head.withUnsafeBytes { h in tail.withUnsafeBytes { server.event(id, head: h, tail: $0) } } }
            peak = max(peak, server.queuedTotal)
        }
        XCTAssertLessThan(peak, limits.maxTotalQueuedBytes + 256 * 1024, "at most one event past the bound")
        XCTAssertEqual(recorder.closed, [])
    }

    /// `n` connections that stay open after their input ends, as the server knows them; they never read.
    private func subscribers(_ n: Int) throws -> [UInt64] {
        let first = recorder.opened.count
        for i in 0..<n {
            _ = try connect()
            XCTAssertTrue(loop.run(until: { recorder.opened.count == first + i + 1 }, timeout: 5))
            server.keepOpenAfterInputEnds(recorder.opened[first + i])
        }
        return Array(recorder.opened[first...])
    }

    private func residentBytes() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kb = Int(line.split(separator: " ")[1]) else { throw Errno(EINVAL) }
        return kb * 1024
    }

    func testALongLineIsRefusedAndTheConnectionStaysUsable() throws {
        var limits = ControlServer.Limits()
        limits.maxLine = 16
        try start(limits)
        let c = try connect()
        try write(c, String(repeating: "x", count: 100) + "\nPING\n")
        XCTAssertEqual(read(c) { $0.contains("r:PING") }, "too-long\nr:PING\n")
        XCTAssertEqual(recorder.lines, ["<too long>", "PING"])
    }

    func testTheLastLineCountsWithoutItsNewlineAndAnEndedClientIsClosed() throws {
        try start()
        let c = try connect()
        try write(c, "PING")
        _ = try sys { shutdown(c, Int32(SHUT_WR)) }
        XCTAssertEqual(read(c) { _ in false }, "r:PING\n", "answered, then the end of the stream")
        XCTAssertEqual(recorder.closed, recorder.opened)
    }

    func testASubscriberStaysOpenAfterItsInputEnds() throws {
        try start()
        recorder.onFrame = { [unowned self] id, frame in
            server.keepOpenAfterInputEnds(id)
            recorder.reply(id, frame)
        }
        let c = try connect()
        try write(c, "SUBSCRIBE\n")
        _ = try sys { shutdown(c, Int32(SHUT_WR)) }
        XCTAssertEqual(read(c) { $0.contains("r:SUBSCRIBE\n") }, "r:SUBSCRIBE\n")
        for _ in 0..<10 { loop.runOnce(timeoutMilliseconds: 2) }
        XCTAssertEqual(recorder.closed, [], "still open for events")
        let line = Array("{\"event\":\"stopping\",\"seq\":2}\n".utf8)
        line.withUnsafeBytes { l in server.event(recorder.opened[0], head: UnsafeRawBufferPointer(rebasing: l[0..<0]), tail: l) }
        XCTAssertEqual(read(c) { $0.contains("stopping") }, "{\"event\":\"stopping\",\"seq\":2}\n")
    }
}
