// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import TestSupport
import XCTest

/// A reload's large computations made away from the loop (ReloadPreparation.swift): taken when nothing they read
/// changed while the files were read, made on the loop when something did, and the same effects either way. Each
/// test drives two engines with the same inputs, one given the preparations and one not (as when the daemon reads
/// the policy on the loop), and compares every effect.
final class ReloadPreparationTests: XCTestCase {
    /// `n` apps (users, units and executables) whose permissions move with `turn`: a reload moves most verdicts and
    /// most of the rules, as bench figure 19's does.
    static func policy(apps n: Int, turn: Int, mode: String = "block", count: Bool = false) -> String {
        let values = ["allow", "deny", "ask"]
        var s = "[Defaults]\nWWAN=ask\n[Enforcement]\nMode=\(mode)\n" + (count ? "[Usage]\nCount=yes\n" : "")
        for i in 0..<n {
            s += "[App a\(i)]\n"
            switch i % 3 {
            case 0: s += "User=\(2000 + i)\n"
            case 1: s += "Unit=u\(i).service\n"
            default: s += "Executable=/usr/bin/a\(i)\n"
            }
            s += "WWAN=\(values[(i + turn) % 3])\nWiFi=\(values[(i / 2 + turn) % 3])\n"
        }
        return s
    }

    static func cgroups(_ ids: [Int]) -> UnitCgroups {
        UnitCgroups(nftRoot: "", units: ids.map {
            UnitCgroup(path: "system.slice/u\($0).service", level: 2, unit: "u\($0).service", id: UInt64(100 + $0))
        })
    }

    /// The agent's and the subscriber's connections, the same in both engines.
    private var agent: ConnectionID = 0, subscriber: ConnectionID = 0

    /// Two engines, one given the preparations: started with an agent and a subscriber, enforcing.
    private func pair(mode: String = "block", count: Bool = false) -> [EngineHarness] {
        [true, false].map { prepares in
            let h = EngineHarness(policy: Self.policy(apps: 30, turn: 0, mode: mode, count: count),
                                  links: [Links.lo, Links.eth, Links.wwan])
            h.preparesReloads = prepares
            h.feed(.cgroups(Self.cgroups([1, 4, 7])))
            agent = h.connectAgent()
            subscriber = h.connect(Peers.root)
            _ = h.send(subscriber, "SUBSCRIBE apps links")
            return h
        }
    }

    /// Every effect but the debug lines that say what was made again on the loop.
    private func effects(_ h: EngineHarness) -> [String] { h.transcript.filter { !$0.contains("made again on the loop") } }

    private func assertSameEffects(_ h: [EngineHarness], _ what: String = "", file: StaticString = #filePath,
                                   line: UInt = #line) {
        let (a, b) = (effects(h[0]), effects(h[1]))
        XCTAssertEqual(a.count, b.count, "effects \(what)", file: file, line: line)
        for (i, (x, y)) in zip(a, b).enumerated() where x != y {
            return XCTFail("\(what) effect \(i) differs:\n\(x)\n-- made on the loop:\n\(y)", file: file, line: line)
        }
    }

    /// Nothing changed while the files were read: the policy's change, the apps, the rules and their change, the
    /// units' naming, usage's tagging and every verdict are taken as prepared.
    func testAReloadTakesWhatWasPrepared() {
        let h = pair()
        for x in h { x.reload(policy: Self.policy(apps: 30, turn: 1)) }
        XCTAssertEqual(h[0].engine.preparations.taken, 6)
        XCTAssertEqual(h[0].engine.preparations.missed, 0)
        XCTAssertEqual(h[1].engine.preparations.taken, 0)
        XCTAssertEqual(h[1].engine.preparations.missed, 0)
        XCTAssertGreaterThan(h[0].takeEvents(subscriber, named: "app").count, 10, "the reload moved most apps")
        assertSameEffects(h)
        // Mode=steer: the same but the naming of units (not done in that mode).
        let steer = pair(mode: "steer")
        for x in steer { x.reload(policy: Self.policy(apps: 30, turn: 2, mode: "steer")) }
        XCTAssertEqual(steer[0].engine.preparations.taken, 5)
        XCTAssertEqual(steer[0].engine.preparations.missed, 0)
        assertSameEffects(steer)
        // Counting: what usage tags connections by too.
        let counting = pair(count: true)
        for x in counting { x.reload(policy: Self.policy(apps: 30, turn: 1, count: true)) }
        XCTAssertEqual(counting[0].engine.preparations.taken, 7)
        XCTAssertEqual(counting[0].engine.preparations.missed, 0)
        assertSameEffects(counting)
    }

    /// Each thing the preparations read, changed while the files are read: what depends on it is made on the loop,
    /// and the effects are those of a reload made there.
    func testWhatChangedMeanwhileIsMadeOnTheLoop() {
        let changes: [(String, (EngineHarness) -> Void)] = [
            ("a decision", { _ = $0.send($0.connect(Peers.root), "DECIDE a2 wwan allow") }),
            ("a decision for this policy only", { _ = $0.send($0.connect(Peers.root), "DECIDE a5 wifi allow --once") }),
            ("the links", { $0.setLinks([Links.lo, Links.wwan]) }),
            ("a subscriber of an app outside the policy", {
                _ = $0.send($0.connect(makePeer(uid: 3000, exe: "/usr/bin/stranger")), "SUBSCRIBE self")
            }),
            ("the units' cgroups", { $0.feed(.cgroups(Self.cgroups([1, 4, 7, 10]))) }),
            ("the agents", { $0.disconnect(self.agent) }),
        ]
        for (what, change) in changes {
            let h = pair()
            for x in h {
                x.policyLoadIsManual = true
                x.reload(policy: Self.policy(apps: 30, turn: 1))
                change(x)
                x.completePolicyLoad()
            }
            XCTAssertGreaterThan(h[0].engine.preparations.missed, 0, what)
            XCTAssertGreaterThan(h[0].logged(containing: "made again on the loop").count, 0, what)
            assertSameEffects(h, what)
        }
    }

    /// Reloads, decisions, links, cgroups and subscribers in random orders, each load completed at a random point, with
    /// counting off and on:
    /// the engine given the preparations writes what the one without writes, effect for effect.
    func testRandomInterleavingsWriteTheSameEffects() {
        var rng = SplitMix(seed: 0x5EED_34)
        var taken = 0, missed = 0
        for round in 0..<6 {
            let count = round % 2 == 1
            let h = pair(count: count)
            for x in h { x.policyLoadIsManual = true }
            var steps: [Int] = []
            for _ in 0..<30 { steps.append(rng.next(9)) }
            var turn = 0
            for (i, step) in steps.enumerated() {
                for x in h {
                    switch step {
                    case 0, 1: x.reload(policy: Self.policy(apps: 12 + (turn % 3) * 4, turn: turn, count: count))
                    case 2: if x.pendingPolicyLoads > 0 { x.completePolicyLoad() }
                    case 3: _ = x.send(x.connect(Peers.root), "DECIDE a\(i % 12) wwan \(i % 2 == 0 ? "allow" : "deny")")
                    case 4: x.setLinks(i % 2 == 0 ? [Links.lo, Links.wwan] : [Links.lo, Links.eth, Links.wwan])
                    case 5: x.feed(.cgroups(Self.cgroups(Array(stride(from: 1, to: 20, by: 1 + i % 4)))))
                    case 6: _ = x.send(x.connect(makePeer(uid: 3000 + UInt32(i), exe: "/usr/bin/s\(i)")), "SUBSCRIBE self")
                    case 7: x.policyLoadIsManual.toggle()
                    default: if x.pendingPolicyLoads > 0 { x.completePolicyLoad() }
                    }
                }
                if step <= 1 { turn += 1 }
            }
            for x in h {
                x.policyLoadIsManual = false
                while x.pendingPolicyLoads > 0 { x.completePolicyLoad() }
            }
            assertSameEffects(h, "round \(round)")
            taken += h[0].engine.preparations.taken
            missed += h[0].engine.preparations.missed
        }
        XCTAssertGreaterThan(taken, 0, "some preparations were taken")
        XCTAssertGreaterThan(missed, 0, "and some were not")
    }
}
