// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import XCTest

/// The one netlink layer: requests laid out as the kernel reads them (host byte order, 4-byte padding), messages
/// and attributes walked without reading past a malformed one, and answers taken only if they carry the request's
/// sequence and the socket's port.
final class NetlinkLayerTests: XCTestCase {
    private func host<T: FixedWidthInteger>(_ v: T) -> [UInt8] { withUnsafeBytes(of: v) { Array($0) } }

    func testARequestIsLaidOutInHostOrderAndPadded() {
        var r = NetlinkRequest(type: 0x1234, flags: Netlink.flagAck)
        r.append(header: [1, 2, 3])
        r.append(header: UInt32(0x0A0B_0C0D))
        r.attribute(5, u32: 0x0102_0304)
        r.attribute(6, bytes: [9])
        r.attribute(7, bigEndianU32: 1)
        r.attribute(8, string: "ab")
        let m = r.message(sequence: 7, port: 99)
        let expected = host(UInt32(56)) + host(UInt16(0x1234)) + host(UInt16(Netlink.flagAck | Netlink.flagRequest))
            + host(UInt32(7)) + host(UInt32(99)) + [1, 2, 3, 0] + host(UInt32(0x0A0B_0C0D))
            + host(UInt16(8)) + host(UInt16(5)) + host(UInt32(0x0102_0304))
            + host(UInt16(5)) + host(UInt16(6)) + [9, 0, 0, 0]
            + host(UInt16(8)) + host(UInt16(7)) + [0, 0, 0, 1]
            + host(UInt16(7)) + host(UInt16(8)) + [0x61, 0x62, 0, 0]
        XCTAssertEqual(m, expected)
    }

    func testMessagesAndAttributesAreWalkedUpToAMalformedOne() throws {
        var a = NetlinkRequest(type: 16, flags: 0)
        a.append(header: UInt32(0))
        a.attribute(3 | 0x8000, u32: 42)   // NLA_F_NESTED is not part of the type
        a.attribute(4, string: "eth0")
        var b = NetlinkRequest(type: 17, flags: 0)
        b.attribute(1, bytes: [])
        let both = a.message(sequence: 1, port: 2) + b.message(sequence: 3, port: 4)
        both.withUnsafeBytes { buf in
            let ms = Array(NetlinkMessages(buf))
            XCTAssertEqual(ms.map(\.type), [16, 17])
            XCTAssertEqual(ms.map(\.sequence), [1, 3])
            XCTAssertEqual(ms.map(\.port), [2, 4])
            let attrs = Array(ms[0].attributes(after: 4))
            XCTAssertEqual(attrs.map(\.type), [3, 4])
            XCTAssertEqual(Netlink.u32(attrs[0].payload), 42)
            XCTAssertEqual(Netlink.string(attrs[1].payload), "eth0")
            XCTAssertEqual(ms[0].attributes(after: 4).first(4).map(Netlink.string), "eth0")
        }
        // Cut anywhere inside the second message: the first still comes, then the walk ends.
        for cut in (both.count - 7)..<both.count {
            Array(both.prefix(cut)).withUnsafeBytes { buf in
                var walk = NetlinkMessages(buf)
                XCTAssertEqual(walk.next()?.type, 16)
                XCTAssertNil(walk.next())
                XCTAssertTrue(walk.malformed, "cut at \(cut)")
            }
        }
        // An attribute claiming more than its message holds ends the attributes.
        var bad = a.message(sequence: 1, port: 2)
        bad[20] = 200
        bad.withUnsafeBytes { buf in
            var attrs = NetlinkMessages(buf).first { _ in true }!.attributes(after: 4)
            XCTAssertNil(attrs.next())
            XCTAssertTrue(attrs.malformed)
        }
    }

    func testAnErrorMessageSaysItsErrno() {
        var e = NetlinkRequest(type: Netlink.typeError, flags: 0)
        // struct nlmsgerr: the negative errno, then the request's header.
        e.append(header: Int32(-ENOENT))
        e.append(header: [UInt8](repeating: 0, count: 16))
        let bytes = e.message(sequence: 1, port: 0)
        bytes.withUnsafeBytes { XCTAssertEqual(NetlinkMessages($0).first { _ in true }?.errorCode, ENOENT) }
    }

    /// rtnetlink, in this process's namespace, read only: an answer to an earlier request still queued on the
    /// socket (loopback's link) is not taken for the answer to the next one (a link that does not exist).
    func testOnlyTheAnswerToThisRequestIsTaken() throws {
        let s = try NetlinkSocket(protocol: 0)   // NETLINK_ROUTE
        XCTAssertNotEqual(s.port, 0, "bound by the kernel")
        // RTM_GETLINK (18) with an ifinfomsg (16 bytes) naming ifindex 1, loopback, which every namespace has.
        func getLink(_ index: Int32) -> NetlinkRequest {
            var r = NetlinkRequest(type: 18, flags: 0)
            r.append(header: [UInt8](repeating: 0, count: 4) + host(index) + [UInt8](repeating: 0, count: 8))
            return r
        }
        let early = getLink(1).message(sequence: 4242, port: s.port)
        XCTAssertEqual(early.withUnsafeBytes { send(s.fd, $0.baseAddress, $0.count, 0) }, early.count)
        var seen: [UInt16] = []
        XCTAssertThrowsError(try s.request(getLink(0x7FFF_FFF0)) { seen.append($0.type); return .done }) {
            XCTAssertEqual($0 as? NetlinkFailure, .kernel(Errno(ENODEV)))
        }
        XCTAssertEqual(seen, [], "loopback's answer was the earlier request's")
        var answered: [(type: UInt16, port: UInt32)] = []
        try s.request(getLink(1)) { answered.append(($0.type, $0.port)); return .done }
        XCTAssertEqual(answered.map(\.type), [16], "RTM_NEWLINK")
        XCTAssertEqual(answered.map(\.port), [s.port])
    }
}
