// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermProtocol
import XCTest

/// `SUBSCRIBE mine`: a person's settings window hears every app `APPS` lists for their uid, as their uid has it
/// (their own decisions from another process, an administrator's answers), and the list again when it changes.
final class EngineMineTests: XCTestCase {
    private let policy = """
        [Defaults]
        WWAN=ask
        [App notes]
        Executable=/usr/bin/notes
        User=1000
        [App backup]
        Executable=/usr/bin/backup
        User=1000
        WWAN=allow
        [App theirs]
        User=2000
        """

    private func apps(_ events: [JSON]) -> [String] { events.compactMap { $0["app"]?.stringValue } }

    private func window(_ h: EngineHarness) -> (ConnectionID, JSON) {
        let c = h.connect(makePeer(uid: 1000, exe: "/usr/bin/backup", pid: 500))
        let (ack, snapshot) = h.subscribe(c, "links mine policy")
        XCTAssertEqual(ack["subscribed"], .array(["links", "policy", "mine"]))
        XCTAssertEqual(ack["app"], "backup", "the window's own app is not the one the tests change")
        return (c, snapshot)
    }

    func testTheSnapshotHasTheUsersAppsAsAPPSListsThem() throws {
        let h = EngineHarness(policy: policy, links: [Links.eth, Links.wwan], agents: true)
        let (_, snapshot) = window(h)
        let listed = h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermctl", pid: 501)), "APPS")
        XCTAssertEqual(apps(snapshot["apps"]?.arrayValue ?? []), ["notes", "backup"])
        XCTAssertEqual(apps(listed["apps"]?.arrayValue ?? []), ["notes", "backup"])
    }

    /// The user's own `netpermctl decide`, from another process, shows in the window as an event.
    func testTheUsersOwnDecisionFromAnotherProcessIsHeard() {
        let h = EngineHarness(policy: policy, links: [Links.eth, Links.wwan], agents: true)
        let (c, _) = window(h)
        let ctl = h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermctl", pid: 501))
        XCTAssertEqual(h.request(ctl, "DECIDE notes wwan deny")["ok"], true)
        let events = h.takeEvents(c, named: "app")
        XCTAssertEqual(apps(events), ["notes"])
        XCTAssertEqual(events.first?["permissions"]?["wwan"], "deny")
        XCTAssertEqual(events.first?["sources"]?["wwan"], "user-decision")
        // Another user's decision for their own app is theirs alone.
        let other = h.connect(makePeer(uid: 2000, exe: "/usr/bin/netpermctl", pid: 502))
        XCTAssertEqual(h.request(other, "DECIDE theirs wwan allow")["ok"], true)
        XCTAssertEqual(h.takeEvents(c, named: "app"), [])
    }

    /// An administrator's decision for everyone reaches the user's view of the app.
    func testAnAdministratorsDecisionIsHeard() {
        let h = EngineHarness(policy: policy, links: [Links.eth, Links.wwan], agents: true)
        let (c, _) = window(h)
        XCTAssertEqual(h.request(h.connect(), "DECIDE notes wwan allow")["ok"], true)
        let events = h.takeEvents(c, named: "app")
        XCTAssertEqual(apps(events), ["notes"])
        XCTAssertEqual(events.first?["sources"]?["wwan"], "decision")
    }

    /// A reload that gives the user another app sends the whole list again (`resync`, `listed`); one that changes
    /// nothing of the list sends none.
    func testAReloadThatChangesTheListResyncs() {
        let h = EngineHarness(policy: policy, links: [Links.eth, Links.wwan], agents: true)
        let (c, _) = window(h)
        h.reload(policy: policy + "\n[App maps]\nExecutable=/usr/bin/maps\nUser=1000\n")
        let resyncs = h.takeEvents(c, named: "resync")
        XCTAssertEqual(resyncs.count, 1)
        XCTAssertEqual(resyncs.first?["why"], "listed")
        XCTAssertEqual(apps(resyncs.first?["apps"]?.arrayValue ?? []), ["notes", "backup", "maps"])
        h.reload(policy: policy + "\n[App maps]\nExecutable=/usr/bin/maps\nUser=1000\nEthernet=deny\n")
        let events = h.takeEvents(c)
        XCTAssertEqual(events.filter { $0["event"] == "resync" }, [])
        XCTAssertEqual(apps(events.filter { $0["event"] == "app" }), ["maps"])
    }

    /// An unprivileged subscriber of `apps` still hears its own app alone (here `backup`).
    func testAppsStaysTheOwnAppAlone() {
        let h = EngineHarness(policy: policy, links: [Links.eth, Links.wwan], agents: true)
        let c = h.connect(makePeer(uid: 1000, exe: "/usr/bin/backup", pid: 500))
        _ = h.subscribe(c, "apps")
        XCTAssertEqual(h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/x", pid: 9)), "DECIDE notes wwan deny")["ok"], true)
        XCTAssertEqual(h.takeEvents(c, named: "app"), [])
    }
}
