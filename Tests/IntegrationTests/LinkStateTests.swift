// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// What LINKS and STATUS say about links, kinds, carrier and deleted links, checked against `ip`.
final class LinkStateTests: IntegrationTestCase {
    func testLinksAppearWithTheirKindsOverSocat() throws {
        let f = try makeFixture()
        // The daemon's first dump already has every link; carrier may still be settling (linkwatch).
        let links = try waitForLinks(f.socket, "wlan0 and wwan0 have carrier") {
            $0[name: "wlan0"]?.carrier == true && $0[name: "wwan0"]?.carrier == true
        }
        let kernel = try f.ns.kernelLinks()
        XCTAssertEqual(links.map(\.name).sorted(), kernel.map(\.name).sorted(), "LINKS names vs `ip -j link`")
        XCTAssertEqual(links.map(\.index), links.map(\.index).sorted(), "LINKS is sorted by index")
        for k in kernel {
            XCTAssertEqual(links[name: k.name]?.index, k.index, "ifindex of \(k.name)")
        }

        let wlan = try XCTUnwrap(links[name: "wlan0"])
        XCTAssertEqual(wlan.kind, "wifi")
        XCTAssertEqual(wlan.classifiedBy, "config:[Interface wlan0]")
        XCTAssertFalse(wlan.metered, "wifi is not metered by default")
        XCTAssertEqual(wlan.meteredBy, "default")
        XCTAssertTrue(wlan.adminUp)
        XCTAssertFalse(wlan.usable, "no default route yet, so not usable: \(wlan)")
        XCTAssertNil(wlan.metric)
        XCTAssertFalse(wlan.defaultRouteV4)

        let wwan = try XCTUnwrap(links[name: "wwan0"])
        XCTAssertEqual(wwan.kind, "wwan")
        XCTAssertEqual(wwan.classifiedBy, "config:[Interface wwan0]")
        XCTAssertTrue(wwan.metered, "wwan is metered by default")
        XCTAssertEqual(wwan.meteredBy, "kind")

        let lo = try XCTUnwrap(links[name: "lo"])
        XCTAssertEqual(lo.kind, "loopback")
        XCTAssertEqual(lo.classifiedBy, "arphrd:loopback")
        XCTAssertFalse(lo.metered)
        XCTAssertFalse(lo.usable, "loopback never has a default route here")

        // The peers have no override: they are what they are, virtual ethernet.
        for peer in ["wlan0p", "wwan0p"] {
            let p = try XCTUnwrap(links[name: peer])
            XCTAssertEqual(p.kind, "other", "\(p)")
            XCTAssertEqual(p.classifiedBy, "rtnl-kind:veth", "\(p)")
        }

        let status = try status(f.socket)
        XCTAssertTrue(status.ready)
        XCTAssertEqual(status.links, kernel.count, "STATUS link count")
        XCTAssertFalse(status.available, "no default route anywhere: \(status)")
        XCTAssertNil(status.primary)
        XCTAssertNil(status.primaryKind)
    }

    func testLinksAppearWithTheirKindsOverNetpermctl() throws {
        let f = try makeFixture()
        try waitForLinks(f.socket, "wlan0 and wwan0 have carrier") {
            $0[name: "wlan0"]?.carrier == true && $0[name: "wwan0"]?.carrier == true
        }
        let r = try ctl(["--socket", f.socket, "--json", "links"])
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.lines.count, 1, "--json prints exactly the reply line: \(r.summary)")
        let o = try JSONValue.object(r.lines.first ?? "")
        let links = try XCTUnwrap(o["links"] as? [[String: Any]]).map(DaemonLink.init)
        XCTAssertEqual(links[name: "wlan0"]?.kind, "wifi")
        XCTAssertEqual(links[name: "wlan0"]?.classifiedBy, "config:[Interface wlan0]")
        XCTAssertEqual(links[name: "wwan0"]?.kind, "wwan")
        XCTAssertEqual(links[name: "wwan0"]?.metered, true)
        XCTAssertEqual(links[name: "lo"]?.kind, "loopback")
        XCTAssertEqual(Set(links.map(\.name)), Set(try f.ns.kernelLinks().map(\.name)))
    }

    func testPeerDownClearsCarrierAndUsable() throws {
        let f = try makeFixture()
        try f.ns.ip("addr", "add", "10.1.0.1/24", "dev", "wlan0")
        try f.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "100")
        try waitForLinks(f.socket, "wlan0 is usable") { $0[name: "wlan0"]?.usable == true }

        try f.ns.ip("link", "set", "wlan0p", "down")
        let down = try waitForLinks(f.socket, "wlan0 loses carrier and usable after its peer goes down") {
            $0[name: "wlan0"]?.carrier == false && $0[name: "wlan0"]?.usable == false
        }
        let wlan = try XCTUnwrap(down[name: "wlan0"])
        XCTAssertTrue(wlan.adminUp, "our end is still admin up: \(wlan)")
        XCTAssertEqual(wlan.metric, 100, "the route stays (only the carrier went): \(wlan)")
        XCTAssertEqual(down[name: "wlan0p"]?.adminUp, false)
        // No usable link; the kernel still sends traffic by wlan0 (its linkdown route), and STATUS says so.
        try waitForStatus(f.socket, "the network is unavailable without carrier") {
            !$0.available && $0.primary == "wlan0"
        }

        try f.ns.ip("link", "set", "wlan0p", "up")
        try waitForLinks(f.socket, "wlan0 gets carrier and usable back after its peer comes up") {
            $0[name: "wlan0"]?.carrier == true && $0[name: "wlan0"]?.usable == true
        }
        try waitForStatus(f.socket, "wlan0 is primary again") { $0.available && $0.primary == "wlan0" }
    }

    func testDeletedLinkDisappearsAndNewLinksAppear() throws {
        let f = try makeFixture()
        let before = try links(f.socket)
        let oldWwan = try XCTUnwrap(before[name: "wwan0"])

        try f.ns.ip("link", "del", "wwan0")   // takes its peer with it
        let after = try waitForLinks(f.socket, "wwan0 and wwan0p are gone from LINKS") {
            $0[name: "wwan0"] == nil && $0[name: "wwan0p"] == nil
        }
        XCTAssertEqual(after.count, before.count - 2, "exactly the pair went: \(after.map(\.name))")
        XCTAssertEqual(try status(f.socket).links, before.count - 2, "STATUS link count")

        // Links created while the daemon runs are classified too, the config override included.
        try f.ns.ip("link", "add", "br0", "type", "bridge")
        try f.ns.addVethPair("wwan0", peer: "wwan0p")
        let again = try waitForLinks(f.socket, "br0 and the new wwan0 appear") {
            $0[name: "br0"] != nil && $0[name: "wwan0"] != nil && $0[name: "wwan0p"] != nil
        }
        XCTAssertEqual(again[name: "br0"]?.kind, "other")
        XCTAssertEqual(again[name: "br0"]?.classifiedBy, "rtnl-kind:bridge")
        let newWwan = try XCTUnwrap(again[name: "wwan0"])
        XCTAssertNotEqual(newWwan.index, oldWwan.index, "a new link has a new index")
        XCTAssertEqual(newWwan.kind, "wwan")
        XCTAssertEqual(newWwan.classifiedBy, "config:[Interface wwan0]")
        XCTAssertTrue(newWwan.metered)
        XCTAssertEqual(Set(again.map(\.name)), Set(try f.ns.kernelLinks().map(\.name)))
    }

    /// A bridge and a port added while the daemon runs: the kernel also sends AF_BRIDGE messages for them,
    /// which must not hide or misclassify either link.
    func testBridgeAndItsPortStayVisible() throws {
        let f = try makeFixture()
        try f.ns.ip("link", "add", "br0", "type", "bridge")
        try f.ns.ip("link", "add", "port0", "type", "veth", "peer", "name", "port0p")
        try f.ns.ip("link", "set", "port0", "master", "br0")
        for l in ["br0", "port0", "port0p"] { try f.ns.ip("link", "set", l, "up") }

        var lastDiff = ""
        try waitUntil("the daemon's links equal `ip -j link` with br0 and its port up", timeout: 5) {
            let kernel = try f.ns.kernelLinks()
            let view = try links(f.socket).map(\.kernelView).sorted { $0.name < $1.name }
            let portUp = kernel.first { $0.name == "port0" }.map { $0.adminUp && $0.carrier } ?? false
            lastDiff = "kernel: \(kernel)\ndaemon: \(view)"
            return (portUp && view == kernel, lastDiff)
        }
        let l = try links(f.socket)
        XCTAssertEqual(l[name: "br0"]?.kind, "other")
        // A bridge takes the kind of its ports: port0, a veth, is other.
        XCTAssertEqual(l[name: "br0"]?.classifiedBy, "ports:port0")
        XCTAssertEqual(l[name: "br0"]?.over, "port0")
        XCTAssertEqual(l[name: "port0"]?.kind, "other")
        XCTAssertEqual(l[name: "port0"]?.classifiedBy, "rtnl-kind:veth")

        try f.ns.ip("link", "del", "br0")
        let after = try waitForLinks(f.socket, "br0 is gone, its former port stays") {
            $0[name: "br0"] == nil && $0[name: "port0"] != nil
        }
        XCTAssertEqual(after[name: "port0"]?.classifiedBy, "rtnl-kind:veth")
        XCTAssertEqual(Set(after.map(\.name)), Set(try f.ns.kernelLinks().map(\.name)))
    }
}
