// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// Metered= against the real daemon: an app allowed on Wi-Fi but not on metered links waits while the Wi-Fi (a
/// veth that [Interface wlan0] Metered=yes makes a phone's hotspot) is the only way out, and goes by another link
/// once there is one. Events and the WAIT reply are awaited, never slept for.
final class MeteredPolicyTests: IntegrationTestCase {
    static let policy = """
        [Interface wlan0]
        Metered=yes

        [App backup]
        Executable=/nonexistent/backup
        WiFi=allow
        Other=allow
        Metered=deny

        [App browser]
        Executable=/nonexistent/browser
        WiFi=allow

        """

    func testMeteredDenyWaitsOverTheHotspotAndGoesByAnotherLink() throws {
        let f = try makeAppFixture(policy: Self.policy)
        let events = try EvSubscriber(try EvChannel.connect(f.socket, name: "monitor"), topics: "links apps")
        let snapshotLinks = try XCTUnwrap(events.snapshot["links"] as? [[String: Any]])
        XCTAssertEqual(snapshotLinks.first { $0["name"] as? String == "wlan0" }?["metered"] as? Bool, true)
        XCTAssertTrue(snapshotLinks.allSatisfy { $0.keys.contains("ssid") && $0["ssid"] is NSNull },
                      "no nl80211 here: every link's ssid is null")

        // The hotspot is the only usable link: the backup is denied, by Metered= alone; the browser goes.
        try f.addAddress("wlan0")
        try events.expect("wlan0's address", [.link("wlan0", "has its address") { !$0.usable }])
        try f.addDefaultRoute("wlan0", metric: 100)
        try events.expect("wlan0 usable", [
            .link("wlan0", "usable") { $0.usable },
            .app("backup", available: false, reason: "denied", denied: ["metered"]),
            .app("browser", available: true, reason: "ok", via: "wlan0/wifi/true"),
            // The monitor's own app ([Defaults]) has the network now too.
            EvExpectation(description: "the monitor's own app") {
                $0["event"] as? String == "app" && $0["app"] as? String == events.ack["app"] as? String
            },
        ])
        let (v, o) = try queryVerdict(f.socket, "backup")
        XCTAssertEqual(v.permissions["metered"], "deny", "\(o)")
        XCTAssertEqual(v.permissions["wifi"], "allow", "\(o)")
        XCTAssertEqual((o["sources"] as? [String: String])?["metered"], "policy", "\(o)")
        let human = try ctl(["--socket", f.socket, "query", "backup"])
        XCTAssertTrue(human.lines.contains("network:      no: denied on metered"), human.stdout)

        // The backup waits ...
        let waiter = try EvChannel.connect(f.socket, name: "waiter")
        try waiter.send("PING\nWAIT backup 10\n")
        XCTAssertEqual(try waiter.readLine(timeout: 5), #"{"ok":true,"pong":true}"#)
        XCTAssertFalse(waiter.hasDataWaiting(), "WAIT answered over the hotspot")

        // ... until an unmetered link (a veth: kind other) carries the default route.
        try f.ns.addVethPair("eth0", peer: "eth0p")
        try f.ns.ip("addr", "add", "10.3.0.1/24", "dev", "eth0")
        try f.ns.ip("route", "add", "default", "via", "10.3.0.2", "dev", "eth0", "metric", "50")
        let reply = try waiter.readObject(timeout: 5)
        XCTAssertEqual(try JSONValue.bool(reply, "ok"), true, "\(reply)")
        let done = try XCTUnwrap(VerdictView(reply), "\(reply)")
        XCTAssertTrue(done.matches(available: true, reason: "ok", via: "eth0/other/false", denied: ["metered"], pending: []),
                      "\(done)")

        // The hotspot goes away: nothing metered is usable, so nothing is denied any more.
        try f.setPeer(of: "wlan0", up: false)
        _ = try waitForVerdict(f.socket, "backup", "no metered link usable") { $0.reason == "ok" && $0.denied.isEmpty }

        // No Wi-Fi driver in this kernel: the daemon said so once, at info, and nothing more about Wi-Fi.
        let wifiLines = f.daemon.log.split(separator: "\n").filter { $0.contains("wifi: ") }
        XCTAssertEqual(wifiLines.count, 1, f.daemon.log)
        XCTAssertTrue(wifiLines.first?.hasPrefix("<6>wifi: no nl80211") == true, "\(wifiLines)")
    }
}
