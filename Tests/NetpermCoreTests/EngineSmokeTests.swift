// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import XCTest

/// The harness itself, and the shape of a few effects the others rely on.
final class EngineSmokeTests: XCTestCase {
    func testQueryWaitDecideAndEvents() {
        let wlan = makeLink(3, "wlan0", .wifi, metric: 600)
        let h = EngineHarness(policy: "[App maps]\nUser=1000\nWWAN=ask\n", links: [], agents: true)
        let app = h.connect(makePeer(uid: 1000, exe: "/usr/bin/maps"))
        XCTAssertEqual(h.request(app, "QUERY")["reason"], "no-network")
        // WAIT holds until a link it may use is usable.
        XCTAssertEqual(h.send(app, "WAIT 5"), [])
        XCTAssertTrue(h.connections[app]!.held)
        h.setLinks([wlan])
        let done = h.take(app).map(EngineHarness.parse)
        XCTAssertEqual(done.last?["reason"], "ok")
        XCTAssertFalse(h.connections[app]!.held)
        XCTAssertEqual(h.armedTimers, 0, "the time-out was cancelled")
        // A lasting decision is persisted before the reply.
        let admin = h.connect()
        XCTAssertEqual(h.request(admin, "DECIDE maps wwan allow")["ok"], true)
        XCTAssertEqual(h.persisted.count, 1)
        // A subscriber hears a link change.
        let sub = h.connect()
        let (ack, snapshot) = h.subscribe(sub, "links")
        XCTAssertEqual(ack["ok"], true)
        XCTAssertEqual(snapshot["seq"], 1)
        h.setLinks([])
        let events = EngineHarness.events(h.take(sub), named: "link")
        XCTAssertEqual(events.first?["change"], "removed")
        XCTAssertEqual(events.first?["seq"], 2)
    }
}
