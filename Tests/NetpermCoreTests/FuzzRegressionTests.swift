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
}
