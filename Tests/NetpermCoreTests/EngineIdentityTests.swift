// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import XCTest

/// A connection whose requests come from another process than the one before (a child that inherited the
/// socket, a process it was passed to): each request is answered for the process that sent it, and what the
/// connection listens to, waits for and may do follows.
final class EngineIdentityTests: XCTestCase {
    private let policy = Policies.ab

    private let a = makePeer(uid: 1, exe: "/usr/bin/a", pid: 101)
    private let b = makePeer(uid: 2, exe: "/usr/bin/b", pid: 102)

    private func harness(_ links: [Link] = [Links.wwan]) -> EngineHarness {
        EngineHarness(policy: policy, links: links)
    }

    /// The same request line gets the new process's answer, not the reply cached for the old one.
    func testARequestIsAnsweredForTheProcessThatSentIt() {
        let h = harness()
        let c = h.connect(a)
        let first = h.request(c, "QUERY")
        XCTAssertEqual(first["app"], "a")
        XCTAssertEqual(first["available"], true)
        h.changeIdentity(c, to: b)
        let second = h.request(c, "QUERY")
        XCTAssertEqual(second["app"], "b", "\(second.encoded())")
        XCTAssertEqual(second["available"], false)
        XCTAssertEqual(second["identity"]?["pid"], 102)
        h.changeIdentity(c, to: a)
        XCTAssertEqual(h.request(c, "QUERY"), first)
    }

    /// Privilege is the sender's: root's connection handed to an ordinary user's process is an ordinary one.
    func testPrivilegeFollowsTheSender() {
        let h = harness()
        let c = h.connect(Peers.root)
        XCTAssertEqual(h.request(c, "METRICS")["ok"], true)
        XCTAssertEqual(h.request(c, "QUERY b")["app"], "b")
        h.changeIdentity(c, to: a)
        h.requestError(c, "METRICS", .permissionDenied)
        h.requestError(c, "QUERY b", .permissionDenied)
        h.changeIdentity(c, to: Peers.root)
        XCTAssertEqual(h.request(c, "METRICS")["ok"], true)
    }

    /// An unprivileged subscriber hears about its sender's app: after the change, b's events and not a's.
    func testASubscriberFollowsItsNewSendersApp() {
        let h = harness()
        let c = h.connect(a)
        let (ack, _) = h.subscribe(c, "apps")
        XCTAssertEqual(ack["app"], "a")
        h.changeIdentity(c, to: b)
        // Ethernet comes: a moves to it and b becomes available through it; both verdicts change.
        h.setLinks([Links.eth, Links.wwan])
        let events = h.takeEvents(c, named: "app")
        XCTAssertEqual(events.map { $0["app"] }, ["b"], "\(events.map { $0.encoded() })")
        XCTAssertEqual(events.first?["available"], true)
    }

    /// An agent whose connection passes to an unprivileged process is no agent any more: undecided `ask` is then
    /// denied for want of one, and STATUS counts none; back with root, it is one again.
    func testAnAgentPassedToAnUnprivilegedProcessStopsBeingOne() {
        let h = harness()
        let agent = h.connectAgent()
        let other = h.connect(Peers.root)
        XCTAssertEqual(h.request(other, "STATUS")["agents"], 1)
        h.changeIdentity(agent, to: a)
        XCTAssertEqual(h.request(other, "STATUS")["agents"], 0)
        h.changeIdentity(agent, to: Peers.root)
        XCTAssertEqual(h.request(other, "STATUS")["agents"], 1)
    }

    /// A WAIT is answered for the process that asked: no other process's request (nor its identity) is taken
    /// while it is held.
    func testAHeldWaitIsAnsweredForTheProcessThatAsked() {
        let h = harness()
        let c = h.connect(b)
        XCTAssertEqual(h.send(c, "WAIT"), [], "b may not use WWAN: held")
        h.changeIdentity(c, to: a)
        h.send(c, "QUERY")
        h.setLinks([Links.eth, Links.wwan])
        let got = h.takeParsed(c)
        XCTAssertEqual(got.map { $0["app"] }, ["b", "a"], "the WAIT's answer for b, then a's QUERY: \(got.map { $0.encoded() })")
        XCTAssertEqual(got.first?["available"], true)
    }
}
