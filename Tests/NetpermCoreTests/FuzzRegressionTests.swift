// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import XCTest

/// Inputs the fuzzers (Fuzz/, `make fuzz`) found breaking an invariant, each kept as the smallest case that did.
final class FuzzRegressionTests: XCTestCase {
    /// Fuzz/Engine: `1 SUBSCRIBE links apps policy`, then `1 SUBSCRIBE prompts` from an admin. The second
    /// SUBSCRIBE makes the connection the first agent, which changes verdicts, and those events went to the
    /// connection's old subscription (seq 2, 3...) before its new snapshot, which was numbered from the count taken
    /// before them: seq went 1, 2, 3, then 2 again.
    func testResubscribingAsTheFirstAgentKeepsSeqCounting() {
        let h = EngineHarness(policy: "[Defaults]\nWWAN=ask\n[App a]\nUser=1\nWiFi=ask\n",
                              links: [Links.eth, Links.wwan], agents: false)
        let c = h.connect()
        XCTAssertEqual(h.subscribe(c, "apps").snapshot["seq"], 1)
        let lines = h.send(c, "SUBSCRIBE apps prompts").map(EngineHarness.parse)
        let events = lines.filter { $0["event"] != nil }
        XCTAssertGreaterThan(events.count, 1, "the agent's arrival changes a verdict")
        XCTAssertEqual(events.map { $0["seq"]?.intValue }, Array(2..<(2 + events.count)))
        XCTAssertEqual(events.last?["event"], "snapshot")
    }

    /// Fuzz/classify, seed sysfs-stack-bond with its links listed in reverse: a bond's `classified_by` named its
    /// ports in the order the kernel's picture listed them ("ports:enp4s0,enp3s0"), so the same bond read again in
    /// another order was a changed link (a `link` event, a log line) though nothing had changed.
    func testABondNamesItsPortsInTheSameOrderWhateverTheKernelsOrder() {
        func link(_ index: Int32, _ name: String, kind: String? = nil, master: Int32? = nil) -> LinkFacts {
            LinkFacts(index: index, name: name, arphrd: ARPHRD.ether, rtnlKind: kind, adminUp: true, carrier: true,
                      operstate: "up", masterIndex: master)
        }
        let links = [link(10, "bond0", kind: "bond"), link(11, "enp3s0", master: 10), link(12, "enp4s0", master: 10)]
        func bond(_ order: [LinkFacts]) -> Link? {
            let state = NetworkState(snapshot: KernelSnapshot(links: order)) {
                Classifier.classify($0, sysfs: SysfsFacts(), overrides: [])
            }
            return state.link(named: "bond0")
        }
        XCTAssertEqual(bond(links)?.classifiedBy, "ports:enp3s0,enp4s0")
        XCTAssertEqual(bond(links.reversed())?.classifiedBy, "ports:enp3s0,enp4s0")
        XCTAssertEqual(bond([links[0], links[2], links[1]]), bond(links))
    }
}
