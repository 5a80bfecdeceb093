// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermNftables
import XCTest

/// The NFLOG messages the rules' `log group` sends (<linux/netfilter/nfnetlink_log.h>), built byte by byte: the
/// reader takes each packet's NFULA_PREFIX and nothing else.
final class NflogMessagesTests: XCTestCase {
    // (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET, and attribute numbers.
    static let packet: UInt16 = 4 << 8, config: UInt16 = 4 << 8 | 1
    static let packetHeader: UInt16 = 1, mark: UInt16 = 2, outdev: UInt16 = 5, prefix: UInt16 = 10, uid: UInt16 = 11

    private func le<T: FixedWidthInteger>(_ v: T) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }
    private func attr(_ type: UInt16, _ payload: [UInt8]) -> [UInt8] {
        var b = le(UInt16(4 + payload.count)) + le(type) + payload
        while b.count % 4 != 0 { b.append(0) }
        return b
    }
    private func message(_ type: UInt16, _ attributes: [[UInt8]]) -> [UInt8] {
        let body: [UInt8] = [2, 0, 0x6E, 0x70] + attributes.flatMap { $0 }
        return le(UInt32(16 + body.count)) + le(type) + le(UInt16(0)) + le(UInt32(0)) + le(UInt32(0)) + body
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
