// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import XCTest

/// `resync`: the whole state again when a subscriber's events were lost, to the kernel (a netlink overrun) or to
/// its own slowness (the transport dropped what it had not read).
final class EngineResyncTests: XCTestCase {
    private let policy = Policies.ab

    private func harness() -> EngineHarness {
        EngineHarness(policy: policy, links: [Links.eth, Links.wwan], agents: false)
    }

    /// After an overrun, every subscriber gets the change's events and then a resync with what it may see, in
    /// the snapshot's shape; seq goes on counting.
    func testANetlinkOverrunResyncsEverySubscriber() throws {
        let h = harness()
        let admin = h.connect(Peers.root)
        let (_, adminSnapshot) = h.subscribe(admin)
        let appA = h.connect(makePeer(uid: 1, exe: "/usr/bin/a"))
        _ = h.subscribe(appA, "links apps")
        var eth = Links.eth
        eth.status.carrier = false
        h.kernelResyncs += 1
        h.setLinks([eth, Links.wwan])

        let adminEvents = h.takeEvents(admin)
        let resync = try XCTUnwrap(adminEvents.last)
        XCTAssertEqual(resync["event"], "resync", "\(adminEvents.map { $0["event"] })")
        XCTAssertGreaterThan(adminEvents.count, 1, "the change's own events come first")
        XCTAssertEqual(resync["why"], "netlink-overrun")
        XCTAssertNil(resync["dropped"])
        XCTAssertEqual(resync["seq"]?.intValue, adminEvents.count + 1, "counted like any event")
        XCTAssertEqual(Array(resync.keys.dropFirst(3)), Array(adminSnapshot.keys.dropFirst(2)), "the snapshot's topics")
        XCTAssertEqual(resync["links"], h.request(h.connect(), "LINKS")["links"])
        XCTAssertEqual(resync["apps"]?.arrayValue?.map { $0["app"] }, ["a", "b", "tester"], "the policy's and its own")

        let own = try XCTUnwrap(h.takeEvents(appA).last)
        XCTAssertEqual(own["event"], "resync")
        XCTAssertEqual(own.keys, ["event", "seq", "why", "links", "apps"], "its topics only")
        XCTAssertEqual(own["apps"]?.arrayValue?.map { $0["app"] }, ["a"], "an unprivileged subscriber sees its own app")

        // The same count again is no overrun.
        h.setLinks([Links.eth, Links.wwan])
        XCTAssertFalse(h.takeEvents(admin).contains { $0["event"] == "resync" })
    }

    /// A subscriber the transport dropped events for gets, once it caught up, a resync saying how many; nobody else.
    func testASubscriberThatCaughtUpIsResynced() throws {
        let h = harness()
        let slow = h.connect(Peers.root)
        _ = h.subscribe(slow, "links")
        let other = h.connect(Peers.root)
        _ = h.subscribe(other, "links")
        h.feed(.caughtUp(slow, dropped: 42))
        let got = h.takeEvents(slow)
        XCTAssertEqual(got.count, 1)
        XCTAssertEqual(got.first?["event"], "resync")
        XCTAssertEqual(got.first?["why"], "fell-behind")
        XCTAssertEqual(got.first?["dropped"], 42)
        XCTAssertEqual(got.first?.keys, ["event", "seq", "why", "dropped", "links"])
        XCTAssertEqual(got.first?["seq"], 2)
        XCTAssertEqual(h.takeEvents(other), [])
        // Not a subscriber (any more): nothing.
        let plain = h.connect()
        h.feed(.caughtUp(plain, dropped: 1))
        XCTAssertEqual(h.take(plain), [])
    }
}
