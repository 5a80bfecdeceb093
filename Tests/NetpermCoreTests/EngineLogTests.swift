// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import XCTest

/// What the engine logs about the network, old -> new, and that nothing below the log level is produced.
final class EngineLogTests: XCTestCase {
    private func lines(_ h: EngineHarness, from mark: Int) -> [String] {
        h.log[mark...].map { "<\($0.0.rawValue)> \($0.1)" }
    }

    /// Each kind of change of a link, as the journal shows it, with the network's summary (where the kernel sends
    /// traffic, and whether anything is usable) when it changes.
    func testLinkChangesAreLoggedOldToNew() {
        let h = EngineHarness(links: [])
        var mark = h.log.count
        h.setLinks([Links.eth, makeLink(3, "wlan0", .wifi, metric: nil)])
        XCTAssertEqual(lines(h, from: mark), [
            "<6> eth0: appeared, kind ethernet (arphrd:ether), usable",
            "<6> wlan0: appeared, kind wifi (sysfs:devtype=wlan)",
            "<5> network: via eth0 (ethernet)",
        ])
        mark = h.log.count
        var eth = Links.eth
        eth.status.carrier = false
        h.setLinks([eth, Links.wlan])
        // eth0 keeps its route, the best (linkdown): the kernel still sends traffic there although wlan0 keeps
        // the network available. The egress link is the same but its traffic goes nowhere: that is news.
        XCTAssertEqual(lines(h, from: mark), [
            "<6> eth0: usable true -> false (admin up, carrier off, default route yes)",
            "<6> wlan0: usable false -> true (admin up, carrier on, default route yes)",
            "<5> network: via eth0 (ethernet), which is not usable",
        ])
        mark = h.log.count
        var dormant = Links.wlan
        dormant.status.operstate = "dormant"
        h.setLinks([eth, dormant])
        XCTAssertEqual(lines(h, from: mark), ["<7> wlan0: changed (operstate up -> dormant)"])
        mark = h.log.count
        h.setLinks([eth, makeLink(3, "wlan0", .wwan, metric: 600)])
        XCTAssertEqual(lines(h, from: mark), ["<6> wlan0: kind wifi -> wwan (sysfs:devtype=wwan)"])
        mark = h.log.count
        h.setLinks([eth])
        XCTAssertEqual(lines(h, from: mark), ["<6> wlan0: removed",
                                              "<5> network: unavailable, traffic still routed via eth0 (ethernet)"])
        mark = h.log.count
        h.setLinks([eth])
        XCTAssertEqual(lines(h, from: mark), [], "no change, nothing to say")
        mark = h.log.count
        h.setLinks([Links.wlan])
        XCTAssertEqual(lines(h, from: mark), [
            "<6> wlan0: appeared, kind wifi (sysfs:devtype=wlan), usable",
            "<6> eth0: removed",
            "<5> network: via wlan0 (wifi)",
        ])
    }

    /// The link the kernel routes by loses its carrier while its route stays (linkdown): nothing is usable, and the
    /// summary says where the traffic still goes. Then the route goes too, the carrier comes back, and a usable
    /// link is left with no route the kernel would use (a blackhole wins).
    func testUnavailableWhileTrafficIsStillRouted() {
        let h = EngineHarness(links: [Links.lo, Links.eth])
        var mark = h.log.count
        var eth = Links.eth
        eth.status.carrier = false
        eth.status.operstate = "down"
        h.setLinks([Links.lo, eth])
        XCTAssertEqual(lines(h, from: mark), [
            "<6> eth0: usable true -> false (admin up, carrier off, default route yes)",
            "<5> network: unavailable, traffic still routed via eth0 (ethernet)",
        ])
        mark = h.log.count
        eth.metric = nil
        h.setLinks([Links.lo, eth])
        XCTAssertEqual(lines(h, from: mark).filter { $0.hasPrefix("<5>") }, ["<5> network: unavailable"])
        mark = h.log.count
        h.setLinks([Links.lo, Links.eth])
        XCTAssertEqual(lines(h, from: mark), [
            "<6> eth0: usable false -> true (admin up, carrier on, default route yes)",
            "<5> network: via eth0 (ethernet)",
        ])
        mark = h.log.count
        h.setLinks([Links.lo, Links.eth], egress: [.ipv4: .blocked(.blackhole)])
        XCTAssertEqual(lines(h, from: mark), ["<5> network: usable links, but no route"])
        mark = h.log.count
        h.setLinks([Links.lo, Links.eth], egress: [.ipv4: .blocked(.unreachable)])
        XCTAssertEqual(lines(h, from: mark), [], "still no route: the summary is the same")
    }

    /// Nothing above the level is produced (or formatted); what is at or below it still is.
    func testLinesBelowTheLogLevelAreNotProduced() {
        for level in Priority.allCases {
            let h = EngineHarness(policy: "[App maps]\nExecutable=/usr/bin/maps\n", links: [],
                                  settings: Engine.Settings(daemonUID: 0, logLevel: level))
            h.setLinks([Links.wwan])
            _ = h.request(h.connect(Peers.maps), "QUERY")
            _ = h.request(h.connect(), "DECIDE maps wwan allow")
            h.reload(policy: "[App x]\nWWAN=allow\n")
            h.connect(PeerIdentity(pid: 9, uid: 1, gids: [], executable: nil, unit: nil, problem: "no exe"))
            XCTAssertTrue(h.log.allSatisfy { $0.0 <= level }, "\(level): \(h.log)")
            XCTAssertEqual(h.log.contains { $0.0 == .debug }, level >= .debug, "\(level)")
            XCTAssertEqual(!h.logged(containing: "wwan0: appeared").isEmpty, level >= .info, "\(level)")
            XCTAssertEqual(!h.logged(containing: "no agent is listening").isEmpty, level >= .notice, "\(level)")
            XCTAssertEqual(!h.logged(containing: "policy reload failed").isEmpty, level >= .err, "\(level)")
        }
    }

    /// The network's summary is a notice: at LogLevel notice it must still be said, though the per-link lines
    /// (info) are not.
    func testNetworkSummaryIsLoggedAtNoticeLevel() {
        let h = EngineHarness(links: [], settings: Engine.Settings(daemonUID: 0, logLevel: .notice))
        h.setLinks([Links.eth])
        XCTAssertEqual(h.logged(containing: "network: via eth0 (ethernet)").count, 1)
        XCTAssertEqual(h.logged(containing: "eth0: appeared"), [])
    }

    /// A tunnel's carrier in the journal and STATUS=: "tun0 over vw0", and the change when its server's route moves.
    func testTunnelCarrierIsLoggedAndInStatus() {
        let h = EngineHarness(links: [])
        func snapshot(hostRouteVia carrier: Int32) -> KernelSnapshot {
            var snap = KernelSnapshot(
                links: [LinkFacts(index: 2, name: "vw0", arphrd: ARPHRD.ether, rtnlKind: nil, adminUp: true, carrier: true,
                                  operstate: "up"),
                        LinkFacts(index: 3, name: "wl0", arphrd: ARPHRD.ether, rtnlKind: nil, adminUp: true, carrier: true,
                                  operstate: "up"),
                        LinkFacts(index: 4, name: "tun0", arphrd: ARPHRD.none, rtnlKind: "tun", adminUp: true,
                                  carrier: true, operstate: "unknown")],
                defaultRoutes: [DefaultRouteFacts(index: 4, family: .ipv4, metric: 0)],
                egress: [.ipv4: .link(4)],
                sysfs: [2: SysfsFacts(devtype: "wwan"), 3: SysfsFacts(devtype: "wlan")])
            snap.hostRoutes = [HostRouteFacts(index: carrier, destination: "192.0.2.7")]
            return snap
        }
        var mark = h.log.count
        h.feed(.kernel(snapshot(hostRouteVia: 2)))
        XCTAssertEqual(lines(h, from: mark), [
            "<6> vw0: appeared, kind wwan (sysfs:devtype=wwan)",
            "<6> wl0: appeared, kind wifi (sysfs:devtype=wlan)",
            "<6> tun0: appeared, kind wwan (host-route:vw0), usable",
            "<5> network: via tun0 over vw0 (wwan)",
        ])
        XCTAssertTrue(h.engine.statusText.contains("via tun0 over vw0 (wwan)"), h.engine.statusText)
        mark = h.log.count
        h.feed(.kernel(snapshot(hostRouteVia: 3)))
        XCTAssertEqual(lines(h, from: mark), [
            "<6> tun0: kind wwan -> wifi (host-route:wl0), over vw0 -> wl0",
            "<5> network: via tun0 over wl0 (wifi)",
        ])
        XCTAssertTrue(h.engine.statusText.contains("via tun0 over wl0 (wifi)"), h.engine.statusText)
    }
}
