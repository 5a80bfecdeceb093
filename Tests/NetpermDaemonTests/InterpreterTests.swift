// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermDaemon
import NetpermHost
import NetpermIO
import NetpermPolicy
import TestSupport
import XCTest

/// The interpreter between the engine and its edges, on a test loop with fake edges (DaemonBed): effects carried
/// out in their order, the decisions' store failing before and after its rename, a policy that is slow to read,
/// timers. The test process is the client, as root.
final class InterpreterTests: XCTestCase {
    private func bed(store: DecisionSaving? = nil,
                     loadPolicy: (@Sendable (String) -> ConfigParseResult)? = nil) throws -> DaemonBed {
        let b = try DaemonBed(store: store, loadPolicy: loadPolicy)
        addTeardownBlock { b.close() }
        return b
    }

    /// A pipelined DECIDE and PING: the DECIDE is held while its decision is written, subscribers hear the new
    /// verdict before its reply, and the PING behind it is answered after it.
    /// Start-up's code pages are released once its work is done: READY=1 sent (the bed's start) and the first desktop
    /// files read, not before, and only once.
    func testStartUpSettlesOnceAfterReadyAndTheDesktopFiles() throws {
        let b = try bed()
        var settled = 0
        b.interpreter.onStartupSettled = { settled += 1 }
        XCTAssertTrue(b.notifications.contains { if case .ready = $0 { true } else { false } }, "READY=1 was sent")
        b.interpreter.feed(.reload)
        XCTAssertEqual(settled, 0, "the desktop files are still to be read")
        b.interpreter.feed(.desktopCatalog(DesktopCatalog()))
        XCTAssertEqual(settled, 1)
        b.interpreter.feed(.desktopCatalog(DesktopCatalog()))
        b.interpreter.feed(.reload)
        XCTAssertEqual(settled, 1, "once")
    }

    func testADecisionIsWrittenThenHeardThenAnswered() throws {
        let b = try bed()
        let subscriber = try b.connect()
        try b.send(subscriber, "SUBSCRIBE apps")
        XCTAssertEqual(b.lines(subscriber, 2).map { $0["subscribed"] ?? $0["event"] }, [.array([.string("apps")]), "snapshot"])
        let decider = try b.connect()
        try b.send(decider, "DECIDE backup ethernet allow\nPING")
        let replies = b.lines(decider, 2)
        XCTAssertEqual(replies.first?["decided"]?["app"], "backup", "\(replies)")
        XCTAssertEqual(replies.last?["pong"], true, "the request behind the held one, after it")
        // Written before it was answered: the file holds it.
        let file = String(decoding: try Files.read(b.stateDir + "/decisions.conf"), as: UTF8.self)
        XCTAssertTrue(file.contains("[App backup]") && file.contains("Ethernet=allow"), file)
        // Sent before the reply: the event is in the subscriber's socket without another pass of the loop.
        var got: [UInt8] = []
        while let r = try? FD.read(subscriber, appendingTo: &got), case .bytes = r {}
        let event = String(decoding: got, as: UTF8.self)
        XCTAssertTrue(event.hasPrefix("{\"event\":\"app\"") && event.contains("\"app\":\"backup\""), event)
    }

    /// Nothing was replaced (the temporary file cannot be made): the decision is refused and nothing changes.
    func testAStoreThatFailsBeforeItsRenameChangesNothing() throws {
        let b = try bed()
        // Root may write anywhere: a state directory that is gone makes the temporary file impossible.
        SocketBed.removeTree(b.stateDir)
        let c = try b.connect()
        let r = try b.request(c, "DECIDE backup ethernet allow")
        XCTAssertEqual(r["error"], "internal", "\(r)")
        XCTAssertTrue(r["message"]?.stringValue?.hasPrefix("cannot store the decision: \(b.stateDir)/decisions.conf: ") == true, "\(r)")
        XCTAssertEqual(try b.request(c, "QUERY backup")["available"], false)
        XCTAssertFalse(FD.exists(b.stateDir + "/decisions.conf"))
    }

    /// The store's edge keeps the errno where it happened: a directory's fsync failing with EIO, a write refused
    /// with ENOENT (the directory gone) come back as the typed error's errno, with the words the log had before.
    func testTheStoreKeepsTheErrno() throws {
        let dir = "/tmp/npt-edge-errno-\(getpid())"
        let store = DecisionStore(stateDir: dir, syncDirectory: { _ throws(Errno) in throw Errno(EIO) })
        defer { SocketBed.removeTree(dir) }
        XCTAssertEqual(store.save(Decisions()),
                       .storedNotSynced(EdgeError(.storeDecisions, errno: EIO, "\(dir): \(Errno(EIO))")))
        SocketBed.removeTree(dir)
        guard case let .failed(e) = store.save(Decisions()) else { return XCTFail("stored in a directory that is gone") }
        XCTAssertEqual(e.operation, .storeDecisions)
        XCTAssertEqual(e.errno, ENOENT)
        XCTAssertEqual(e.description, "\(dir)/decisions.conf: \(Errno(ENOENT))")
    }

    /// The file is in place but the directory's fsync failed: the decision is on disk and in force, and the log
    /// says its durability is in doubt.
    func testAStoreThatFailsAfterItsRenameIsStored() throws {
        let dir = "/tmp/npt-daemon-state-\(getpid())"
        addTeardownBlock { SocketBed.removeTree(dir) }
        let store = DecisionStore(stateDir: dir) { _ throws(Errno) in throw Errno(EIO) }
        let b = try bed(store: store)
        let c = try b.connect()
        let r = try b.request(c, "DECIDE backup ethernet allow")
        XCTAssertEqual(r["ok"], true, "\(r)")
        XCTAssertEqual(try b.request(c, "QUERY backup")["available"], true)
        XCTAssertTrue(String(decoding: try Files.read(dir + "/decisions.conf"), as: UTF8.self).contains("[App backup]"))
        XCTAssertEqual(b.logged("decisions written to \(dir)/decisions.conf, but syncing \(dir): ").count, 1, "\(b.log)")
    }

    /// A disk that takes long to write: the decision waits for it, and nobody else does.
    func testADecisionIsWrittenOffTheLoop() throws {
        let gate = Gate()
        let b = try bed(store: SlowStore(gate: gate))
        let decider = try b.connect()
        try b.send(decider, "DECIDE backup ethernet allow")
        let other = try b.connect()
        XCTAssertEqual(try b.request(other, "PING")["pong"], true, "answered while the decision is written")
        XCTAssertEqual(b.lines(decider, timeout: 0.1), [], "held while its decision is written")
        gate.open()
        XCTAssertEqual(b.lines(decider).first?["ok"], true)
        XCTAssertEqual(try b.request(other, "QUERY backup")["available"], true)
    }

    /// A policy that takes long to read: RELOAD waits for it while other clients are answered at once.
    func testASlowPolicyLoadLeavesTheLoopServing() throws {
        let gate = Gate()
        let b = try bed(loadPolicy: { path in
            // Start-up reads on the loop; only the reload below waits.
            let text = String(decoding: (try? Files.read(path)) ?? [], as: UTF8.self)
            if text.contains("[App later]") { gate.wait() }
            return Config.parse(files: [(path, text)])
        })
        try AtomicFile.write(b.policyPath, DaemonBed.policy + "\n[App later]\nUser=4244\n")
        let reloader = try b.connect()
        try b.send(reloader, "RELOAD")
        let other = try b.connect()
        XCTAssertEqual(try b.request(other, "PING")["pong"], true, "answered while the policy is read")
        XCTAssertEqual(try b.request(other, "STATUS")["policy"]?["generation"], 1, "the old policy meanwhile")
        XCTAssertEqual(b.notifications.last, .reloading)
        gate.open()
        let r = b.lines(reloader).first
        XCTAssertEqual(r?["generation"], 2, "\(String(describing: r))")
        XCTAssertEqual(r?["apps"], 3)
    }

    /// A WAIT's time-out is a timer of the loop: nothing before it is due, the time-out reply when it is.
    func testAWaitTimesOutWhenItsTimerFires() throws {
        let b = try bed()
        b.setLinks([])
        let c = try b.connect()
        try b.send(c, "WAIT backup 2")
        XCTAssertEqual(b.lines(c, timeout: 0.05), [], "held")
        b.loop.advance(byMicroseconds: 1_999_999)
        XCTAssertEqual(b.lines(c, timeout: 0.05), [], "not yet")
        b.loop.advance(byMicroseconds: 1)
        XCTAssertEqual(b.lines(c).first?["error"], "timeout")
    }

    /// Mode=off at start-up: a table an earlier run left is removed (quietly), and so is steering.
    func testStartUpRemovesWhatAnEarlierRunLeft() throws {
        let b = try bed()
        XCTAssertEqual(b.rules.loaded, [[Ruleset.removal]])
        XCTAssertEqual(b.steering.plans.count, 1)
        XCTAssertEqual(b.steering.plans.first.map { $0 == nil }, true)
        XCTAssertEqual(b.notifications.first.map { if case .ready = $0 { true } else { false } }, true, "\(b.notifications)")
    }
}

/// Decisions written to a disk that answers only once the test opens the gate (or fails after the gate's bound).
struct SlowStore: DecisionSaving {
    let gate: Gate
    var path: String { "/nonexistent/decisions.conf" }
    func save(_ d: Decisions) -> StoreOutcome { gate.wait() ? .stored : .failed(EdgeError(.storeDecisions, "the disk never answered")) }
}
