// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import NetpermProtocol
import XCTest

/// REACH (GLib's can_reach): each destination judged by the link the kernel sends it by, not by the app's default
/// route; an app the link's setting asks about raises the prompt, and a REACH with SECONDS waits for the answer.
final class EngineReachTests: XCTestCase {
    /// maps: `[Defaults]`' WWAN=ask; Wi-Fi and loopback allowed.
    private let maps = Peers.maps
    private let wwanHost = IPAddress("10.64.0.9")!
    private let wlanHost = IPAddress("192.168.1.20")!
    private let loopback = IPAddress("127.0.0.1")!

    private func harness(default link: Link, agents: Bool = false) -> EngineHarness {
        let h = EngineHarness(policy: "[Defaults]\nPromptTimeoutSec=30\n", links: [Links.lo, Links.wlan, Links.wwan],
                              agents: agents)
        h.setLinks([Links.lo, Links.wlan, Links.wwan], egress: [.ipv4: .link(link.index)])
        h.routes = [wwanHost: .link(Links.wwan.index), wlanHost: .link(Links.wlan.index),
                    loopback: .link(Links.lo.index)]
        return h
    }

    /// ok by Wi-Fi, a target on the cellular link's subnet: not reachable (the kernel would refuse it), denied for
    /// WWAN with nobody to ask; the uid goes with the question.
    func testADestinationOnADeniedLinkIsNotReachableWhateverTheDefaultRoute() {
        let h = harness(default: Links.wlan)
        let app = h.connect(maps)
        XCTAssertEqual(h.request(app, "QUERY")["available"], true)
        let r = h.request(app, "REACH 10.64.0.9")
        XCTAssertEqual(r["destination"], "10.64.0.9")
        XCTAssertEqual(r["available"], false)
        XCTAssertEqual(r["reason"], "denied")
        XCTAssertEqual(r["denied_kinds"], .array(["wwan"]))
        XCTAssertEqual(r["sources"]?["wwan"], "no-agent")
        XCTAssertEqual(r["egress"]?["ipv4"]?["name"], "wwan0")
        XCTAssertEqual(r["egress"]?["ipv6"], .null)
        XCTAssertEqual(h.routeQuestions.last, RouteQuestion(destination: wwanHost, uid: 1000, mark: nil))
    }

    /// routed-elsewhere (the default route is cellular): loopback and a host on the allowed Wi-Fi's subnet are
    /// reachable, as the kernel passes them.
    func testLoopbackAndAnAllowedSubnetAreReachableWhileTheDefaultRouteIsDenied() {
        let h = harness(default: Links.wwan)
        let app = h.connect(maps)
        XCTAssertEqual(h.request(app, "QUERY")["reason"], "routed-elsewhere")
        let lo = h.request(app, "REACH 127.0.0.1")
        XCTAssertEqual(lo["available"], true)
        XCTAssertEqual(lo["via"]?["name"], "lo")
        let lan = h.request(app, "REACH 192.168.1.20")
        XCTAssertEqual(lan["available"], true)
        XCTAssertEqual(lan["reason"], "ok")
        XCTAssertEqual(lan["via"]?["name"], "wlan0")
        // No route at all: where the kernel would send it is nowhere.
        let none = h.request(app, "REACH 2001:db8::1")
        XCTAssertEqual(none["available"], false)
        XCTAssertEqual(none["reason"], "routed-elsewhere")
        XCTAssertEqual(none["egress"], .object([("ipv4", .null), ("ipv6", .null)]))
        h.routes[IPAddress("198.51.100.1")!] = .blocked(.prohibit)
        XCTAssertEqual(h.request(app, "REACH 198.51.100.1")["egress"]?["ipv4"], .object([("blocked", "prohibit")]))
    }

    /// With an agent, asking about a destination on a link set to ask raises the prompt at once (naming the link
    /// and the destination), and the reply says the person is being asked.
    func testAnUndecidedAppThatChecksFirstIsAsked() {
        let h = harness(default: Links.wlan, agents: true)
        let agent = 1 as ConnectionID
        _ = h.take(agent)
        let app = h.connect(maps)
        let r = h.request(app, "REACH 10.64.0.9")
        XCTAssertEqual(r["reason"], "awaiting-decision")
        XCTAssertEqual(r["pending_kinds"], .array(["wwan"]))
        let prompts = h.takeEvents(agent, named: "prompt")
        XCTAssertEqual(prompts.count, 1)
        XCTAssertEqual(prompts.first?["link"]?["name"], "wwan0")
        XCTAssertEqual(prompts.first?["destination"], "10.64.0.9")
        // Asking again joins the open prompt.
        XCTAssertEqual(h.request(app, "REACH 10.64.0.9")["reason"], "awaiting-decision")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [])
        // Wi-Fi is allowed: nothing to ask.
        XCTAssertEqual(h.request(app, "REACH 192.168.1.20")["available"], true)
    }

    /// REACH with SECONDS holds its reply until the person answers: Allow makes it reachable.
    func testAWaitingReachCompletesWhenThePersonAnswers() {
        let h = harness(default: Links.wlan, agents: true)
        let agent = 1 as ConnectionID
        let app = h.connect(maps)
        XCTAssertEqual(h.send(app, "REACH 10.64.0.9 120"), [], "held while the person is asked")
        let id = h.takeEvents(agent, named: "prompt").first?["id"]
        XCTAssertNotNil(id)
        _ = h.request(agent, "ANSWER \(id!.intValue!) allow")
        let r = h.takeParsed(app)
        XCTAssertEqual(r.count, 1)
        XCTAssertEqual(r.first?["available"], true)
        XCTAssertEqual(r.first?["via"]?["name"], "wwan0")
        XCTAssertEqual(r.first?["destination"], "10.64.0.9")
    }

    /// Deny answers it too; an expired prompt ends the wait with awaiting-decision; SECONDS bound it.
    func testAWaitingReachEndsOnDenyExpiryOrItsTimeOut() {
        let h = harness(default: Links.wlan, agents: true)
        let agent = 1 as ConnectionID
        let app = h.connect(maps)
        _ = h.send(app, "REACH 10.64.0.9 120")
        let first = h.takeEvents(agent, named: "prompt").first?["id"]?.intValue ?? 0
        _ = h.request(agent, "ANSWER \(first) deny")
        XCTAssertEqual(h.takeParsed(app).first?["reason"], "denied")
        _ = h.request(h.connect(), "FORGET maps")
        // Nobody answers: the prompt expires after 30 s, and the reply says it still waits for a decision.
        _ = h.send(app, "REACH 10.64.0.9 120")
        h.advance(bySeconds: 29)
        XCTAssertEqual(h.take(app), [])
        h.advance(bySeconds: 1)
        XCTAssertEqual(h.takeParsed(app).first?["reason"], "awaiting-decision")
        // SECONDS shorter than the prompt: the reply comes then, the prompt stays open.
        let other = h.connect(makePeer(uid: 1000, exe: "/usr/bin/maps", pid: 501))
        _ = h.send(other, "REACH 10.64.0.9 2")
        h.advance(bySeconds: 2)
        XCTAssertEqual(h.takeParsed(other).first?["reason"], "awaiting-decision")
        XCTAssertEqual(h.request(agent, "PROMPTS")["prompts"]?.arrayValue?.count, 1)
        // A closed connection leaves no timer behind.
        _ = h.send(other, "REACH 10.64.0.9 60")
        XCTAssertEqual(h.engine.clients.reachesHeld, 1)
        let armed = h.armedTimers
        h.disconnect(other)
        XCTAssertEqual(h.armedTimers, armed - 1, "its time-out went with it")
        XCTAssertEqual(h.engine.clients.reachesHeld, 0)
    }

    func testBadAddressesAreRefused() {
        let h = harness(default: Links.wlan)
        let app = h.connect(maps)
        for bad in ["REACH", "REACH example.org", "REACH 10.0.0.256", "REACH 010.0.0.1", "REACH fe80::1%wlan0",
                    "REACH 1:2:3:4:5:6:7:8:9", "REACH 1::2::3", "REACH 10.0.0.1 soon", "REACH 10.0.0.1 1 2"] {
            XCTAssertNotNil(h.requestError(app, bad, .badArguments), bad)
        }
        XCTAssertEqual(h.routeQuestions, [])
    }

    func testAddressText() {
        XCTAssertEqual(IPAddress("::")?.bytes, [UInt8](repeating: 0, count: 16))
        XCTAssertEqual(IPAddress("::1")?.bytes, [UInt8](repeating: 0, count: 15) + [1])
        XCTAssertEqual(IPAddress("::ffff:192.0.2.1")?.bytes, [UInt8](repeating: 0, count: 10) + [0xFF, 0xFF, 192, 0, 2, 1])
        XCTAssertEqual(IPAddress("2001:DB8:0:0:0:0:0:1")?.bytes, IPAddress("2001:db8::1")?.bytes)
        XCTAssertEqual(IPAddress("fe80::")?.family, .ipv6)
        XCTAssertEqual(IPAddress("1.2.3.4")?.bytes, [1, 2, 3, 4])
        for bad in ["", ":", ":::", "1:2:3:4:5:6:7", "12345::", "::g", "1.2.3", "1.2.3.4.5", "::1.2.3", ":1::", "1::2:"] {
            XCTAssertNil(IPAddress(bad), bad)
        }
    }
}
