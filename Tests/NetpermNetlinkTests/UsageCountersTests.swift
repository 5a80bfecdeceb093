// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermNftables
import TestSupport
import XCTest

/// The usage table's objects as the kernel dumps them (NFT_MSG_NEWOBJ, numbers written here as
/// <linux/netfilter/nf_tables.h> has them): a quota's name is decoded once, into a QuotaName, and an object that is
/// no quota of ours is dropped there.
final class UsageCountersTests: XCTestCase {
    private func be<T: FixedWidthInteger>(_ v: T) -> [UInt8] { NetlinkBytes.be(v) }
    private func attr(_ type: UInt16, _ payload: [UInt8]) -> [UInt8] { NetlinkBytes.attr(type, payload) }
    private func nest(_ type: UInt16, _ inner: [[UInt8]]) -> [UInt8] { NetlinkBytes.nest(type, inner) }

    /// nfgenmsg (inet), then NFTA_OBJ_TABLE, NAME, TYPE and DATA.
    private func object(_ name: String, type: UInt32, _ data: [[UInt8]]) -> UsageCounters.Object? {
        let msg = [1, 0, 0, 0] + attr(1, NetlinkBytes.string("netpermd_usage")) + attr(2, NetlinkBytes.string(name))
            + attr(3, be(type)) + nest(4, data)
        return msg.withUnsafeBytes { UsageCounters.object($0) }
    }

    /// NFTA_QUOTA_BYTES, FLAGS, CONSUMED.
    private func quota(_ name: String, over: UInt64, consumed: UInt64, depleted: Bool = false) -> UsageCounters.Object? {
        object(name, type: 2, [attr(1, be(over)), attr(2, be(UInt32(depleted ? 2 : 0))), attr(4, be(consumed))])
    }

    private func decoded(_ o: UsageCounters.Object?) -> (QuotaName, Bool, UInt64)? {
        guard case let .quota(q, depleted, consumed)? = o else { return nil }
        return (q, depleted, consumed)
    }

    func testABudgetsQuotaAndItsWarning() throws {
        let b = try XCTUnwrap(decoded(quota("b_6e800001", over: 1_048_576, consumed: 1000)))
        XCTAssertEqual(b.0, QuotaName(tag: 0x6E80_0001))
        XCTAssertEqual(b.1, false)
        XCTAssertEqual(b.2, 1000)
        let w = try XCTUnwrap(decoded(quota("w_6e800001", over: 838_861, consumed: 838_861)))
        XCTAssertEqual(w.0, QuotaName(tag: 0x6E80_0001, warning: true))
        XCTAssertEqual(w.1, true, "consumed its all")
        XCTAssertEqual(decoded(quota("b_0000002a", over: 10, consumed: 0, depleted: true))?.1, true, "the kernel's flag")
    }

    func testQuotasNotOursAreDropped() {
        for name in ["other", "b_2a", "b_6E800001", "x_6e800001", "b_6e8000011", "b-6e800001", "b_6e80000g", "b_+e800001"] {
            XCTAssertNil(quota(name, over: 10, consumed: 0), name)
        }
    }

    func testANamedCounterIsStillACounter() {
        guard case let .counter(name, c)? = object("untracked_sent_wifi", type: 1, [attr(1, be(UInt64(1500))),
                                                                                      attr(2, be(UInt64(3)))]) else {
            return XCTFail("not a counter")
        }
        XCTAssertEqual(name, "untracked_sent_wifi")
        XCTAssertEqual(c, UsageCounter(bytes: 1500, packets: 3))
    }

    /// The name is the rendering: what the rules write is what the edge reads back.
    func testQuotaNameRoundTrips() {
        for q in [QuotaName(tag: 0), QuotaName(tag: 0x6E80_0001, warning: true), QuotaName(tag: .max)] {
            XCTAssertEqual(QuotaName(nft: q.nft), q)
        }
        XCTAssertEqual(QuotaName(tag: 0x2A).nft, "b_0000002a")
        XCTAssertEqual(QuotaName(tag: 0xABCDEF01, warning: true).nft, "w_abcdef01")
        XCTAssertEqual("\(QuotaName(tag: 1))", "b_00000001")
        // Names' order: the scripts delete quotas in it.
        let names = [QuotaName(tag: 2, warning: true), QuotaName(tag: 0xA), QuotaName(tag: 1, warning: true), QuotaName(tag: 3)]
        XCTAssertEqual(names.sorted().map(\.nft), names.map(\.nft).sorted())
    }

    /// One NFT_MSG_NEWSETELEM of a dynamic set with timeouts and counters: nfgenmsg, then the table, the set and the
    /// elements (each: its key, its timeout and expiration, its counter among its expressions).
    private func setElements(_ keys: [[UInt8]], bytes: UInt64, packets: UInt64) -> [UInt8] {
        let counter = nest(1, [attr(1, NetlinkBytes.string("counter")), nest(2, [attr(1, be(bytes)), attr(2, be(packets))])])
        return [1, 0, 0, 0] + attr(1, NetlinkBytes.string("netpermd_usage")) + attr(2, NetlinkBytes.string("user_sent_wifi"))
            + nest(3, keys.map { key in
                nest(1, [nest(1, [attr(1, key)]), attr(4, be(UInt64(259_200_000))), attr(5, be(UInt64(259_199_000))),
                         nest(11, [counter])])
            })
    }

    /// Issue 47: a user's unit's counter is keyed by its cgroup's id (8 bytes, host order, as `socket cgroupv2` gives
    /// it); a key of another size is no such element, and the marks' reader drops an 8-byte key likewise.
    func testAUsersUnitsCountersAreKeyedByTheirCgroup() {
        let id: UInt64 = 0x0000_0001_0000_2A2B
        let msg = setElements([withUnsafeBytes(of: id) { Array($0) }, [1, 2, 3, 4]], bytes: 52_000, packets: 60)
        let units = msg.withUnsafeBytes { UsageCounters.unitElements($0) }
        XCTAssertEqual(units.map(\.cgroup), [id])
        XCTAssertEqual(units.first?.counter, UsageCounter(bytes: 52_000, packets: 60))
        let marks = msg.withUnsafeBytes { UsageCounters.elements($0) }
        XCTAssertEqual(marks.map(\.mark), [0x0403_0201], "only the 4-byte key is a mark")
    }
}
