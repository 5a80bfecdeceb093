// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermIO
import NetpermNftables
import TestSupport
import XCTest

/// The nfnetlink batch `NftablesElements` sends for element changes, byte for byte as <linux/netfilter/nf_tables.h>
/// lays it out (numbers written here, not taken from the header): begin, one message per command, end; keys as nft
/// lays them out for the map's type, verdicts as big-endian codes with their chain.
final class NftablesElementsTests: XCTestCase {
    private func le<T: FixedWidthInteger>(_ v: T) -> [UInt8] { NetlinkBytes.le(v) }
    private func be<T: FixedWidthInteger>(_ v: T) -> [UInt8] { NetlinkBytes.be(v) }
    private func attr(_ type: UInt16, _ payload: [UInt8]) -> [UInt8] { NetlinkBytes.attr(type, payload) }
    private func nest(_ type: UInt16, _ inner: [[UInt8]]) -> [UInt8] { NetlinkBytes.nest(type, inner) }
    private func text(_ s: String) -> [UInt8] { NetlinkBytes.string(s) }
    /// nlmsghdr with length, sequence and port 0 (NetlinkSocket fills them in), then nfgenmsg.
    private func message(_ type: UInt16, flags: UInt16, family: UInt8, resID: [UInt8] = [0, 0], _ attributes: [[UInt8]]) -> [UInt8] {
        NetlinkBytes.message(type: type, flags: flags | 1, [family, 0] + resID + attributes.flatMap { $0 })
    }
    private func sent(_ r: NetlinkRequest) -> [UInt8] { r.message(sequence: 0, port: 0) }

    func testABatchOfElementChangesAndAChainDeletion() throws {
        let changes = ElementChanges(commands: [
            .flush(map: "links"),
            .add(map: "links", elements: [.init(key: .ifname("wwan0"), value: .goto("kind_wwan"))]),
            .delete(map: "unit2_wifi", keys: [.cgroup("unified/a.service")]),
            .add(map: "uid_wwan", elements: [.init(key: .number(1000), value: .accept), .init(key: .number(1001), value: .pass)]),
            .add(map: "tag_uid", elements: [.init(key: .number(1000), value: .mark(0x6E80_0001))]),
            .deleteChain("ask_00000001_wwan"),
        ])
        let batch = try XCTUnwrap(try NftablesElements.batch(changes, cgroupID: { path throws(Errno) in
            XCTAssertEqual(path, "unified/a.service")
            return 0x0102_0304_0506_0708
        }))
        let inet: UInt8 = 1, ack: UInt16 = 4, create: UInt16 = 0x400
        let newElem: UInt16 = 10 << 8 | 12, delElem: UInt16 = 10 << 8 | 14, delChain: UInt16 = 10 << 8 | 5
        let table = attr(1, text("netpermd"))
        func verdict(_ code: Int32, _ chain: String? = nil) -> [UInt8] {
            nest(2, [nest(2, [attr(1, be(UInt32(bitPattern: code)))] + (chain.map { [attr(2, text($0))] } ?? []))])
        }
        func key(_ bytes: [UInt8]) -> [UInt8] { nest(1, [attr(1, bytes)]) }
        let expected: [[UInt8]] = [
            message(0x10, flags: 0, family: 0, resID: [0, 10], []),
            message(delElem, flags: ack, family: inet, [table, attr(2, text("links"))]),
            message(newElem, flags: ack | create, family: inet, [table, attr(2, text("links")), nest(3, [
                nest(1, [key(Array("wwan0".utf8) + [UInt8](repeating: 0, count: 11)), verdict(-4, "kind_wwan")])])]),
            message(delElem, flags: ack, family: inet, [table, attr(2, text("unit2_wifi")), nest(3, [
                nest(1, [key(le(UInt64(0x0102_0304_0506_0708)))])])]),
            message(newElem, flags: ack | create, family: inet, [table, attr(2, text("uid_wwan")), nest(3, [
                nest(1, [key(le(UInt32(1000))), verdict(1)]), nest(1, [key(le(UInt32(1001))), verdict(-5)])])]),
            message(newElem, flags: ack | create, family: inet, [table, attr(2, text("tag_uid")), nest(3, [
                nest(1, [key(le(UInt32(1000))), nest(2, [attr(1, le(UInt32(0x6E80_0001)))])])])]),
            message(delChain, flags: ack, family: inet, [attr(1, text("netpermd")), attr(3, text("ask_00000001_wwan"))]),
            message(0x11, flags: 0, family: 0, resID: [0, 10], []),
        ]
        XCTAssertEqual(batch.count, expected.count)
        for (i, (got, want)) in zip(batch.map(sent), expected).enumerated() { XCTAssertEqual(got, want, "message \(i)") }
    }

    /// A cgroup whose path no longer resolves is refused as the kernel would refuse it; a change too large for one
    /// datagram is left to libnftables.
    func testAGoneCgroupAndATooLargeChange() throws {
        let gone = ElementChanges(commands: [.delete(map: "unit2_wifi", keys: [.cgroup("unified/gone.service")])])
        XCTAssertThrowsError(try NftablesElements.batch(gone, cgroupID: { _ throws(Errno) in throw Errno(ENOENT) }))
        let many = ElementChanges(commands: [.add(map: "uid_wwan", elements: (0..<2000).map {
            .init(key: .number(UInt32($0)), value: .goto("deny"))
        })])
        XCTAssertNil(try NftablesElements.batch(many))
    }
}
