// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import XCTest

/// Metered= on top of the kind (POLICY.md, "Metered links"): allow, deny and ask; prompts, DECIDE, FORGET and expiry
/// of the `metered` setting; and [Network SSID] making a Wi-Fi link metered while it is associated to a hotspot.
final class EngineMeteredTests: XCTestCase {
    /// wlan0 is a phone's hotspot here ([Interface] makes it metered); the [Network] tests use nl80211's facts.
    private let policy = """
    [Defaults]
    PromptTimeoutSec=10
    [Interface wlan0]
    Metered=yes
    [App maps]
    Executable=/usr/bin/maps
    WiFi=allow
    [App updater]
    Executable=/usr/bin/updater
    Metered=deny
    [App nav]
    Executable=/usr/bin/nav
    Metered=ask
    """

    private let updater = makePeer(uid: 1000, exe: "/usr/bin/updater", pid: 600)
    private let nav = makePeer(uid: 1000, exe: "/usr/bin/nav", pid: 601)

    private func harness(_ links: [Link] = [Links.wlan], agents: Bool = false) -> EngineHarness {
        EngineHarness(policy: policy, links: links, agents: agents)
    }

    /// The default, allow, leaves the kind alone: the hotspot is usable by an app allowed on Wi-Fi.
    func testMeteredAllowIsTodaysBehaviour() {
        let h = harness()
        let r = h.request(h.connect(Peers.maps), "QUERY")
        XCTAssertEqual(r["reason"], "ok")
        XCTAssertEqual(r["via"]?["metered"], true)
        XCTAssertEqual(r["permissions"]?["metered"], "allow")
        XCTAssertEqual(r["sources"]?["metered"], "policy")
        XCTAssertEqual(r["denied_kinds"], .array([]))
    }

    /// An app allowed on Wi-Fi but not on metered links waits while the Wi-Fi is a hotspot, and goes as soon as
    /// an unmetered link is there.
    func testMeteredDenyWaitsForAnUnmeteredLink() {
        let h = harness()
        let c = h.connect(updater)
        let r = h.request(c, "QUERY")
        XCTAssertEqual(r["available"], false)
        XCTAssertEqual(r["reason"], "denied")
        XCTAssertEqual(r["denied_kinds"], .array(["metered"]))
        XCTAssertEqual(r["pending_kinds"], .array([]))
        XCTAssertEqual(r["permissions"]?["wifi"], "allow")
        XCTAssertEqual(r["permissions"]?["metered"], "deny")
        XCTAssertEqual(r["egress"]?["ipv4"]?["allowed"], false)
        XCTAssertEqual(h.send(c, "WAIT"), [], "held")
        h.setLinks([Links.wlan, Links.eth])
        let done = h.takeParsed(c)
        XCTAssertEqual(done.first?["ok"], true)
        XCTAssertEqual(done.first?["via"]?["name"], "eth0")
        // Cellular is metered by its kind. With no agent, WWAN=ask is a deny too; with one, WWAN=ask is not worth
        // asking: Metered=deny already says no, and a decision on wwan would not open it.
        h.setLinks([Links.wwan])
        let w = h.request(c, "QUERY")
        XCTAssertEqual(w["denied_kinds"], .array(["wwan", "metered"]))
        _ = h.connectAgent()
        let a = h.request(c, "QUERY")
        XCTAssertEqual(a["denied_kinds"], .array(["metered"]))
        XCTAssertEqual(a["pending_kinds"], .array([]), "a decision on wwan would not open it")
        XCTAssertEqual(a["reason"], "denied")
    }

    /// Metered=ask with an agent: awaiting a decision on `metered`, one prompt naming the metered link; DECIDE
    /// answers it and is stored as Metered=; FORGET takes it back.
    func testMeteredAskPromptsDecideAndForget() throws {
        let h = harness(agents: true)
        let agent = h.connections.keys.max()!
        let c = h.connect(nav)
        let r = h.request(c, "QUERY")
        XCTAssertEqual(r["reason"], "awaiting-decision")
        XCTAssertEqual(r["pending_kinds"], .array(["metered"]))
        let prompts = h.takeEvents(agent, named: "prompt")
        XCTAssertEqual(prompts.count, 1)
        XCTAssertEqual(prompts.first?["kind"], "metered")
        XCTAssertEqual(prompts.first?["link"], .object([("name", "wlan0"), ("kind", "wifi"), ("metered", true), ("roaming", false), ("over", .null)]))
        XCTAssertEqual(h.log.filter { $0.1.contains("nav wants to use metered via wlan0") }.count, 1)

        let admin = h.connect(Peers.root)
        let d = h.request(admin, "DECIDE nav metered allow")
        XCTAssertEqual(d["decided"]?["kind"], "metered")
        XCTAssertEqual(d["decided"]?["overridden_by_policy"], false)
        XCTAssertEqual(d["reason"], "ok")
        XCTAssertEqual(d["sources"]?["metered"], "decision")
        let answered = h.takeEvents(agent, named: "prompt-answered")
        XCTAssertEqual(answered.first?["kind"], "metered")
        let stored = try XCTUnwrap(h.persisted.last)
        XCTAssertEqual(stored.decision("nav", .metered)?.0, .allow)
        XCTAssertTrue(stored.encoded().contains("[App nav]\nMetered=allow\n"), stored.encoded())

        let f = h.request(admin, "FORGET nav metered")
        XCTAssertEqual(f["forgotten"], true)
        XCTAssertEqual(f["kind"], "metered")
        XCTAssertNil(h.persisted.last?.decision("nav", .metered))
        XCTAssertEqual(h.request(c, "QUERY")["reason"], "awaiting-decision")
    }

    /// A decision for `metered` applies only where the policy says ask.
    func testMeteredDecisionOverriddenByPolicy() {
        let h = harness()
        let d = h.request(h.connect(Peers.root), "DECIDE updater metered allow")
        XCTAssertEqual(d["decided"]?["overridden_by_policy"], true)
        XCTAssertEqual(d["reason"], "denied")
        XCTAssertEqual(d["sources"]?["metered"], "policy")
    }

    /// With no agent, Metered=ask is a deny that says why (no-agent), logged once.
    func testMeteredAskWithoutAgentIsDenied() {
        let h = harness()
        let r = h.request(h.connect(nav), "QUERY")
        XCTAssertEqual(r["reason"], "denied")
        XCTAssertEqual(r["denied_kinds"], .array(["metered"]))
        XCTAssertEqual(r["sources"]?["metered"], "no-agent")
        XCTAssertEqual(h.log.filter { $0.1.hasPrefix("nav may not use metered") }.count, 1)
    }

    /// An unanswered metered prompt expires like any other: nothing stored, asked again next time.
    func testMeteredPromptExpires() {
        let h = harness(agents: true)
        let agent = h.connections.keys.max()!
        let c = h.connect(nav)
        _ = h.request(c, "QUERY")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["kind"] }, ["metered"])
        h.advance(bySeconds: 10)
        let expired = h.takeEvents(agent, named: "prompt-expired")
        XCTAssertEqual(expired.first?["kind"], "metered")
        XCTAssertTrue(h.persisted.isEmpty)
        _ = h.request(c, "QUERY")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["kind"] }, ["metered"])
    }

    /// `DECIDE ... --once` for metered holds until the policy changes.
    func testMeteredOnceDecisionDroppedByReload() {
        let h = harness(agents: true)
        let c = h.connect(nav)
        XCTAssertEqual(h.request(h.connect(Peers.root), "DECIDE nav metered allow --once")["sources"]?["metered"], "once")
        XCTAssertEqual(h.request(c, "QUERY")["reason"], "ok")
        h.reload(policy: policy + "\n[App npt-changed]\nUser=9999\n")
        XCTAssertEqual(h.request(c, "QUERY")["reason"], "awaiting-decision")
    }

    // MARK: [Network SSID]

    private let networkPolicy = """
    [Network Phone*]
    Metered=yes
    [Network Office]
    Kind=ethernet
    [App updater]
    Executable=/usr/bin/updater
    WiFi=allow
    Ethernet=deny
    Metered=deny
    """

    /// The same wlan0 is metered while associated to the hotspot, not at home; [Network] may set the kind too.
    /// Wi-Fi facts come in with the kernel's picture, like any other fact.
    func testNetworkSectionFollowsTheAssociation() {
        let h = EngineHarness(policy: networkPolicy, links: [Links.wlan])
        let c = h.connect(updater)
        XCTAssertEqual(h.request(c, "QUERY")["reason"], "ok", "not associated: no [Network] applies")
        let sub = h.connect(Peers.root)
        _ = h.subscribe(sub, "links")
        h.setLinks([Links.wlan], wifi: [3: WifiFacts(ssid: Array("PhoneAP".utf8), bssid: "02:00:00:00:00:01")])
        let link = h.takeEvents(sub, named: "link").last?["link"]
        XCTAssertEqual(link?["ssid"], "PhoneAP")
        XCTAssertEqual(link?["bssid"], "02:00:00:00:00:01")
        XCTAssertEqual(link?["metered"], true)
        XCTAssertEqual(link?["classified_by"], "sysfs:devtype=wlan", "Metered= alone leaves the rule that decided the kind")
        let r = h.request(c, "QUERY")
        XCTAssertEqual(r["reason"], "denied")
        XCTAssertEqual(r["denied_kinds"], .array(["metered"]))
        XCTAssertEqual(h.send(c, "WAIT"), [])
        XCTAssertEqual(h.logged(containing: "wlan0: Wi-Fi network none -> 'PhoneAP' (02:00:00:00:00:01), metered true").count, 1)
        // Roaming home: unmetered again, and the waiter goes.
        h.setLinks([Links.wlan], wifi: [3: WifiFacts(ssid: Array("HomeNet".utf8), bssid: "02:00:00:00:00:02")])
        XCTAssertEqual(h.takeParsed(c).first?["via"]?["metered"], false)
        // Kind= from [Network]: the office network counts as wired.
        h.setLinks([Links.wlan], wifi: [3: WifiFacts(ssid: Array("Office".utf8), bssid: "02:00:00:00:00:03")])
        let office = h.request(h.connect(Peers.root), "LINKS")["links"]?.arrayValue?.first
        XCTAssertEqual(office?["kind"], "ethernet")
        XCTAssertEqual(office?["classified_by"], "config:[Network Office]")
        XCTAssertEqual(h.request(c, "QUERY")["denied_kinds"], .array(["ethernet"]))
        // Disassociated: the facts say no SSID, and the device's own classification is back.
        h.setLinks([Links.wlan], wifi: [3: WifiFacts()])
        XCTAssertEqual(h.request(c, "QUERY")["reason"], "ok")
    }

    /// [Network] beats [Interface] for the same link (what the network is beats what the device is).
    func testNetworkBeatsInterface() {
        let h = EngineHarness(policy: "[Interface wl*]\nMetered=no\nKind=wifi\n" + networkPolicy, links: [Links.wlan])
        h.setLinks([Links.wlan], wifi: [3: WifiFacts(ssid: Array("Phone 5".utf8), bssid: nil)])
        XCTAssertEqual(h.request(h.connect(updater), "QUERY")["denied_kinds"], .array(["metered"]))
    }

    /// An SSID is bytes: invalid UTF-8 and controls are shown escaped, never raw.
    func testSSIDIsEscaped() {
        let h = EngineHarness(policy: networkPolicy, links: [Links.wlan])
        h.setLinks([Links.wlan], wifi: [3: WifiFacts(ssid: [0x50, 0x68, 0xFF, 0x1B, 0x5B, 0x32, 0x4A, 0x22], bssid: nil)])
        let lines = h.send(h.connect(Peers.root), "LINKS")
        XCTAssertTrue(lines.first?.contains(#""ssid":"Ph\\xff\\x1b[2J\"""#) == true, "\(lines)")
        XCTAssertFalse(lines.first?.utf8.contains(0x1B) == true)
        // "Ph" then U+FFFD for the glob: [Network Phone*] does not match, and no byte makes it crash.
        XCTAssertEqual(h.request(h.connect(updater), "QUERY")["reason"], "ok")
    }
}
