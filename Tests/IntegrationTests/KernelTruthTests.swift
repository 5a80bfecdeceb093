// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// The daemon's picture and verdicts against the kernel's own answers, in the cases where a model of the FIB drifted
/// (each reproduced on an earlier release) and the cases where the verdict disagreed with the kernel's routing.
final class KernelTruthTests: IntegrationTestCase {
    struct Setup {
        var ns: TestNamespace
        var socket: String
        var daemon: DaemonProcess
    }

    /// A namespace with IPv6 on, veth pairs `ends` (each end up, its peer `END`p up) and the daemon.
    private func setUp(_ ends: [String]) throws -> Setup {
        let ns = try makeNamespace(ipv6: true)
        for e in ends { try ns.addVethPair(e, peer: e + "p") }
        let dir = try makeTempDir()
        let config = try writeConfig(KernelTruth.policy, in: dir)
        let socket = dir + "/netpermd.sock"
        let daemon = try startDaemon(in: ns, socket: socket, config: config)
        return Setup(ns: ns, socket: socket, daemon: daemon)
    }

    // MARK: - Where the picture drifted from the kernel

    /// An IPv6 default via a gateway must not flip when an unrelated link goes down and up.
    func testIPv6DefaultViaGatewaySurvivesAnUnrelatedLinkToggling() throws {
        let s = try setUp(["va", "vb"])
        try s.ns.ip("-6", "route", "add", "default", "via", "fe80::1", "dev", "va")
        var t = try assertAgrees(s.ns, s.socket, "IPv6 default via fe80::1 on va")
        XCTAssertNotNil(t.links["va"]?.defaultMetric["ipv6"])
        for i in 1...5 {
            try s.ns.ip("link", "set", "vb", "down")
            t = try assertAgrees(s.ns, s.socket, "vb down (\(i))")
            XCTAssertNotNil(t.links["va"]?.defaultMetric["ipv6"], "the kernel keeps va's route")
            XCTAssertEqual(try links(s.socket)[name: "va"]?.defaultRouteV6, true)
            try s.ns.ip("link", "set", "vb", "up")
            try assertAgrees(s.ns, s.socket, "vb up (\(i))")
        }
    }

    /// Deleting a link's last IPv4 address drops its default route without a message for the route.
    func testDeletingTheLastAddressDropsTheDefaultRoute() throws {
        let s = try setUp(["va"])
        try s.ns.ip("addr", "add", "10.1.0.1/24", "dev", "va")
        try s.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "va")
        try assertAgrees(s.ns, s.socket, "default via va")
        XCTAssertEqual(try links(s.socket)[name: "va"]?.usable, true)
        try s.ns.ip("addr", "del", "10.1.0.1/24", "dev", "va")
        let t = try assertAgrees(s.ns, s.socket, "va's last address deleted")
        XCTAssertNil(t.links["va"]?.defaultMetric["ipv4"], "the kernel dropped the route")
        XCTAssertEqual(try links(s.socket)[name: "va"]?.defaultRouteV4, false)
    }

    /// A bridge after its first port: its admin state and carrier are followed from then on.
    func testABridgeIsFollowedAfterItsFirstPort() throws {
        let s = try setUp(["va"])
        try s.ns.ip("link", "add", "br0", "type", "bridge")
        try s.ns.ip("link", "set", "br0", "up")
        try s.ns.ip("link", "set", "va", "master", "br0")
        try s.ns.ip("addr", "add", "10.3.0.1/24", "dev", "br0")
        try s.ns.ip("route", "add", "default", "via", "10.3.0.2", "dev", "br0")
        try assertAgrees(s.ns, s.socket, "br0 with va as its port")
        XCTAssertEqual(try links(s.socket)[name: "br0"]?.carrier, true)
        try s.ns.ip("link", "set", "vap", "down")
        try assertAgrees(s.ns, s.socket, "the port's peer down: br0 has no carrier")
        XCTAssertEqual(try links(s.socket)[name: "br0"]?.carrier, false)
        try s.ns.ip("link", "set", "vap", "up")
        try assertAgrees(s.ns, s.socket, "the port's peer up")
        try s.ns.ip("link", "set", "br0", "down")
        try assertAgrees(s.ns, s.socket, "br0 down")
        XCTAssertEqual(try links(s.socket)[name: "br0"]?.adminUp, false)
    }

    /// Two IPv4 defaults with the same metric, one appended: both are the kernel's, and deleting one leaves the
    /// other.
    func testSameMetricIPv4DefaultsAppended() throws {
        let s = try setUp(["va", "vb"])
        try s.ns.ip("route", "add", "default", "dev", "va", "metric", "50")
        try s.ns.ip("route", "append", "default", "dev", "vb", "metric", "50")
        let t = try assertAgrees(s.ns, s.socket, "two defaults with metric 50")
        XCTAssertEqual(t.links["va"]?.defaultMetric["ipv4"], 50)
        XCTAssertEqual(t.links["vb"]?.defaultMetric["ipv4"], 50)
        try s.ns.ip("route", "del", "default", "dev", "vb", "metric", "50")
        let after = try assertAgrees(s.ns, s.socket, "vb's deleted")
        XCTAssertEqual(after.links["va"]?.defaultMetric["ipv4"], 50)
    }

    /// The same with IPv6 dev-only defaults on two links.
    func testSameMetricIPv6DevOnlyDefaults() throws {
        let s = try setUp(["va", "vb"])
        try s.ns.ip("-6", "route", "add", "default", "dev", "va", "metric", "50")
        try s.ns.ip("-6", "route", "append", "default", "dev", "vb", "metric", "50")
        try assertAgrees(s.ns, s.socket, "two IPv6 dev-only defaults with metric 50")
        try s.ns.ip("-6", "route", "del", "default", "dev", "vb", "metric", "50")
        let after = try assertAgrees(s.ns, s.socket, "vb's deleted")
        XCTAssertEqual(after.links["va"]?.defaultMetric["ipv6"], 50)
    }

    /// `replace` moves an IPv6 default to another link; deleting it leaves none.
    func testIPv6ReplaceMovesTheDefault() throws {
        let s = try setUp(["va", "vb"])
        try s.ns.ip("-6", "route", "add", "default", "via", "fe80::1", "dev", "va", "metric", "100")
        try assertAgrees(s.ns, s.socket, "IPv6 default on va")
        try s.ns.ip("-6", "route", "replace", "default", "via", "fe80::2", "dev", "vb", "metric", "100")
        let t = try assertAgrees(s.ns, s.socket, "replaced by vb's")
        XCTAssertNil(t.links["va"]?.defaultMetric["ipv6"])
        try s.ns.ip("-6", "route", "del", "default", "metric", "100")
        let none = try assertAgrees(s.ns, s.socket, "deleted")
        XCTAssertTrue(none.links.values.allSatisfy { $0.defaultMetric["ipv6"] == nil })
    }

    /// IPv6 ECMP: deleting one nexthop leaves only the other.
    func testIPv6MultipathNexthopDeleted() throws {
        let s = try setUp(["va", "vb"])
        try s.ns.ip("-6", "route", "add", "default", "nexthop", "via", "fe80::1", "dev", "va",
                    "nexthop", "via", "fe80::2", "dev", "vb")
        try assertAgrees(s.ns, s.socket, "ECMP over va and vb")
        try s.ns.ip("-6", "route", "del", "default", "via", "fe80::2", "dev", "vb")
        let t = try assertAgrees(s.ns, s.socket, "vb's nexthop deleted")
        XCTAssertNil(t.links["vb"]?.defaultMetric["ipv6"])
    }

    /// A nexthop object deleted takes the routes that use it.
    func testNexthopObjectDeleted() throws {
        let s = try setUp(["va"])
        try s.ns.ip("addr", "add", "10.1.0.1/24", "dev", "va")
        try s.ns.ip("nexthop", "add", "id", "7", "via", "10.1.0.2", "dev", "va")
        try s.ns.ip("route", "add", "default", "nhid", "7")
        try assertAgrees(s.ns, s.socket, "default by nexthop 7")
        XCTAssertEqual(try links(s.socket)[name: "va"]?.defaultRouteV4, true)
        try s.ns.ip("nexthop", "del", "id", "7")
        try assertAgrees(s.ns, s.socket, "nexthop 7 deleted")
        XCTAssertEqual(try links(s.socket)[name: "va"]?.defaultRouteV4, false)
    }

    // MARK: - Where the verdict disagreed with the kernel's routing

    /// IPv4's default on eth0 (metric 100), IPv6's only on wlan0 (metric 50): IPv4 goes by eth0.
    func testEachFamilyLeavesByItsOwnDefault() throws {
        let s = try setUp(["eth0", "wlan0"])
        try s.ns.ip("addr", "add", "10.1.0.1/24", "dev", "eth0")
        try s.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "eth0", "metric", "100")
        try s.ns.ip("-6", "route", "add", "default", "via", "fe80::1", "dev", "wlan0", "metric", "50")
        let t = try assertAgrees(s.ns, s.socket, "v4 by eth0, v6 by wlan0")
        XCTAssertEqual(t.egress["ipv4"], .link("eth0"))
        XCTAssertEqual(t.egress["ipv6"], .link("wlan0"))
        XCTAssertEqual(try status(s.socket).primary, "eth0")
        // An app allowed only on Wi-Fi would send its IPv4 out of eth0: not ok, it could bind to wlan0.
        let v = try request(s.socket, "QUERY wifionly")
        XCTAssertEqual(v["reason"] as? String, "routed-elsewhere", "\(v)")
    }

    /// Cellular metric 100, Wi-Fi metric 600, an app that may not use cellular: all its traffic leaves by wwan0.
    func testTrafficByADeniedLinkIsNotOk() throws {
        let s = try setUp(["wwan0", "wlan0"])
        try s.ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        try s.ns.ip("addr", "add", "10.1.0.1/24", "dev", "wlan0")
        try s.ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0", "metric", "100")
        try s.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "600")
        try assertAgrees(s.ns, s.socket, "wwan0 100, wlan0 600")
        let v = try request(s.socket, "QUERY nocell")
        XCTAssertEqual(v["reason"] as? String, "routed-elsewhere", "\(v)")
        XCTAssertEqual((v["bind_to"] as? [String: Any])?["name"] as? String, "wlan0")
        XCTAssertEqual(((v["egress"] as? [String: Any])?["ipv4"] as? [String: Any])?["allowed"] as? Bool, false)
    }

    /// A blackhole default (metric 10) beats eth0's unicast default (metric 100): no route at all.
    func testABlackholeDefaultWins() throws {
        let s = try setUp(["eth0"])
        try s.ns.ip("addr", "add", "10.1.0.1/24", "dev", "eth0")
        try s.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "eth0", "metric", "100")
        try s.ns.ip("route", "add", "blackhole", "default", "metric", "10")
        let t = try assertAgrees(s.ns, s.socket, "blackhole metric 10 over eth0 metric 100")
        XCTAssertEqual(t.egress["ipv4"], .blocked("blackhole"))
        let v = try request(s.socket, "QUERY all")
        XCTAssertEqual(v["available"] as? Bool, false, "\(v)")
    }

    /// A rule sends everything to table 100, whose default is on wlan0.
    func testARuleAndAnotherTable() throws {
        let s = try setUp(["eth0", "wlan0"])
        try s.ns.ip("addr", "add", "10.1.0.1/24", "dev", "eth0")
        try s.ns.ip("addr", "add", "10.3.0.1/24", "dev", "wlan0")
        try s.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "eth0", "metric", "100")
        try s.ns.ip("route", "add", "default", "via", "10.3.0.2", "dev", "wlan0", "table", "100")
        try s.ns.ip("rule", "add", "pref", "1000", "lookup", "100")
        let t = try assertAgrees(s.ns, s.socket, "rule to table 100 (wlan0)")
        XCTAssertEqual(t.egress["ipv4"], .link("wlan0"))
        let v = try request(s.socket, "QUERY wifionly")
        XCTAssertEqual(v["reason"] as? String, "ok", "\(v)")
    }

    /// wg-quick's way: the default only in table 51820, reached by a rule; main's default suppressed.
    func testADefaultOnlyInAnotherTableWithARule() throws {
        let s = try setUp(["wg0", "eth0"])
        try s.ns.ip("addr", "add", "10.9.0.1/24", "dev", "wg0")
        try s.ns.ip("addr", "add", "10.1.0.1/24", "dev", "eth0")
        try s.ns.ip("route", "add", "default", "dev", "wg0", "table", "51820")
        try s.ns.ip("rule", "add", "not", "fwmark", "51820", "table", "51820")
        try s.ns.ip("rule", "add", "table", "main", "suppress_prefixlength", "0")
        let t = try assertAgrees(s.ns, s.socket, "default in table 51820 only")
        XCTAssertEqual(t.egress["ipv4"], .link("wg0"))
        let v = try request(s.socket, "QUERY all")
        XCTAssertEqual(v["available"] as? Bool, true, "reachable by wg0: \(v)")
    }

    /// eth0 without carrier (metric 100) and wlan0 (metric 600): the kernel still chooses eth0's linkdown route.
    func testALinkdownRouteIsStillTheKernelsChoice() throws {
        let s = try setUp(["eth0", "wlan0"])
        try s.ns.ip("addr", "add", "10.1.0.1/24", "dev", "eth0")
        try s.ns.ip("addr", "add", "10.3.0.1/24", "dev", "wlan0")
        try s.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "eth0", "metric", "100")
        try s.ns.ip("route", "add", "default", "via", "10.3.0.2", "dev", "wlan0", "metric", "600")
        try s.ns.ip("link", "set", "eth0p", "down")
        let t = try assertAgrees(s.ns, s.socket, "eth0 without carrier")
        XCTAssertEqual(t.egress["ipv4"], .link("eth0"))
        let v = try request(s.socket, "QUERY all")
        XCTAssertEqual(v["reason"] as? String, "routed-elsewhere", "\(v)")
        XCTAssertEqual((v["bind_to"] as? [String: Any])?["name"] as? String, "wlan0")
    }
}
