// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermProtocol
import XCTest

/// Joining netlink facts into links, and the answers built on them: usable, available, egress, primary.
final class NetworkStateTests: XCTestCase {
    private func facts(_ index: Int32, _ name: String, up: Bool = true, carrier: Bool = true,
                       arphrd: UInt32 = ARPHRD.ether) -> LinkFacts {
        LinkFacts(index: index, name: name, arphrd: arphrd, rtnlKind: nil, adminUp: up, carrier: carrier,
                  operstate: up && carrier ? "up" : "down")
    }

    private func route(_ index: Int32, _ family: AddressFamily = .ipv4, metric: UInt32 = 100) -> DefaultRouteFacts {
        DefaultRouteFacts(index: index, family: family, metric: metric)
    }

    /// Classifies by name so tests control the kind without sysfs.
    private func state(_ snapshot: KernelSnapshot) -> NetworkState {
        NetworkState(snapshot: snapshot) { f in
            if f.name == "lo" { return Classification(kind: .loopback, by: "arphrd:loopback", metered: false) }
            if f.name.hasPrefix("ww") { return Classification(kind: .wwan, by: "sysfs:devtype=wwan", metered: true) }
            if f.name.hasPrefix("wl") { return Classification(kind: .wifi, by: "sysfs:devtype=wlan", metered: false) }
            return Classification(kind: .ethernet, by: "arphrd:ether", metered: false)
        }
    }

    // MARK: usability

    func testUsableNeedsAdminUpCarrierAndDefaultRoute() throws {
        let s = state(KernelSnapshot(links: [facts(2, "eth0")], defaultRoutes: [route(2)]))
        let eth = try XCTUnwrap(s.link(named: "eth0"))
        XCTAssertTrue(eth.usable)
        XCTAssertTrue(s.available)
    }

    func testAdminDownIsUnusable() throws {
        let s = state(KernelSnapshot(links: [facts(2, "eth0", up: false)], defaultRoutes: [route(2)]))
        XCTAssertFalse(try XCTUnwrap(s.link(named: "eth0")).usable)
        XCTAssertFalse(s.available)
        XCTAssertNil(s.primary)
    }

    /// Without carrier a link is unusable, though the kernel may still send traffic by its (linkdown) route: it is
    /// then the primary, and nothing is available.
    func testNoCarrierIsUnusable() throws {
        let s = state(KernelSnapshot(links: [facts(2, "eth0", carrier: false)], defaultRoutes: [route(2)],
                                     egress: [.ipv4: .link(2)]))
        XCTAssertFalse(try XCTUnwrap(s.link(named: "eth0")).usable)
        XCTAssertFalse(s.available)
        XCTAssertEqual(s.usableLinks, [])
        XCTAssertEqual(s.primary?.name, "eth0")
    }

    /// Up with carrier but no default route (e.g. a link-local-only LAN) is not "network available".
    func testNoDefaultRouteIsUnusable() throws {
        let s = state(KernelSnapshot(links: [facts(2, "eth0")],
                                     addresses: [AddressFacts(index: 2, family: .ipv4, text: "192.0.2.5/24")]))
        let eth = try XCTUnwrap(s.link(named: "eth0"))
        XCTAssertFalse(eth.usable)
        XCTAssertNil(eth.metric)
        XCTAssertFalse(eth.defaultRoute.ipv4)
        XCTAssertFalse(s.available)
    }

    /// A route on another link does not make this one usable.
    func testDefaultRouteOnOtherLinkDoesNotCount() throws {
        let s = state(KernelSnapshot(links: [facts(2, "eth0"), facts(3, "eth1")], defaultRoutes: [route(3)]))
        XCTAssertFalse(try XCTUnwrap(s.link(named: "eth0")).usable)
        XCTAssertTrue(try XCTUnwrap(s.link(named: "eth1")).usable)
        XCTAssertEqual(s.usableLinks.map(\.name), ["eth1"])
    }

    /// IPv6-only networks (NAT64, many cellular carriers) are real connectivity.
    func testIPv6OnlyDefaultRouteCounts() throws {
        let s = state(KernelSnapshot(links: [facts(4, "wwan0", arphrd: ARPHRD.none)],
                                     defaultRoutes: [route(4, .ipv6, metric: 700)], egress: [.ipv6: .link(4)]))
        let wwan = try XCTUnwrap(s.link(named: "wwan0"))
        XCTAssertTrue(wwan.usable)
        XCTAssertFalse(wwan.defaultRoute.ipv4)
        XCTAssertTrue(wwan.defaultRoute.ipv6)
        XCTAssertEqual(wwan.metric, 700)
        XCTAssertTrue(s.available)
        XCTAssertEqual(s.primary?.name, "wwan0", "no IPv4 route: the primary is IPv6's egress")
        XCTAssertNil(s.egressLink(.ipv4))
        XCTAssertEqual(s.egressLink(.ipv6)?.name, "wwan0")
    }

    /// Loopback never makes the network "available", even in the odd case of a default route through it.
    func testAvailableIgnoresLoopback() {
        let s = state(KernelSnapshot(links: [facts(1, "lo", arphrd: ARPHRD.loopback)], defaultRoutes: [route(1)]))
        XCTAssertTrue(s.links[0].usable, "precondition: lo itself satisfies the usable rule")
        XCTAssertFalse(s.available)
        XCTAssertTrue(s.usableLinks.isEmpty)
        XCTAssertNil(s.primary)
    }

    // MARK: egress and primary

    /// The primary is where the kernel sends IPv4 traffic, not the lowest metric: rules may send it elsewhere.
    func testPrimaryIsTheKernelsEgressNotTheLowestMetric() {
        let links = [facts(2, "enp3s0"), facts(3, "wlp2s0"), facts(5, "wwan0", arphrd: ARPHRD.none)]
        let routes = [route(2, metric: 100), route(3, metric: 50), route(5, metric: 700)]
        let s = state(KernelSnapshot(links: links, defaultRoutes: routes, egress: [.ipv4: .link(3)]))
        XCTAssertEqual(s.primary?.name, "wlp2s0")
        XCTAssertEqual(s.primary?.kind, .wifi)
        let ruled = state(KernelSnapshot(links: links, defaultRoutes: routes, egress: [.ipv4: .link(5)]))
        XCTAssertEqual(ruled.primary?.name, "wwan0")
        XCTAssertNil(state(KernelSnapshot(links: links, defaultRoutes: routes)).primary, "no route: no primary")
    }

    /// The kernel still routes by a link without carrier (linkdown) when its metric is best: that link is the
    /// primary, usable or not, while another usable link keeps the network available.
    func testPrimaryIsTheEgressEvenWithoutCarrier() {
        let s = state(KernelSnapshot(
            links: [facts(2, "enp3s0", carrier: false), facts(3, "wlp2s0")],
            defaultRoutes: [route(2, metric: 10), route(3, metric: 600)], egress: [.ipv4: .link(2)]))
        XCTAssertEqual(s.primary?.name, "enp3s0")
        XCTAssertEqual(s.primary?.usable, false)
        XCTAssertTrue(s.available)
        XCTAssertEqual(s.usableLinks.map(\.name), ["wlp2s0"])
    }

    /// IPv4's egress link, else IPv6's; a blocked family or a link the dump does not have gives none.
    func testPrimaryIPv4BeforeIPv6() {
        let links = [facts(2, "eth0"), facts(3, "wlan0")]
        let routes = [route(2), route(3, .ipv6)]
        func primary(_ egress: [AddressFamily: Egress]) -> String? {
            state(KernelSnapshot(links: links, defaultRoutes: routes, egress: egress)).primary?.name
        }
        XCTAssertEqual(primary([.ipv4: .link(2), .ipv6: .link(3)]), "eth0")
        XCTAssertEqual(primary([.ipv4: .link(3), .ipv6: .link(2)]), "wlan0")
        XCTAssertEqual(primary([.ipv4: .blocked(.blackhole), .ipv6: .link(3)]), "wlan0")
        XCTAssertEqual(primary([.ipv6: .link(3)]), "wlan0")
        XCTAssertNil(primary([.ipv4: .blocked(.unreachable), .ipv6: .blocked(.prohibit)]))
        XCTAssertNil(primary([.ipv4: .link(9)]), "an ifindex the dump does not have")
        XCTAssertEqual(primary([.ipv4: .link(9), .ipv6: .link(3)]), "wlan0")
    }

    /// The snapshot's egress is the state's, and a state that differs only there is a different state (the
    /// engine must notice a route moving when no link changed).
    func testEgressComesFromTheSnapshot() {
        let snap = KernelSnapshot(links: [facts(2, "eth0"), facts(3, "wlan0")], defaultRoutes: [route(2), route(3)],
                                  egress: [.ipv4: .link(3), .ipv6: .blocked(.blackhole)])
        let s = state(snap)
        XCTAssertEqual(s.egress, [.ipv4: .link(3), .ipv6: .blocked(.blackhole)])
        var moved = snap
        moved.egress[.ipv4] = .link(2)
        XCTAssertEqual(state(moved).links, s.links)
        XCTAssertNotEqual(state(moved), s)
    }

    /// The best of some links (what bind_to names): the lowest metric, ties to the lowest index.
    func testBestTieGoesToLowestIndex() {
        // Listed out of order so the tie-break cannot come from input order.
        let s = state(KernelSnapshot(
            links: [facts(7, "eth7"), facts(3, "eth3"), facts(5, "eth5"), facts(9, "eth9")],
            defaultRoutes: [route(7, metric: 100), route(5, metric: 100), route(3, metric: 100), route(9, metric: 200)]))
        XCTAssertEqual(s.best(of: s.usableLinks)?.index, 3)
        XCTAssertEqual(s.best(of: s.usableLinks.reversed())?.index, 3)
        XCTAssertEqual(s.best(of: s.usableLinks.filter { $0.index != 3 })?.index, 5)
        XCTAssertEqual(s.best(of: s.usableLinks.filter { $0.index == 9 })?.index, 9)
        XCTAssertNil(s.best(of: []))
    }

    /// Two default routes on one link (DHCP + RA, or v4 + v6): the better one counts.
    func testMultipleDefaultRoutesOnOneLinkTakeLowestMetric() throws {
        let s = state(KernelSnapshot(
            links: [facts(2, "eth0"), facts(3, "wlan0")],
            defaultRoutes: [route(2, .ipv4, metric: 1024), route(2, .ipv6, metric: 20), route(2, .ipv4, metric: 300),
                            route(3, .ipv4, metric: 100)]))
        let eth = try XCTUnwrap(s.link(named: "eth0"))
        XCTAssertEqual(eth.metric, 20)
        XCTAssertTrue(eth.defaultRoute.ipv4)
        XCTAssertTrue(eth.defaultRoute.ipv6)
        XCTAssertEqual(s.best(of: s.usableLinks)?.name, "eth0", "20 beats wlan0's 100")
    }

    // MARK: joining

    func testAddressesGroupedPerLinkAndSorted() throws {
        let s = state(KernelSnapshot(
            links: [facts(2, "eth0"), facts(3, "wlan0"), facts(4, "eth1")],
            addresses: [
                AddressFacts(index: 3, family: .ipv6, text: "fe80::2/64"),
                AddressFacts(index: 2, family: .ipv4, text: "192.0.2.10/24"),
                AddressFacts(index: 3, family: .ipv4, text: "198.51.100.7/24"),
                AddressFacts(index: 2, family: .ipv6, text: "2001:db8::10/64"),
                AddressFacts(index: 9, family: .ipv4, text: "203.0.113.1/24"), // link 9 is not in the dump
            ]))
        XCTAssertEqual(try XCTUnwrap(s.link(named: "eth0")).addresses, ["192.0.2.10/24", "2001:db8::10/64"])
        XCTAssertEqual(try XCTUnwrap(s.link(named: "wlan0")).addresses, ["198.51.100.7/24", "fe80::2/64"])
        XCTAssertEqual(try XCTUnwrap(s.link(named: "eth1")).addresses, [])
        XCTAssertEqual(s.links.count, 3, "an address on an unknown link must not invent a link")
    }

    func testLinksSortedByIndexAndCarryClassification() throws {
        let s = state(KernelSnapshot(links: [facts(5, "wwan0"), facts(1, "lo"), facts(3, "wlan0")]))
        XCTAssertEqual(s.links.map(\.index), [1, 3, 5])
        let wwan = try XCTUnwrap(s.link(named: "wwan0"))
        XCTAssertEqual(wwan.kind, .wwan)
        XCTAssertEqual(wwan.classifiedBy, "sysfs:devtype=wwan")
        XCTAssertTrue(wwan.metered)
        XCTAssertNil(s.link(named: "eth9"))
    }

    /// The classifier is asked once per link (the daemon caches sysfs reads behind it).
    func testClassifyCalledOncePerLink() {
        var asked: [String] = []
        _ = NetworkState(snapshot: KernelSnapshot(links: [facts(2, "a"), facts(3, "b")],
                                                  defaultRoutes: [route(2), route(2, .ipv6)])) { f in
            asked.append(f.name)
            return Classification(kind: .other, by: "fallback", metered: false)
        }
        XCTAssertEqual(asked.sorted(), ["a", "b"])
    }

    func testLinkJSON() {
        let s = state(KernelSnapshot(
            links: [facts(3, "wwan0", arphrd: ARPHRD.none)],
            addresses: [AddressFacts(index: 3, family: .ipv4, text: "10.1.2.3/30")],
            defaultRoutes: [route(3, .ipv4, metric: 700)]))
        XCTAssertEqual(s.links[0].json.encoded(),
                       #"{"index":3,"name":"wwan0","kind":"wwan","classified_by":"sysfs:devtype=wwan","metered":true,"metered_by":"kind","roaming":null,"roaming_by":null,"over":null,"#
                           + #""admin_up":true,"carrier":true,"operstate":"up","addresses":["10.1.2.3/30"],"#
                           + #""default_route":{"ipv4":true,"ipv6":false},"metric":700,"usable":true,"ssid":null,"bssid":null,"connection":null}"#)
        let noRoute = state(KernelSnapshot(links: [facts(2, "eth0")]))
        XCTAssertEqual(noRoute.links[0].json["metric"], .null)
        XCTAssertEqual(noRoute.links[0].json["usable"], false)
    }
}
