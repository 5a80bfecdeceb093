// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import NetpermProtocol
import XCTest

/// Stacked links and tunnels take the kind of what carries them (`Stacking`), run through `NetworkState` as the
/// engine runs it, with each link's own classification given by name.
final class StackingTests: XCTestCase {
    private func facts(_ index: Int32, _ name: String, kind: String? = nil, lower: Int32? = nil, master: Int32? = nil,
                       remote: [UInt8]? = nil, carrier: Bool = true) -> LinkFacts {
        LinkFacts(index: index, name: name, arphrd: ARPHRD.ether, rtnlKind: kind, adminUp: true, carrier: carrier,
                  operstate: carrier ? "up" : "down", lowerIndex: lower, masterIndex: master, tunnelRemote: remote)
    }

    private func route(_ index: Int32, metric: UInt32 = 100) -> DefaultRouteFacts {
        DefaultRouteFacts(index: index, family: .ipv4, metric: metric)
    }

    /// Own classification: by name for hardware, `other` for any rtnl kind (as the built-in rules make them).
    private func state(_ snapshot: KernelSnapshot, overrides: [InterfaceOverride] = []) -> NetworkState {
        NetworkState(snapshot: snapshot, overrides: overrides) { f in
            var c: Classification
            if let k = f.rtnlKind { c = Classification(kind: .other, by: "rtnl-kind:\(k)", metered: false) }
            else if f.name.hasPrefix("ww") { c = Classification(kind: .wwan, by: "sysfs:devtype=wwan", metered: true) }
            else if f.name.hasPrefix("wl") { c = Classification(kind: .wifi, by: "sysfs:devtype=wlan", metered: false) }
            else { c = Classification(kind: .ethernet, by: "arphrd:ether", metered: false) }
            // [Interface] sections apply to the own classification too, as Classifier.classify does.
            for o in overrides where o.glob.matches(f.name) {
                if let k = o.kind { c.kind = k; c.by = "config:[Interface \(o.glob.pattern)]"; c.metered = k == .wwan }
                if let m = o.metered { c.metered = m }
            }
            return c
        }
    }

    private func assertLink(_ s: NetworkState, _ name: String, _ kind: LinkKind, by: String, metered: Bool,
                            over: String?, file: StaticString = #filePath, line: UInt = #line) throws {
        let l = try XCTUnwrap(s.link(named: name), "no link \(name)", file: file, line: line)
        XCTAssertEqual(l.kind, kind, "\(name) kind", file: file, line: line)
        XCTAssertEqual(l.classifiedBy, by, "\(name) classified_by", file: file, line: line)
        XCTAssertEqual(l.metered, metered, "\(name) metered", file: file, line: line)
        XCTAssertEqual(l.over, over, "\(name) over", file: file, line: line)
    }

    // MARK: lower links

    func testVlanOnWiredUplinkIsEthernet() throws {
        let s = state(KernelSnapshot(links: [facts(2, "eth0"), facts(3, "eth0.10", kind: "vlan", lower: 2)]))
        try assertLink(s, "eth0.10", .ethernet, by: "lower:eth0", metered: false, over: "eth0")
        try assertLink(s, "eth0", .ethernet, by: "arphrd:ether", metered: false, over: nil)
    }

    /// The walk-around of WWAN=deny the pass closes: macvlan and ipvlan on wwan0 were `other` and unmetered.
    func testMacvlanAndIpvlanOnWwanAreWwanAndMetered() throws {
        let s = state(KernelSnapshot(links: [facts(2, "wwan0"), facts(3, "mv0", kind: "macvlan", lower: 2),
                                             facts(4, "ipv0", kind: "ipvlan", lower: 2),
                                             facts(5, "mvtap0", kind: "macvtap", lower: 2)]))
        try assertLink(s, "mv0", .wwan, by: "lower:wwan0", metered: true, over: "wwan0")
        try assertLink(s, "ipv0", .wwan, by: "lower:wwan0", metered: true, over: "wwan0")
        try assertLink(s, "mvtap0", .wwan, by: "lower:wwan0", metered: true, over: "wwan0")
    }

    /// A verdict through the macvlan is a cellular one: an app denied cellular is denied.
    func testVerdictThroughMacvlanOnWwanIsDenied() throws {
        var snap = KernelSnapshot(links: [facts(2, "wwan0"), facts(3, "mv0", kind: "macvlan", lower: 2)],
                                  defaultRoutes: [route(3)])
        snap.egress = [.ipv4: .link(3)]
        var p = PermissionSet(wifi: .deny, wwan: .deny, ethernet: .deny, other: .deny)
        p[LinkKind.other] = .allow
        p[LinkKind.ethernet] = .allow
        let v = Verdict.compute(app: "a", matchedBy: .name, permissions: p, network: state(snap), ready: true)
        XCTAssertFalse(v.available)
        XCTAssertEqual(v.reason, .denied)
        XCTAssertEqual(v.kinds.denied, [.wwan])
    }

    func testLowerInAnotherNamespaceOrMissingKeepsOwnRule() throws {
        let s = state(KernelSnapshot(links: [facts(3, "mv0", kind: "macvlan", lower: 42),
                                             facts(4, "mv1", kind: "macvlan")]))
        try assertLink(s, "mv0", .other, by: "rtnl-kind:macvlan", metered: false, over: nil)
        try assertLink(s, "mv1", .other, by: "rtnl-kind:macvlan", metered: false, over: nil)
    }

    /// A veth reports its peer as IFLA_LINK: that is no lower link to take the kind of.
    func testVethPeerIsNotALowerLink() throws {
        let s = state(KernelSnapshot(links: [facts(2, "wwan0"), facts(3, "ve0", kind: "veth", lower: 4),
                                             facts(4, "ve1", kind: "veth", lower: 3)]))
        try assertLink(s, "ve0", .other, by: "rtnl-kind:veth", metered: false, over: nil)
    }

    // MARK: ports

    func testBondOfNicsIsEthernet() throws {
        let s = state(KernelSnapshot(links: [facts(2, "eth0", master: 4), facts(3, "eth1", master: 4),
                                             facts(4, "bond0", kind: "bond")]))
        try assertLink(s, "bond0", .ethernet, by: "ports:eth0,eth1", metered: false, over: "eth0")
    }

    func testBridgeWithWiredPortAndVmTapsIsEthernet() throws {
        let s = state(KernelSnapshot(links: [facts(2, "enp3s0", master: 5), facts(3, "vnet0", kind: "tun", master: 5),
                                             facts(5, "br0", kind: "bridge")]))
        try assertLink(s, "br0", .ethernet, by: "ports:enp3s0,vnet0", metered: false, over: "enp3s0")
    }

    /// A VM's tap on the bridge is a port, not a tunnel: it takes no carrier (the bridge itself would be one).
    func testTapOnBridgeIsAPortNotATunnel() throws {
        let s = state(KernelSnapshot(links: [facts(2, "enp3s0", master: 5), facts(3, "vnet0", kind: "tun", master: 5),
                                             facts(5, "br0", kind: "bridge")],
                                     defaultRoutes: [route(5)]))
        try assertLink(s, "vnet0", .other, by: "rtnl-kind:tun", metered: false, over: nil)
        try assertLink(s, "br0", .ethernet, by: "ports:enp3s0,vnet0", metered: false, over: "enp3s0")
        XCTAssertFalse(Stacking.needsHostRoutes(facts(3, "vnet0", kind: "tun", master: 5)))
    }

    func testBridgeWithWlanIsWifiTheMostRestrictive() throws {
        let s = state(KernelSnapshot(links: [facts(2, "eth0", master: 5), facts(3, "wlan0", master: 5),
                                             facts(5, "br0", kind: "bridge")]))
        try assertLink(s, "br0", .wifi, by: "ports:eth0,wlan0", metered: false, over: "wlan0")
    }

    func testBridgeMeteredIfAnyPortIs() throws {
        let o = InterfaceOverride(glob: try Glob("eth1"), kind: nil, metered: true)
        let s = state(KernelSnapshot(links: [facts(2, "eth0", master: 5), facts(3, "eth1", master: 5),
                                             facts(5, "br0", kind: "bridge")]), overrides: [o])
        try assertLink(s, "br0", .ethernet, by: "ports:eth0,eth1", metered: true, over: "eth0")
    }

    func testRestrictivenessOrder() {
        let order: [LinkKind] = [.wwan, .wifi, .ethernet, .other, .loopback]
        XCTAssertEqual(order, order.sorted { Stacking.restrictiveness($0) > Stacking.restrictiveness($1) })
    }

    func testVlanOnBondOfNics() throws {
        let s = state(KernelSnapshot(links: [facts(2, "eth0", master: 4), facts(3, "eth1", master: 4),
                                             facts(4, "bond0", kind: "bond"), facts(6, "bond0.7", kind: "vlan", lower: 4)]))
        try assertLink(s, "bond0.7", .ethernet, by: "lower:bond0", metered: false, over: "bond0")
    }

    /// A bridge holding a VLAN of a bond that has a wwan port: wwan all the way up.
    func testDeepStackCarriesWwanUp() throws {
        let s = state(KernelSnapshot(links: [facts(2, "eth0", master: 4), facts(3, "wwan0", master: 4),
                                             facts(4, "bond0", kind: "bond"),
                                             facts(6, "bond0.7", kind: "vlan", lower: 4, master: 7),
                                             facts(7, "br0", kind: "bridge")]))
        try assertLink(s, "br0", .wwan, by: "ports:bond0.7", metered: true, over: "bond0.7")
    }

    func testPortLeavingBridge() throws {
        var links = [facts(2, "eth0", master: 5), facts(3, "wlan0", master: 5), facts(5, "br0", kind: "bridge")]
        try assertLink(state(KernelSnapshot(links: links)), "br0", .wifi, by: "ports:eth0,wlan0", metered: false,
                       over: "wlan0")
        links[1].masterIndex = nil
        try assertLink(state(KernelSnapshot(links: links)), "br0", .ethernet, by: "ports:eth0", metered: false,
                       over: "eth0")
        links[0].masterIndex = nil
        try assertLink(state(KernelSnapshot(links: links)), "br0", .other, by: "rtnl-kind:bridge", metered: false,
                       over: nil)
    }

    /// The kernel allows no cycle, but a picture mid-change might show one: the walk ends, nothing hangs.
    func testCyclesEnd() throws {
        let s = state(KernelSnapshot(links: [facts(2, "a", kind: "vlan", lower: 3), facts(3, "b", kind: "vlan", lower: 2),
                                             facts(4, "c", kind: "macvlan", lower: 4),
                                             facts(5, "br0", kind: "bridge", master: 6), facts(6, "br1", kind: "bridge", master: 5)]))
        XCTAssertEqual(s.links.count, 5)
        try assertLink(s, "c", .other, by: "rtnl-kind:macvlan", metered: false, over: nil)
        for l in s.links { XCTAssertEqual(l.kind, .other, l.name) }
    }

    /// Config is explicit: Kind= on the stacked link wins; Metered= alone wins for metered only.
    func testInterfaceOverrideOnStackedLinkWins() throws {
        let kind = InterfaceOverride(glob: try Glob("mv0"), kind: .ethernet, metered: nil)
        let metered = InterfaceOverride(glob: try Glob("mv1"), kind: nil, metered: false)
        let s = state(KernelSnapshot(links: [facts(2, "wwan0"), facts(3, "mv0", kind: "macvlan", lower: 2),
                                             facts(4, "mv1", kind: "macvlan", lower: 2)]), overrides: [kind, metered])
        try assertLink(s, "mv0", .ethernet, by: "config:[Interface mv0]", metered: false, over: nil)
        try assertLink(s, "mv1", .wwan, by: "lower:wwan0", metered: false, over: "wwan0")
    }

    /// An override on the carrier reaches the stacked link (a veth made wwan by config, as the namespace test does).
    func testOverrideOnCarrierReachesStackedLink() throws {
        let o = InterfaceOverride(glob: try Glob("vw*"), kind: .wwan, metered: nil)
        let s = state(KernelSnapshot(links: [facts(2, "vw0", kind: "veth"), facts(3, "mv0", kind: "macvlan", lower: 2)]),
                      overrides: [o])
        try assertLink(s, "mv0", .wwan, by: "lower:vw0", metered: true, over: "vw0")
    }

    // MARK: tunnels

    func testTunnelWithKnownEndpointTakesTheEndpointRoutesLink() throws {
        for (carrier, kind, metered) in [("wwan0", LinkKind.wwan, true), ("wlan0", .wifi, false),
                                          ("eth0", .ethernet, false)] {
            for tunnelKind in ["ipip", "gre", "sit", "ip6tnl", "vti"] {
                var snap = KernelSnapshot(links: [facts(2, carrier), facts(3, "tnl0", kind: tunnelKind, remote: [192, 0, 2, 1])])
                snap.endpointRoutes = [3: .link(2)]
                try assertLink(state(snap), "tnl0", kind, by: "endpoint:\(carrier)", metered: metered, over: carrier)
            }
        }
    }

    func testTunnelWhoseEndpointRouteChangesFollows() throws {
        var snap = KernelSnapshot(links: [facts(2, "wwan0"), facts(3, "wlan0"), facts(4, "gre1", kind: "gre", remote: [192, 0, 2, 1])])
        snap.endpointRoutes = [4: .link(2)]
        try assertLink(state(snap), "gre1", .wwan, by: "endpoint:wwan0", metered: true, over: "wwan0")
        snap.endpointRoutes = [4: .link(3)]
        try assertLink(state(snap), "gre1", .wifi, by: "endpoint:wlan0", metered: false, over: "wlan0")
        // No route to the endpoint (or one into the tunnel itself): nothing carries it; its own rule stands.
        snap.endpointRoutes = [4: .blocked(.unreachable)]
        try assertLink(state(snap), "gre1", .other, by: "rtnl-kind:gre", metered: false, over: nil)
        snap.endpointRoutes = [4: .link(4)]
        try assertLink(state(snap), "gre1", .other, by: "rtnl-kind:gre", metered: false, over: nil)
    }

    func testTunBoundToDeviceTakesIt() throws {
        let s = state(KernelSnapshot(links: [facts(2, "wwan0"), facts(3, "ipip1", kind: "ipip", lower: 2)]))
        try assertLink(s, "ipip1", .wwan, by: "lower:wwan0", metered: true, over: "wwan0")
    }

    /// A userspace VPN (tun, or WireGuard whose peers the kernel reports only through its genl family): the host
    /// route to its server decides, over which link the default route goes.
    func testTunTakesTheHostRoutesLink() throws {
        for (carrier, kind) in [("wwan0", LinkKind.wwan), ("wlan0", .wifi), ("eth0", .ethernet)] {
            for tunnelKind in ["tun", "wireguard", "ovpn"] {
                var snap = KernelSnapshot(links: [facts(2, "eth9"), facts(3, carrier), facts(4, "vpn0", kind: tunnelKind)],
                                          defaultRoutes: [route(2, metric: 10), route(4, metric: 5)])
                snap.hostRoutes = [HostRouteFacts(index: 3, destination: "192.0.2.1")]
                try assertLink(state(snap), "vpn0", kind, by: "host-route:\(carrier)", metered: kind == .wwan,
                               over: carrier)
            }
        }
    }

    /// Host routes through the tunnel itself (routes a VPN pushes) are not its carrier; several through
    /// different links: the most restrictive.
    func testHostRoutesThroughTunnelsIgnoredAndMostRestrictiveWins() throws {
        var snap = KernelSnapshot(links: [facts(2, "eth0"), facts(3, "wwan0"), facts(4, "tun0", kind: "tun"),
                                          facts(5, "tun1", kind: "tun")])
        snap.hostRoutes = [HostRouteFacts(index: 4, destination: "10.8.0.1"), HostRouteFacts(index: 5, destination: "10.9.0.1"),
                           HostRouteFacts(index: 2, destination: "192.0.2.1")]
        try assertLink(state(snap), "tun0", .ethernet, by: "host-route:eth0", metered: false, over: "eth0")
        snap.hostRoutes.append(HostRouteFacts(index: 3, destination: "198.51.100.1"))
        try assertLink(state(snap), "tun0", .wwan, by: "host-route:wwan0", metered: true, over: "wwan0")
    }

    /// No host route: the best usable link that is not a tunnel.
    func testTunWithoutHostRouteTakesThePrimaryNonTunnelLink() throws {
        var snap = KernelSnapshot(links: [facts(2, "eth0"), facts(3, "wwan0"), facts(4, "tun0", kind: "tun")],
                                  defaultRoutes: [route(2, metric: 700), route(3, metric: 50), route(4, metric: 1)])
        try assertLink(state(snap), "tun0", .wwan, by: "primary:wwan0", metered: true, over: "wwan0")
        snap.links[1].carrier = false
        try assertLink(state(snap), "tun0", .ethernet, by: "primary:eth0", metered: false, over: "eth0")
        snap.links[0].carrier = false
        try assertLink(state(snap), "tun0", .other, by: "rtnl-kind:tun", metered: false, over: nil)
    }

    /// WireGuard over a tun over cellular: the endpoint route enters the other tunnel, which is cellular.
    func testTunnelOverTunnel() throws {
        var snap = KernelSnapshot(links: [facts(2, "wwan0"), facts(3, "tun0", kind: "tun"),
                                          facts(4, "gre1", kind: "gre", remote: [10, 8, 0, 1])])
        snap.hostRoutes = [HostRouteFacts(index: 2, destination: "192.0.2.1")]
        snap.endpointRoutes = [4: .link(3)]
        try assertLink(state(snap), "gre1", .wwan, by: "endpoint:tun0", metered: true, over: "tun0")
    }

    func testNeedsHostRoutes() {
        XCTAssertTrue(Stacking.needsHostRoutes(facts(3, "tun0", kind: "tun")))
        XCTAssertFalse(Stacking.needsHostRoutes(facts(3, "gre1", kind: "gre", remote: [192, 0, 2, 1])))
        XCTAssertFalse(Stacking.needsHostRoutes(facts(3, "ipip1", kind: "ipip", lower: 2)))
        XCTAssertFalse(Stacking.needsHostRoutes(facts(3, "eth0")))
        XCTAssertFalse(Stacking.needsHostRoutes(facts(3, "mv0", kind: "macvlan", lower: 2)))
    }

    /// The verdict names the carrier: `via` is the tunnel, with `over`.
    func testVerdictJSONSaysOver() throws {
        var snap = KernelSnapshot(links: [facts(2, "wlan0"), facts(3, "tun0", kind: "tun")],
                                  defaultRoutes: [route(3)])
        snap.hostRoutes = [HostRouteFacts(index: 2, destination: "192.0.2.1")]
        snap.egress = [.ipv4: .link(3)]
        var p = PermissionSet(wifi: .deny, wwan: .deny, ethernet: .deny, other: .deny)
        p[LinkKind.wifi] = .allow
        let v = Verdict.compute(app: "a", matchedBy: .name, permissions: p, network: state(snap), ready: true)
        XCTAssertEqual(v.reason, .ok)
        XCTAssertEqual(v.via?.nameOver, "tun0 over wlan0")
        let via = v.json["via"]
        XCTAssertEqual(via?["name"]?.stringValue, "tun0")
        XCTAssertEqual(via?["kind"]?.stringValue, "wifi")
        XCTAssertEqual(via?["over"]?.stringValue, "wlan0")
        XCTAssertEqual(v.json["egress"]?["ipv4"]?["over"]?.stringValue, "wlan0")
        let link = try XCTUnwrap(state(snap).link(named: "tun0")).json
        XCTAssertEqual(link["over"]?.stringValue, "wlan0")
        XCTAssertEqual(link["classified_by"]?.stringValue, "host-route:wlan0")
        // Not stacked: over is there, null.
        XCTAssertEqual(try XCTUnwrap(state(snap).link(named: "wlan0")).json["over"], .null)
    }
}
