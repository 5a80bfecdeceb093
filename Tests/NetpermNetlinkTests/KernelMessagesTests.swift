// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
@testable import NetpermNetlink
import TestSupport
import XCTest

/// The one rtnetlink parser for dumps and events, on messages built byte by byte as the kernel lays them out
/// (<linux/netlink.h>, <linux/rtnetlink.h>, <linux/if_link.h>, <linux/if_tunnel.h>).
final class KernelMessagesTests: XCTestCase {
    // Message types and attributes, by their numbers in the kernel's headers.
    static let newLink: UInt16 = 16, delLink: UInt16 = 17
    static let ifname: UInt16 = 3, link: UInt16 = 5, master: UInt16 = 10, operstate: UInt16 = 16, linkinfo: UInt16 = 18
    static let linkNetnsid: UInt16 = 37
    static let infoKind: UInt16 = 1, infoData: UInt16 = 2
    static let afBridge: UInt8 = 7
    static let nested: UInt16 = 0x8000

    private func attr(_ type: UInt16, _ payload: [UInt8]) -> [UInt8] { NetlinkBytes.attr(type, payload) }
    private func le<T: FixedWidthInteger>(_ v: T) -> [UInt8] { NetlinkBytes.le(v) }
    private func string(_ s: String) -> [UInt8] { NetlinkBytes.string(s) }

    /// RTM_NEWLINK (or `type`) for `index` with flags UP|LOWER_UP, ARPHRD ether, and `attributes`.
    private func linkMessage(_ type: UInt16 = newLink, family: UInt8 = 0, index: Int32, arphrd: UInt16 = 1,
                             _ attributes: [[UInt8]]) -> [UInt8] {
        let flags: UInt32 = 0x1 | 0x10000
        let ifinfo: [UInt8] = [family, 0] + le(arphrd) + le(index) + le(flags) + le(UInt32(0))
        return NetlinkBytes.message(type: type, sequence: 1, ifinfo + attributes.flatMap { $0 })
    }

    private func linkInfo(kind: String, data: [[UInt8]] = []) -> [UInt8] {
        var inner = attr(Self.infoKind, string(kind))
        if !data.isEmpty { inner += attr(Self.infoData | Self.nested, data.flatMap { $0 }) }
        return attr(Self.linkinfo | Self.nested, inner)
    }

    private func apply(_ tables: inout KernelTables, _ messages: [UInt8]...) -> Int {
        var bytes = messages.flatMap { $0 }
        return bytes.withUnsafeMutableBytes { tables.apply(datagram: $0) }
    }

    func testPlainLinkHasNoLowerMasterOrRemote() throws {
        var t = KernelTables()
        XCTAssertEqual(apply(&t, linkMessage(index: 2, [attr(Self.ifname, string("eth0")), attr(Self.operstate, [6])])), 1)
        let l = try XCTUnwrap(t.links[2])
        XCTAssertEqual(l.name, "eth0")
        XCTAssertEqual(l.operstate, "up")
        XCTAssertTrue(l.adminUp && l.carrier)
        XCTAssertNil(l.lowerIndex)
        XCTAssertNil(l.masterIndex)
        XCTAssertNil(l.tunnelRemote)
    }

    func testVlanLowerAndBridgePortMaster() throws {
        var t = KernelTables()
        _ = apply(&t,
                  linkMessage(index: 5, [attr(Self.ifname, string("eth0.10")), attr(Self.link, le(UInt32(2))),
                                         linkInfo(kind: "vlan", data: [attr(1, le(UInt16(10)))])]),
                  linkMessage(index: 3, [attr(Self.ifname, string("wlan0")), attr(Self.master, le(UInt32(7)))]))
        XCTAssertEqual(t.links[5]?.rtnlKind, "vlan")
        XCTAssertEqual(t.links[5]?.lowerIndex, 2)
        XCTAssertNil(t.links[5]?.tunnelRemote, "a vlan has no remote even with IFLA_INFO_DATA")
        XCTAssertEqual(t.links[3]?.masterIndex, 7)
    }

    /// IFLA_LINK naming the link itself, 0, or an index in another namespace (IFLA_LINK_NETNSID) is no lower link.
    func testLowerIgnoredWhenSelfZeroOrInAnotherNamespace() {
        var t = KernelTables()
        _ = apply(&t,
                  linkMessage(index: 4, [attr(Self.ifname, string("a")), attr(Self.link, le(UInt32(4)))]),
                  linkMessage(index: 5, [attr(Self.ifname, string("b")), attr(Self.link, le(UInt32(0)))]),
                  linkMessage(index: 6, [attr(Self.ifname, string("mv0")), attr(Self.link, le(UInt32(2))),
                                         attr(Self.linkNetnsid, le(Int32(0))), linkInfo(kind: "macvlan")]))
        XCTAssertNil(t.links[4]?.lowerIndex)
        XCTAssertNil(t.links[5]?.lowerIndex)
        XCTAssertNil(t.links[6]?.lowerIndex)
        XCTAssertEqual(t.links[6]?.rtnlKind, "macvlan")
    }

    /// A port leaving its bridge: the next RTM_NEWLINK has no IFLA_MASTER, and the link's facts follow.
    func testPortLeavingItsMaster() {
        var t = KernelTables()
        _ = apply(&t, linkMessage(index: 3, [attr(Self.ifname, string("eth0")), attr(Self.master, le(UInt32(7)))]))
        XCTAssertEqual(t.links[3]?.masterIndex, 7)
        // The bridge's own AF_BRIDGE message about its port says nothing of the link: skipped.
        XCTAssertEqual(apply(&t, linkMessage(Self.delLink, family: Self.afBridge, index: 3, [attr(Self.ifname, string("eth0"))])), 0)
        XCTAssertEqual(t.links[3]?.masterIndex, 7)
        _ = apply(&t, linkMessage(index: 3, [attr(Self.ifname, string("eth0"))]))
        XCTAssertNotNil(t.links[3])
        XCTAssertNil(t.links[3]?.masterIndex)
    }

    func testTunnelRemotes() {
        var t = KernelTables()
        let v4: [UInt8] = [192, 0, 2, 1]
        let v6: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [7]
        _ = apply(&t,
                  // ipip: IFLA_IPTUN_LOCAL (2) then IFLA_IPTUN_REMOTE (3)
                  linkMessage(index: 10, arphrd: 768, [attr(Self.ifname, string("ipip1")),
                      linkInfo(kind: "ipip", data: [attr(2, [10, 0, 0, 1]), attr(3, v4)])]),
                  // gre: IFLA_GRE_LOCAL (6), IFLA_GRE_REMOTE (7)
                  linkMessage(index: 11, arphrd: 778, [attr(Self.ifname, string("gre1")),
                      linkInfo(kind: "gre", data: [attr(6, [10, 0, 0, 1]), attr(7, v4)])]),
                  // ip6tnl: IFLA_IPTUN_REMOTE, 16 bytes
                  linkMessage(index: 12, arphrd: 769, [attr(Self.ifname, string("ip6tnl1")),
                      linkInfo(kind: "ip6tnl", data: [attr(3, v6)])]),
                  // vti: IFLA_VTI_REMOTE (5)
                  linkMessage(index: 13, arphrd: 768, [attr(Self.ifname, string("vti1")),
                      linkInfo(kind: "vti", data: [attr(4, [10, 0, 0, 1]), attr(5, v4)])]),
                  // a wildcard remote (any) names no endpoint
                  linkMessage(index: 14, arphrd: 768, [attr(Self.ifname, string("ipip2")),
                      linkInfo(kind: "ipip", data: [attr(3, [0, 0, 0, 0])])]),
                  // tun: no remote the kernel knows
                  linkMessage(index: 15, arphrd: 65534, [attr(Self.ifname, string("tun0")), linkInfo(kind: "tun")]),
                  // a tunnel bound to a device: IFLA_LINK
                  linkMessage(index: 16, arphrd: 768, [attr(Self.ifname, string("ipip3")), attr(Self.link, le(UInt32(2))),
                      linkInfo(kind: "ipip", data: [attr(1, le(UInt32(2))), attr(3, v4)])]))
        XCTAssertEqual(t.links[10]?.tunnelRemote, v4)
        XCTAssertEqual(t.links[11]?.tunnelRemote, v4)
        XCTAssertEqual(t.links[12]?.tunnelRemote, v6)
        XCTAssertEqual(t.links[13]?.tunnelRemote, v4)
        XCTAssertNil(t.links[14]?.tunnelRemote)
        XCTAssertNil(t.links[15]?.tunnelRemote)
        XCTAssertEqual(t.links[15].map(Stacking.needsHostRoutes), true)
        XCTAssertEqual(t.links[16]?.tunnelRemote, v4)
        XCTAssertEqual(t.links[16]?.lowerIndex, 2)
    }

    func testDeletedLinkIsGone() {
        var t = KernelTables()
        _ = apply(&t, linkMessage(index: 5, [attr(Self.ifname, string("x")), attr(Self.master, le(UInt32(7)))]))
        XCTAssertEqual(apply(&t, linkMessage(Self.delLink, index: 5, [attr(Self.ifname, string("x"))])), 1)
        XCTAssertNil(t.links[5])
    }

    func testAddressText() {
        XCTAssertEqual(KernelTables.text([192, 0, 2, 7], .ipv4), "192.0.2.7")
        XCTAssertEqual(KernelTables.text([0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [7], .ipv6),
                       "2001:db8::7")
    }
}
