// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
@testable import NetpermNetlink
import NetpermProtocol
import TestSupport
import XCTest

/// nl80211's messages as the kernel sends them, built byte by byte from the layout in <linux/netlink.h>,
/// <linux/genetlink.h> and <linux/nl80211.h> (host byte order: little-endian on these machines). The numbers are
/// written out here, not taken from the header, so a wrong constant in the parser shows.
final class Nl80211MessagesTests: XCTestCase {
    /// The family id the generic-netlink controller gave nl80211 on some machine (it varies; 0x1c is typical).
    private let family: UInt16 = 0x1C

    private func le16(_ v: UInt16) -> [UInt8] { NetlinkBytes.le(v) }
    private func le32(_ v: UInt32) -> [UInt8] { NetlinkBytes.le(v) }

    private func attr(_ type: UInt16, _ payload: [UInt8], nested: Bool = false) -> [UInt8] {
        NetlinkBytes.attr(type | (nested ? NetlinkBytes.nested : 0), payload)
    }

    /// The message of the family (NLM_F_MULTI, sequence 7), then struct genlmsghdr { u8 cmd; u8 version; u16
    /// reserved }, then the attributes.
    private func message(type: UInt16? = nil, cmd: UInt8, _ attrs: [[UInt8]]) -> [UInt8] {
        NetlinkBytes.message(type: type ?? family, flags: 0x2, sequence: 7, [cmd, 1, 0, 0] + attrs.flatMap { $0 })
    }

    // Commands: NEW_INTERFACE 7, NEW_SCAN_RESULTS 34, CONNECT 46, ROAM 47, DISCONNECT 48.
    // Attributes: IFINDEX 3 (u32), IFNAME 4 (string), IFTYPE 5 (u32: STATION 2, AP 3), MAC 6, SSID 52, BSS 47
    // (nested: BSSID 1, STATUS 9 (u32: AUTHENTICATED 0, ASSOCIATED 1, IBSS_JOINED 2)), WIPHY 1 (u32).

    /// The answer to NL80211_CMD_GET_INTERFACE for a station associated to "HomeNet": ifindex 3, wlan0.
    private var associatedStation: [UInt8] {
        message(cmd: 7, [attr(3, le32(3)), attr(4, Array("wlan0".utf8) + [0]), attr(1, le32(0)), attr(5, le32(2)),
                         attr(6, [0x02, 0x11, 0x22, 0x33, 0x44, 0x55]), attr(52, Array("HomeNet".utf8))])
    }

    func testInterfaceWithSSID() throws {
        let ms = Nl80211.messages(in: associatedStation, family: family)
        XCTAssertEqual(ms.count, 1)
        let i = try XCTUnwrap(Nl80211.interface(ms[0]))
        XCTAssertEqual(i.index, 3)
        XCTAssertEqual(i.ssid, Array("HomeNet".utf8))
    }

    /// Not associated: no SSID attribute. An AP's SSID is the one it serves: not reported as its network.
    func testInterfaceWithoutNetwork() throws {
        let idle = message(cmd: 7, [attr(3, le32(4)), attr(5, le32(2))])
        XCTAssertEqual(Nl80211.messages(in: idle, family: family).compactMap(Nl80211.interface).first?.index, 4)
        XCTAssertNil(Nl80211.messages(in: idle, family: family).compactMap(Nl80211.interface).first?.ssid)
        let ap = message(cmd: 7, [attr(3, le32(5)), attr(5, le32(3)), attr(52, Array("MyHotspot".utf8))])
        let a = try XCTUnwrap(Nl80211.messages(in: ap, family: family).compactMap(Nl80211.interface).first)
        XCTAssertEqual(a.index, 5)
        XCTAssertNil(a.ssid)
    }

    /// An SSID is arbitrary bytes, up to 32: kept as bytes (a 33-byte one is not an SSID).
    func testSSIDBytes() {
        let odd: [UInt8] = [0xFF, 0x00, 0x1B, 0x41]
        let m = message(cmd: 7, [attr(3, le32(3)), attr(5, le32(2)), attr(52, odd)])
        XCTAssertEqual(Nl80211.messages(in: m, family: family).compactMap(Nl80211.interface).first?.ssid, odd)
        XCTAssertEqual(SafeText.escape(utf8: odd), "\\xff\\x00\\x1bA")
        let long = message(cmd: 7, [attr(3, le32(3)), attr(5, le32(2)), attr(52, [UInt8](repeating: 0x41, count: 33))])
        XCTAssertNil(Nl80211.messages(in: long, family: family).compactMap(Nl80211.interface).first?.ssid)
    }

    /// A dump's datagram holds several messages, then NLMSG_DONE (type 3); other families are skipped.
    func testSeveralMessagesAndDone() {
        let second = message(cmd: 7, [attr(3, le32(9)), attr(5, le32(2))])
        let other = message(type: 0x10, cmd: 7, [attr(3, le32(11))])
        var done = le32(20) + le16(3)
        done += le16(0x2) + le32(7)
        done += le32(0) + le32(0) // pid, then the dump's int error
        let ms = Nl80211.messages(in: associatedStation + second + other + done, family: family)
        XCTAssertEqual(ms.compactMap(Nl80211.interface).map(\.index), [3, 9])
    }

    /// Scan entries: only the associated (or IBSS-joined) BSS is the link's, as `iw link` decides.
    func testAssociatedBSS() throws {
        func entry(status: UInt32?, bssid: [UInt8] = [0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0x0E]) -> [UInt8] {
            var bss = attr(1, bssid) + attr(2, le32(2412)) // BSSID, then FREQUENCY (2)
            if let status { bss += attr(9, le32(status)) }
            return message(cmd: 34, [attr(46, le32(17)) /* GENERATION */, attr(3, le32(3)), attr(47, bss, nested: true)])
        }
        let assoc = try XCTUnwrap(Nl80211.messages(in: entry(status: 1), family: family).compactMap(Nl80211.associatedBSS).first)
        XCTAssertEqual(assoc.index, 3)
        XCTAssertEqual(assoc.bssid, "02:aa:bb:cc:dd:0e")
        XCTAssertEqual(Nl80211.messages(in: entry(status: 2), family: family).compactMap(Nl80211.associatedBSS).count, 1)
        XCTAssertTrue(Nl80211.messages(in: entry(status: 0), family: family).compactMap(Nl80211.associatedBSS).isEmpty,
                      "authenticated only")
        XCTAssertTrue(Nl80211.messages(in: entry(status: nil), family: family).compactMap(Nl80211.associatedBSS).isEmpty,
                      "another BSS seen in the scan")
        XCTAssertTrue(Nl80211.messages(in: entry(status: 1, bssid: [1, 2, 3]), family: family)
            .compactMap(Nl80211.associatedBSS).isEmpty, "not a MAC address")
    }

    /// mlme events that may change a link's network, and one that does not (NL80211_CMD_FRAME_TX_STATUS, 60).
    func testAssociationEvents() {
        for cmd: UInt8 in [46, 47, 48, 38, 39, 40, 7, 8] {
            let m = Nl80211.messages(in: message(cmd: cmd, [attr(3, le32(3))]), family: family)
            XCTAssertTrue(m.contains { Nl80211.associationCommands.contains($0.command) }, "command \(cmd)")
        }
        let tx = Nl80211.messages(in: message(cmd: 60, [attr(3, le32(3))]), family: family)
        XCTAssertFalse(tx.contains { Nl80211.associationCommands.contains($0.command) })
    }

    /// Truncated or lying lengths never read past the bytes: the walk stops.
    func testMalformed() {
        var m = associatedStation
        XCTAssertTrue(Nl80211.messages(in: Array(m.prefix(30)), family: family).isEmpty, "message longer than the datagram")
        m[20] = 0xFF // the first attribute claims 255 bytes
        XCTAssertTrue(Nl80211.messages(in: m, family: family).isEmpty)
        XCTAssertNil(Nl80211.attributes([3, 0, 1, 0][...]), "an attribute shorter than its header")
        XCTAssertEqual(Nl80211.messages(in: [], family: family), [])
    }
}
