// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import Foundation
import XCTest

/// The engine is deterministic: the same inputs give the same effects, byte for byte, in the same order. Swift's
/// dictionaries and sets iterate in an order that differs between two instances and between two processes
/// (hashing is seeded per process unless SWIFT_DETERMINISTIC_HASHING is set), so every place the engine iterates
/// one to produce effects must impose an order: events of one change by app, sessions by connection, a prompt's
/// identity by the earliest waiting connection.
final class EngineDeterminismTests: XCTestCase {
    /// Pairs of apps that share a permission set, so one change moves several sets and several apps in each.
    static let policy = """
    [Defaults]
    WWAN=ask
    [Enforcement]
    Mode=block
    [App zeta]
    User=101
    WWAN=allow
    [App alpha]
    User=102
    WWAN=allow
    [App mid]
    User=103
    WiFi=deny
    [App beta]
    User=104
    WiFi=deny
    [App yak]
    User=105
    Ethernet=deny
    WiFi=deny
    [App gamma]
    User=106
    Ethernet=deny
    WiFi=deny
    [App asker]
    User=107
    [App other]
    User=108
    [App unit]
    Unit=unit.service
    WWAN=deny
    [App gone]
    User=109
    WiFi=deny
    WWAN=deny
    Ethernet=deny
    """

    /// One run of a scenario that reaches every place the engine iterates a dictionary: several subscribers, one
    /// change moving many apps, several waiters answered at once, several processes of one app waiting for it to
    /// be asked about, users' own agents and decisions, waits ended by a reload, decisions, a rejected packet, a
    /// netlink overrun, a stop.
    static func transcript() -> [String] {
        let h = EngineHarness(policy: policy, links: [], agents: true)
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: [UnitCgroup(path: "system.slice/unit.service", level: 2,
                                                                      unit: "unit.service", id: 77)])))
        let subscribers = (0..<3).map { _ in h.connect(Peers.root) }
        for (i, s) in subscribers.enumerated() { _ = h.send(s, i == 0 ? "SUBSCRIBE links apps prompts" : "SUBSCRIBE apps") }
        // Three processes of one app wait for it, then the network comes: its prompt names one of them.
        let askers = (0..<3).map { h.connect(makePeer(uid: 107, exe: "/usr/bin/asker", pid: 700 + Int32($0))) }
        for a in askers { _ = h.send(a, "WAIT") }
        // Two users' own agents: their prompts and decisions are per uid.
        let userAgents = [107, 108].map { h.connect(makePeer(uid: UInt32($0), exe: "/usr/bin/netpermctl", pid: 900 + Int32($0))) }
        for u in userAgents { _ = h.send(u, "SUBSCRIBE prompts") }
        let byName = (0..<2).map { _ in h.connect(Peers.root) }
        for w in byName { _ = h.send(w, "WAIT gone") }
        let others = (0..<2).map { h.connect(makePeer(uid: 108, exe: "/usr/bin/other", pid: 800 + Int32($0))) }
        for o in others { _ = h.send(o, "WAIT other 30") }
        h.setLinks([Links.wwan])
        h.setLinks([Links.eth, Links.wlan, Links.wwan])
        let root = h.connect(Peers.root)
        _ = h.send(root, "DECIDE asker wwan allow")
        _ = h.send(userAgents[1], "DECIDE other wifi allow")
        h.setLinks([Links.wwan])
        h.feed(.blocked(app: "other", kind: .wwan, uid: 108, ifindex: nil))
        h.setLinks([Links.wlan])
        h.kernelResyncs += 1
        h.setLinks([Links.eth])
        _ = h.send(root, "FORGET asker")
        h.reload(policy: policy.replacingOccurrences(of: "[App gone]", with: "[App went]"))
        h.advance(bySeconds: 61)
        for s in [subscribers[1], askers[0], others[1]] { h.disconnect(s) }
        h.setLinks([Links.wwan, Links.wlan])
        h.feed(.stopping)
        return h.transcript
    }

    func testTwoEnginesWriteTheSameEffects() {
        let a = Self.transcript(), b = Self.transcript()
        XCTAssertGreaterThan(a.count, 200)
        XCTAssertEqual(a.count, b.count)
        for (i, (x, y)) in zip(a, b).enumerated() where x != y {
            return XCTFail("effect \(i) differs:\n\(x)\n\(y)")
        }
    }

    /// Across processes too, with the hash seed random in one and fixed in the other: this test's own binary runs
    /// `testWriteTranscript` twice (it writes the transcript where NETPERMD_TRANSCRIPT says).
    func testTwoProcessesWriteTheSameEffects() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("npt-determinism-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var outputs: [String] = []
        for (i, fixed) in [false, true].enumerated() {
            let out = dir.appendingPathComponent("t\(i)").path
            let p = Process()
            p.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
            p.arguments = ["NetpermCoreTests.EngineDeterminismTests/testWriteTranscript"]
            var env = ProcessInfo.processInfo.environment
            env["NETPERMD_TRANSCRIPT"] = out
            if fixed { env["SWIFT_DETERMINISTIC_HASHING"] = "1" } else { env["SWIFT_DETERMINISTIC_HASHING"] = nil }
            p.environment = env
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0, "the child run")
            outputs.append(try String(contentsOfFile: out, encoding: .utf8))
        }
        XCTAssertGreaterThan(outputs[0].count, 10_000)
        XCTAssertEqual(outputs[0], outputs[1])
        XCTAssertEqual(outputs[0], Self.transcript().joined(separator: "\n"), "and this process's")
    }

    /// Writes the transcript for `testTwoProcessesWriteTheSameEffects`; run on its own (no NETPERMD_TRANSCRIPT), it
    /// checks what one change's events look like: a subscriber hears the apps in the order of their names.
    func testWriteTranscript() throws {
        let t = Self.transcript()
        if let out = ProcessInfo.processInfo.environment["NETPERMD_TRANSCRIPT"] {
            try t.joined(separator: "\n").write(toFile: out, atomically: true, encoding: .utf8)
            return
        }
        let h = EngineHarness(policy: Self.policy, links: [Links.wwan])
        let s = h.connect(Peers.root)
        _ = h.subscribe(s, "apps")
        h.setLinks([Links.eth, Links.wlan])
        let apps = h.takeEvents(s, named: "app").compactMap { $0["app"]?.stringValue }
        XCTAssertGreaterThan(apps.count, 4)
        XCTAssertEqual(apps, apps.sorted())
    }
}
