// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// Clients that poll on one connection get repeated replies from a per-connection cache; a change in the daemon's
/// state (links, policy, decisions) must reach the very next reply on that same connection.
final class PollingTests: IntegrationTestCase {
    func testRepeatedQueryOnOneConnectionSeesEveryChange() throws {
        let f = try makeAppFixture(policy: """
            [App poller]
            User=4242
            WiFi=allow
            WWAN=ask

            """)
        try f.addAddress("wlan0")
        let conn = try EvChannel.connect(f.socket, name: "poller")
        defer { conn.close() }

        func ask() throws -> [String: Any] {
            let o = try conn.request("QUERY poller")
            XCTAssertEqual(o["ok"] as? Bool, true, "\(o)")
            return o
        }
        // The same request twice in an unchanged state: same answer (served from the cache the second time).
        XCTAssertEqual(try ask()["reason"] as? String, "no-network")
        XCTAssertEqual(try ask()["reason"] as? String, "no-network")

        // A link change: the next identical request on this connection must see it, not the cached reply.
        try f.addDefaultRoute("wlan0", metric: 100)
        try waitUntil("the same connection sees the new default route") {
            let o = try ask()
            return (o["reason"] as? String == "ok", "\(o)")
        }
        XCTAssertEqual((try ask()["via"] as? [String: Any])?["name"] as? String, "wlan0")

        // A policy change (RELOAD on another connection), then a decision: both reach the next reply.
        let edited = try String(contentsOfFile: f.config, encoding: .utf8).replacingOccurrences(of: "WiFi=allow",
                                                                                             with: "WiFi=ask")
        try edited.write(toFile: f.config, atomically: true, encoding: .utf8)
        XCTAssertEqual(try request(f.socket, "RELOAD")["ok"] as? Bool, true)
        let afterReload = try ask()
        XCTAssertEqual(afterReload["reason"] as? String, "denied", "no agent to ask: \(afterReload)")
        XCTAssertEqual((afterReload["sources"] as? [String: Any])?["wifi"] as? String, "no-agent", "\(afterReload)")
        XCTAssertEqual(try request(f.socket, "DECIDE poller wifi allow --once")["ok"] as? Bool, true)
        let afterDecision = try ask()
        XCTAssertEqual(afterDecision["reason"] as? String, "ok", "\(afterDecision)")
        XCTAssertEqual((afterDecision["sources"] as? [String: Any])?["wifi"] as? String, "once", "\(afterDecision)")
    }
}
