// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermNftables
import TestSupport
import XCTest

/// The NFLOG messages the rules' `log group` sends (<linux/netfilter/nfnetlink_log.h>), built byte by byte: the
/// reader takes each packet's NFULA_PREFIX, its socket's uid, its output interface and where it was going.
final class NflogMessagesTests: XCTestCase {
    // (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET, and attribute numbers.
    static let packet: UInt16 = 4 << 8, config: UInt16 = 4 << 8 | 1
    static let packetHeader: UInt16 = 1, mark: UInt16 = 2, outdev: UInt16 = 5, prefix: UInt16 = 10, uid: UInt16 = 11

    private func le<T: FixedWidthInteger>(_ v: T) -> [UInt8] { NetlinkBytes.le(v) }
    private func attr(_ type: UInt16, _ payload: [UInt8]) -> [UInt8] { NetlinkBytes.attr(type, payload) }
    /// nfgenmsg: AF_INET, version 0, the group in big-endian (28272).
    private func message(_ type: UInt16, _ attributes: [[UInt8]]) -> [UInt8] {
        NetlinkBytes.message(type: type, [2, 0, 0x6E, 0x70] + attributes.flatMap { $0 })
    }
    private func packets(_ bytes: [UInt8]) -> [NflogReader.Packet] { bytes.withUnsafeBytes { NflogReader.packets(in: $0) } }
    private func prefixes(_ bytes: [UInt8]) -> [String] { packets(bytes).map(\.prefix) }

    func testPrefixOfEachPacket() {
        let a = message(Self.packet, [attr(Self.packetHeader, [0x08, 0x00, 3, 0]), attr(Self.mark, [0, 0, 0, 7]),
                                      attr(Self.prefix, Array("netpermd:maps:wwan".utf8) + [0])])
        let b = message(Self.packet, [attr(Self.prefix, Array("netpermd:nav:wifi".utf8) + [0])])
        XCTAssertEqual(prefixes(a + b), ["netpermd:maps:wwan", "netpermd:nav:wifi"])
    }

    /// The socket's owner and the output interface, big-endian, wherever they come among the attributes.
    func testUidAndOutputInterface() {
        let a = message(Self.packet, [attr(Self.uid, [0, 0, 0x03, 0xE8]), attr(Self.prefix, Array("netpermd:maps:wwan".utf8) + [0]),
                                      attr(Self.outdev, [0, 0, 0, 7])])
        let b = message(Self.packet, [attr(Self.prefix, Array("netpermd:nav:wifi".utf8) + [0])])
        XCTAssertEqual(packets(a + b), [NflogReader.Packet(prefix: "netpermd:maps:wwan", uid: 1000, outIndex: 7),
                                        NflogReader.Packet(prefix: "netpermd:nav:wifi")])
    }

    /// Where the packet was going, from its first bytes (NFULA_PAYLOAD): the prompt says it (issue 36, 13).
    func testDestination() {
        var v4 = [UInt8](repeating: 0, count: 24)
        v4[0] = 0x45; v4[9] = 6
        v4[16...19] = [203, 0, 113, 5]
        v4[22] = 0x01; v4[23] = 0xBB
        XCTAssertEqual(NflogReader.destination(v4), "203.0.113.5:443")
        var icmp = v4
        icmp[9] = 1
        XCTAssertEqual(NflogReader.destination(icmp), "203.0.113.5", "no port")
        var v6 = [UInt8](repeating: 0, count: 44)
        v6[0] = 0x60; v6[6] = 17
        v6[24] = 0x20; v6[25] = 0x01; v6[26] = 0x0D; v6[27] = 0xB8; v6[39] = 1
        v6[42] = 0; v6[43] = 53
        XCTAssertEqual(NflogReader.destination(v6), "[2001:db8::1]:53")
        XCTAssertNil(NflogReader.destination(Array(v6.prefix(39))), "too short")
        XCTAssertEqual(NflogReader.destination(Array(v4.prefix(21))), "203.0.113.5", "ports cut off")
        XCTAssertNil(NflogReader.destination([]))
        XCTAssertNil(NflogReader.destination([0x50]))
        let payload: UInt16 = 9
        let m = message(Self.packet, [attr(Self.prefix, Array("netpermd:maps:wwan".utf8) + [0]), attr(payload, v4)])
        XCTAssertEqual(packets(m).first?.destination, "203.0.113.5:443")
        XCTAssertFalse(packets(m).first?.answersIncoming ?? true)
        // A SYN-ACK (a server's answer to a connection from elsewhere): flags at the TCP header's 14th byte.
        var synAck = v4 + [UInt8](repeating: 0, count: 14)
        synAck[20 + 13] = 0x12
        XCTAssertTrue(NflogReader.isSynAck(synAck))
        synAck[20 + 13] = 0x02
        XCTAssertFalse(NflogReader.isSynAck(synAck), "a SYN is the app reaching out")
        XCTAssertFalse(NflogReader.isSynAck(Array(synAck.prefix(33))), "flags cut off")
    }

    /// Not a packet, no prefix, a truncated message or attribute: nothing, and no read past the end.
    func testOthersAndTruncatedAreSkipped() {
        let noPrefix = message(Self.packet, [attr(Self.mark, [0, 0, 0, 7])])
        let other = message(Self.config, [attr(Self.prefix, Array("netpermd:x:wwan".utf8) + [0])])
        XCTAssertEqual(prefixes(noPrefix + other), [])
        let full = message(Self.packet, [attr(Self.prefix, Array("netpermd:maps:wwan".utf8) + [0])])
        for cut in 1..<full.count { XCTAssertEqual(prefixes(Array(full.prefix(cut))), [], "cut at \(cut)") }
        var badAttr = full
        badAttr[20] = 200 // the prefix attribute claims more than the message holds
        XCTAssertEqual(prefixes(badAttr), [])
        XCTAssertEqual(prefixes([]), [])
    }
}
