// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import XCTest

/// STATUS, LINKS, and what the service manager is told: READY=1 once started, STATUS= when its summary changes,
/// STOPPING=1.
final class EngineStatusTests: XCTestCase {
    private let policy = Policies.curlAndBackup

    /// Loopback, an Ethernet port without carrier (nor route), and a usable cellular link.
    private var links: [Link] {
        var wwan = Links.wwan
        wwan.addresses = ["10.64.0.2/30"]
        return [Links.lo, makeLink(2, "enp3s0", .ethernet, metric: nil, carrier: false), wwan]
    }

    // MARK: STATUS

    /// Field by field, in the documented order.
    func testStatusFields() {
        let h = EngineHarness(policy: policy, links: links)
        let r = h.request(h.connect(Peers.curl), "STATUS")
        XCTAssertEqual(r.keys, ["ok", "version", "ready", "agents", "user_agents", "links", "available", "primary", "primary_kind",
                                "primary_over", "egress", "policy", "enforcement", "usage"])
        XCTAssertEqual(r["ok"], true)
        XCTAssertEqual(r["version"], .string(DaemonState.version))
        XCTAssertEqual(r["ready"], true)
        XCTAssertEqual(r["agents"], 0)
        XCTAssertEqual(r["links"], 3)
        XCTAssertEqual(r["available"], true)
        XCTAssertEqual(r["primary"], "wwan0")
        XCTAssertEqual(r["primary_kind"], "wwan")
        XCTAssertEqual(r["egress"], .object([
            ("ipv4", .object([("index", 4), ("name", "wwan0"), ("kind", "wwan"), ("metered", true), ("roaming", false), ("over", .null), ("usable", true)])),
            ("ipv6", .null),
        ]))
        XCTAssertEqual(r["policy"], .object([("generation", 1), ("apps", 2), ("error", .null), ("warnings", 0),
                                             ("findings", .array([]))]))
    }

    /// primary is where the kernel sends IPv4 traffic (else IPv6's), usable or not; egress says so per family, and
    /// STATUS= follows primary.
    func testStatusEgressAndPrimary() {
        var deadEth = Links.eth
        deadEth.status.carrier = false
        deadEth.status.operstate = "down"
        let h = EngineHarness(policy: policy, links: [deadEth, Links.wlan])
        let c = h.connect(Peers.curl)
        // Ethernet lost its carrier but keeps the best route: the kernel still sends IPv4 there.
        var r = h.request(c, "STATUS")
        XCTAssertEqual(r["available"], true, "wlan0 is usable")
        XCTAssertEqual(r["primary"], "eth0")
        XCTAssertEqual(r["primary_kind"], "ethernet")
        XCTAssertEqual(r["egress"], .object([
            ("ipv4", .object([("index", 2), ("name", "eth0"), ("kind", "ethernet"), ("metered", false), ("roaming", false), ("over", .null),
                              ("usable", false)])),
            ("ipv6", .null),
        ]))
        XCTAssertEqual(h.engine.statusText, "2 links, via eth0 (ethernet, not usable), 2 apps, policy gen 1")

        // IPv4 into a blackhole, IPv6 by Wi-Fi: the primary is IPv6's.
        h.setLinks([deadEth, Links.wlan], egress: [.ipv4: .blocked(.blackhole), .ipv6: .link(3)])
        r = h.request(c, "STATUS")
        XCTAssertEqual(r["primary"], "wlan0")
        XCTAssertEqual(r["primary_kind"], "wifi")
        XCTAssertEqual(r["egress"], .object([
            ("ipv4", .object([("blocked", "blackhole")])),
            ("ipv6", .object([("index", 3), ("name", "wlan0"), ("kind", "wifi"), ("metered", false), ("roaming", false), ("over", .null), ("usable", true)])),
        ]))
        XCTAssertEqual(h.statusTexts.last, "2 links, via wlan0 (wifi), 2 apps, policy gen 1")

        // No route at all: no primary, though a link is usable.
        h.setLinks([deadEth, Links.wlan], egress: [:])
        r = h.request(c, "STATUS")
        XCTAssertEqual(r["available"], true)
        XCTAssertEqual(r["primary"], .null)
        XCTAssertEqual(r["primary_kind"], .null)
        XCTAssertEqual(r["egress"], .object([("ipv4", .null), ("ipv6", .null)]))
        XCTAssertEqual(h.statusTexts.last, "2 links, no network, 2 apps, policy gen 1")

        // An egress the links do not have (a link gone between two reads): its index only.
        h.setLinks([deadEth, Links.wlan], egress: [.ipv4: .link(9)])
        r = h.request(c, "STATUS")
        XCTAssertEqual(r["primary"], .null)
        XCTAssertEqual(r["egress"]?["ipv4"], .object([("index", 9)]))
    }

    /// Before `started`: not ready, and with no link nothing is available; primary is null, not missing.
    func testStatusBeforeStarted() {
        let h = EngineHarness(policy: policy, links: [], started: false)
        let r = h.request(h.connect(Peers.curl), "STATUS")
        XCTAssertEqual(r["ready"], false)
        XCTAssertEqual(r["links"], 0)
        XCTAssertEqual(r["available"], false)
        XCTAssertEqual(r["primary"], .null)
        XCTAssertEqual(r["primary_kind"], .null)
        XCTAssertEqual(r["egress"], .object([("ipv4", .null), ("ipv6", .null)]))
        XCTAssertEqual(r["policy"]?["generation"], 1, "the start-up load counts")
    }

    /// Agents are privileged subscribers of prompts, counted as they come and go; other subscribers are not.
    func testStatusCountsAgents() {
        let h = EngineHarness(policy: policy, links: links)
        let c = h.connect(Peers.curl)
        XCTAssertEqual(h.request(c, "STATUS")["agents"], 0)
        let a1 = h.connectAgent(pid: 10)
        XCTAssertEqual(h.request(c, "STATUS")["agents"], 1)
        let a2 = h.connectAgent(pid: 11)
        _ = h.subscribe(h.connect(Peers.admin), "links apps policy")
        _ = h.subscribe(h.connect(Peers.curl))
        XCTAssertEqual(h.request(c, "STATUS")["agents"], 2)
        h.disconnect(a1)
        XCTAssertEqual(h.request(c, "STATUS")["agents"], 1)
        h.disconnect(a2)
        XCTAssertEqual(h.request(c, "STATUS")["agents"], 0)
    }

    /// A failed reload: the generation and apps in force, and the first error; a good one clears it.
    func testStatusPolicyAfterFailedAndGoodReloads() {
        let h = EngineHarness(policy: policy, links: links)
        let c = h.connect(Peers.curl)
        let bad = "[App x]\nUser=1\nWWAN=maybe\nWiFi=never\n"
        let expected = Config.parse(files: [("/etc/netpermd/netpermd.conf", bad)], accounts: FakeAccounts()).failure
        XCTAssertNotNil(expected)
        XCTAssertTrue(expected?.hasSuffix(" (and 1 more error)") == true, expected ?? "")
        h.reload(policy: bad)
        XCTAssertEqual(h.request(c, "STATUS")["policy"],
                       .object([("generation", 1), ("apps", 2), ("error", .string(expected ?? "")), ("warnings", 0),
                                ("findings", .array([]))]))
        h.reload(policy: policy + "\n[App x]\nUser=1\n")
        XCTAssertEqual(h.request(c, "STATUS")["policy"], .object([("generation", 2), ("apps", 3), ("error", .null),
                                                                 ("warnings", 0), ("findings", .array([]))]))
    }

    /// A policy that fails at start-up: generation 0, no apps, and the error.
    func testStatusPolicyAfterFailedStartUpLoad() {
        let h = EngineHarness(policy: "[App x]\nWWAN=allow\n", links: links)
        let r = h.request(h.connect(Peers.curl), "STATUS")
        XCTAssertEqual(r["policy"]?["generation"], 0)
        XCTAssertEqual(r["policy"]?["apps"], 0)
        XCTAssertEqual(r["policy"]?["error"],
                       "/etc/netpermd/netpermd.conf:1: [App x]: no Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it")
        XCTAssertTrue(h.logged(containing: "policy reload failed").isEmpty, "the start-up load is not a reload")
    }

    // MARK: LINKS

    /// PROTOCOL.md's example link, built and read back byte for byte.
    func testLinkAsDocumented() {
        var wlan = makeLink(3, "wlan0", .wifi, metric: 600)
        wlan.addresses = ["fe80::1/64", "192.0.2.10/24"]
        wlan.wifi.ssid = Array("HomeNet".utf8)
        wlan.wifi.bssid = "02:00:5e:10:00:01"
        let h = EngineHarness(links: [wlan])
        let r = h.send(h.connect(Peers.curl), "LINKS")
        XCTAssertEqual(r, [#"{"ok":true,"links":[{"index":3,"name":"wlan0","kind":"wifi","#
            + #""classified_by":"sysfs:devtype=wlan","metered":false,"metered_by":"default","roaming":null,"roaming_by":null,"over":null,"admin_up":true,"#
            + #""carrier":true,"#
            + #""operstate":"up","addresses":["192.0.2.10/24","fe80::1/64"],"#
            + #""default_route":{"ipv4":true,"ipv6":false},"metric":600,"usable":true,"#
            + #""ssid":"HomeNet","bssid":"02:00:5e:10:00:01","connection":null}]}"#])
    }

    /// Sorted by index, each as classified, usable only with admin up, carrier and a default route.
    func testLinksFields() throws {
        var v6 = makeLink(5, "usb0", .other, metric: 50)
        v6.defaultRoute.ipv6 = true
        let h = EngineHarness(links: [v6] + links.reversed())
        let r = h.request(h.connect(Peers.curl), "LINKS")
        XCTAssertEqual(r.keys, ["ok", "links"])
        let l = try XCTUnwrap(r["links"]?.arrayValue)
        XCTAssertEqual(l.map { $0["index"] }, [1, 2, 4, 5])
        XCTAssertEqual(l.map { $0["name"] }, ["lo", "enp3s0", "wwan0", "usb0"])
        XCTAssertEqual(l.map { $0["kind"] }, ["loopback", "ethernet", "wwan", "other"])
        XCTAssertEqual(l.map { $0["classified_by"] }, ["arphrd:loopback", "arphrd:ether", "sysfs:devtype=wwan",
                                                      "rtnl-kind:veth"])
        XCTAssertEqual(l.map { $0["metered"] }, [false, false, true, false])
        XCTAssertEqual(l.map { $0["carrier"] }, [true, false, true, true])
        XCTAssertEqual(l.map { $0["operstate"] }, ["up", "down", "up", "up"])
        XCTAssertEqual(l.map { $0["usable"] }, [false, false, true, true])
        XCTAssertEqual(l.map { $0["metric"] }, [.null, .null, 700, 50])
        XCTAssertEqual(l[2]["addresses"], .array(["10.64.0.2/30"]))
        XCTAssertEqual(l[2]["default_route"], .object([("ipv4", true), ("ipv6", false)]))
        XCTAssertEqual(l[3]["default_route"], .object([("ipv4", false), ("ipv6", true)]))
        XCTAssertEqual(l[0]["default_route"], .object([("ipv4", false), ("ipv6", false)]))
    }

    // MARK: The service manager

    /// Nothing before `started` (the first picture and the policy are not both in yet), then READY=1 with the
    /// first STATUS=, and a log line that says so.
    func testStartedSendsReadyWithStatusAndNothingBefore() {
        let h = EngineHarness(policy: policy, links: links, started: false)
        h.setLinks(links + [makeLink(6, "eth1", .ethernet)])
        XCTAssertEqual(h.notifications, [])
        h.feed(.started)
        let status = "4 links, via eth1 (ethernet), 2 apps, policy gen 1"
        XCTAssertEqual(h.notifications, [.ready(status: status)])
        XCTAssertEqual(h.logged(containing: "ready: \(status)").count, 1)
        XCTAssertEqual(h.engine.statusText, status)
    }

    /// The daemon feeds `started` once; another would be no news.
    func testSecondStartedChangesNothing() {
        let h = EngineHarness(policy: policy, links: links)
        let mark = h.steps.count
        h.feed(.started)
        XCTAssertEqual(Array(h.steps[mark...]), [], "READY=1 again, or a log line, for a start that did not happen")
    }

    /// STATUS= says links, primary, apps and generation: it is sent when one of them changes, not for every
    /// change of the network or of decisions.
    func testStatusNotificationOnlyWhenTheSummaryChanges() {
        let h = EngineHarness(policy: policy, links: [Links.eth])
        XCTAssertEqual(h.statusTexts, ["1 links, via eth0 (ethernet), 2 apps, policy gen 1"])
        // An address, a metric that keeps the primary, a decision: no change of the summary.
        var eth = Links.eth
        eth.addresses = ["192.0.2.7/24"]
        h.setLinks([eth])
        eth.metric = 90
        h.setLinks([eth])
        XCTAssertEqual(h.request(h.connect(), "DECIDE curl wifi allow")["ok"], true)
        XCTAssertEqual(h.notifications.count, 1)
        // A link more, then a new primary, then none.
        h.setLinks([eth, Links.wlan])
        h.setLinks([eth, makeLink(3, "wlan0", .wifi, metric: 10)])
        h.setLinks([])
        XCTAssertEqual(h.notifications, [
            .ready(status: "1 links, via eth0 (ethernet), 2 apps, policy gen 1"),
            .status("2 links, via eth0 (ethernet), 2 apps, policy gen 1"),
            .status("2 links, via wlan0 (wifi), 2 apps, policy gen 1"),
            .status("0 links, no network, 2 apps, policy gen 1"),
        ])
    }

    /// A reload says RELOADING=1, then READY=1 with the new STATUS= (and no separate STATUS= for the same news).
    func testReloadNotifications() {
        let h = EngineHarness(policy: policy, links: [Links.eth])
        let mark = h.notifications.count
        h.reload(policy: policy + "\n[App x]\nUser=1\n")
        XCTAssertEqual(Array(h.notifications[mark...]),
                       [.reloading, .ready(status: "1 links, via eth0 (ethernet), 3 apps, policy gen 2")])
    }

    /// A failed reload: READY=1 with a STATUS= that names the error, as `systemctl status` shows it.
    func testFailedReloadStatusNamesTheError() {
        let h = EngineHarness(policy: policy, links: [Links.eth])
        let mark = h.notifications.count
        h.reload(policy: "[App x]\nWWAN=allow\n")
        XCTAssertEqual(Array(h.notifications[mark...]), [
            .reloading,
            .ready(status: "1 links, via eth0 (ethernet), 2 apps, policy gen 1; reload failed: "
                + "/etc/netpermd/netpermd.conf:1: [App x]: no Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it"),
        ])
    }

    /// A huge error is cut to 300 bytes in STATUS=, and stays on one line.
    func testStatusTextCutsALongErrorToOneShortLine() {
        let h = EngineHarness(policy: policy, links: [Links.eth])
        // The message is cut where the error is made (ConfigError.messageLimit), the path where it is shown.
        let path = "/" + String(repeating: "p", count: 400)
        let message = String(repeating: "x", count: 400) + "\nsecond line"
        h.feed(.policy(ConfigParseResult(unreadable: ConfigError(path: path, line: 0, message: message))))
        let text = h.engine.statusText
        // 300 bytes of "/ppp...: xxx...", then "...".
        XCTAssertEqual(text, "1 links, via eth0 (ethernet), 2 apps, policy gen 1; reload failed: /"
            + String(repeating: "p", count: 199) + "...: " + String(repeating: "x", count: 95) + "...")
        h.feed(.policy(ConfigParseResult(unreadable: ConfigError(path: "/p", line: 0, message: "a\nb"))))
        XCTAssertTrue(h.engine.statusText.hasSuffix("reload failed: /p: a\\nb"), h.engine.statusText)
    }

    /// SIGTERM: STOPPING=1 (the subscribers' `stopping` event is in EngineSubscribeTests).
    func testStoppingNotifies() {
        let h = EngineHarness(policy: policy, links: [Links.eth])
        h.feed(.stopping)
        XCTAssertEqual(h.notifications.last, .stopping)
    }
}
