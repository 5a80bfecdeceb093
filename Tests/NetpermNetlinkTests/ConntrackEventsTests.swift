// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermNftables
import TestSupport
import XCTest

/// Conntrack's events and the report's logged DNS answers (<linux/netfilter/nfnetlink_conntrack.h>,
/// nfnetlink_log.h), built byte by byte as the kernel lays them out: only tagged connections are kept, with their
/// destination, labels' class of link and bytes.
final class ConntrackEventsTests: XCTestCase {
    // (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW / DELETE; (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET.
    static let new: UInt16 = 1 << 8, delete: UInt16 = 1 << 8 | 2, logged: UInt16 = 4 << 8
    // CTA_TUPLE_ORIG, CTA_TUPLE_IP, CTA_TUPLE_PROTO, CTA_IP_V4_DST, CTA_IP_V6_DST, CTA_PROTO_NUM, CTA_PROTO_DST_PORT,
    // CTA_MARK, CTA_COUNTERS_ORIG, CTA_COUNTERS_REPLY, CTA_COUNTERS_BYTES, CTA_LABELS.
    static let tupleOrig: UInt16 = 1, tupleIP: UInt16 = 1, tupleProto: UInt16 = 2, v4Dst: UInt16 = 2, v6Dst: UInt16 = 4
    static let protoNum: UInt16 = 1, dstPort: UInt16 = 3, mark: UInt16 = 8, countersOrig: UInt16 = 9
    static let countersReply: UInt16 = 10, bytes: UInt16 = 2, labels: UInt16 = 22
    // NFULA_MARK, NFULA_PAYLOAD, NFULA_PREFIX.
    static let nfulaMark: UInt16 = 2, payload: UInt16 = 9, prefix: UInt16 = 10

    let tag: UInt32 = 0x6E80_1234

    private func attr(_ t: UInt16, _ p: [UInt8]) -> [UInt8] { NetlinkBytes.attr(t, p) }
    private func nest(_ t: UInt16, _ i: [[UInt8]]) -> [UInt8] { NetlinkBytes.nest(t, i) }
    private func be<T: FixedWidthInteger>(_ v: T) -> [UInt8] { NetlinkBytes.be(v) }

    private func event(_ type: UInt16, dst: [UInt8], port: UInt16, proto: UInt8 = 6, mark: UInt32?, labels: [UInt8]? = nil,
                       bytes: (UInt64, UInt64)? = nil) -> [UInt8] {
        let ip = nest(Self.tupleIP, [attr(dst.count == 4 ? Self.v4Dst : Self.v6Dst, dst)])
        let pr = nest(Self.tupleProto, [attr(Self.protoNum, [proto]), attr(Self.dstPort, be(port))])
        var attributes = [nest(Self.tupleOrig, [ip, pr])]
        if let mark { attributes.append(attr(Self.mark, be(mark))) }
        if let labels { attributes.append(attr(Self.labels, labels)) }
        if let bytes {
            attributes.append(nest(Self.countersOrig, [attr(Self.bytes, be(bytes.0))]))
            attributes.append(nest(Self.countersReply, [attr(Self.bytes, be(bytes.1))]))
        }
        return NetlinkBytes.message(type: type, [2, 0, 0, 0] + attributes.flatMap { $0 })
    }

    /// Labels as the kernel sends them: 16 bytes, bit N at byte N/8.
    private func labels(_ bits: [Int]) -> [UInt8] {
        var b = [UInt8](repeating: 0, count: 16)
        for n in bits { b[n / 8] |= 1 << UInt8(n % 8) }
        return b
    }

    private func sightings(_ bytes: [UInt8]) -> [ReportSighting] { bytes.withUnsafeBytes { ConntrackEvents.sightings(in: $0) } }

    func testTaggedConnectionsOnly() {
        let wwanMetered = labels(ReportLabels.bits(UsageClass(kind: .wwan, metered: true)))
        let bytes = event(Self.new, dst: [192, 0, 2, 7], port: 443, mark: tag, labels: wwanMetered)
            + event(Self.new, dst: [192, 0, 2, 8], port: 443, mark: nil)
            + event(Self.new, dst: [192, 0, 2, 9], port: 443, mark: 0x0000_0042)
            + event(Self.new, dst: [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1], port: 53, proto: 17,
                    mark: tag)
            + event(Self.delete, dst: [192, 0, 2, 7], port: 443, mark: tag, labels: wwanMetered, bytes: (1000, 24000))
        XCTAssertEqual(sightings(bytes), [
            .opened(tag: tag, address: "192.0.2.7", port: 443, proto: 6, link: ReportLink(kind: .wwan, metered: true)),
            .opened(tag: tag, address: "2001:db8::1", port: 53, proto: 17, link: nil),
            .closed(tag: tag, address: "192.0.2.7", link: ReportLink(kind: .wwan, metered: true), bytes: 25000),
        ])
    }

    func testLabelsThatSayNoOneClassAreNone() {
        XCTAssertNil(ReportLabels.link(labels([ReportLabels.kindBase, ReportLabels.kindBase + 1, ReportLabels.present])))
        XCTAssertNil(ReportLabels.link(labels([ReportLabels.kindBase])), "not marked present")
        XCTAssertNil(ReportLabels.link([]))
        for c in UsageClass.all {
            let l = ReportLabels.link(labels(ReportLabels.bits(c)))
            XCTAssertEqual(l.map { "\($0.kind.rawValue) \($0.metered) \($0.roaming)" }, "\(c.kind.rawValue) \(c.metered) \(c.roaming)")
        }
    }

    func testCutMessagesAreDropped() {
        let whole = event(Self.new, dst: [192, 0, 2, 7], port: 443, mark: tag)
        for n in 0..<whole.count { XCTAssertEqual(sightings(Array(whole.prefix(n))), [], "\(n)") }
    }

    /// A logged DNS answer is the app's whose tag its connection carries; untagged or other prefixes are dropped.
    func testLoggedAnswers() {
        var dns: [UInt8] = [0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]
        dns += [3] + Array("foo".utf8) + [7] + Array("example".utf8) + [0, 0, 1, 0, 1]
        dns += [0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 198, 51, 100, 9]
        let udp = be(UInt16(53)) + be(UInt16(40000)) + be(UInt16(8 + dns.count)) + [0, 0] + dns
        let ip: [UInt8] = [0x45, 0] + be(UInt16(20 + udp.count)) + [0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 53, 10, 0, 0, 2] + udp
        func log(_ prefix: String, mark: UInt32?) -> [UInt8] {
            var a = [attr(Self.prefix, Array(prefix.utf8) + [0]), attr(Self.payload, ip)]
            if let mark { a.append(attr(Self.nfulaMark, be(mark))) }
            return NetlinkBytes.message(type: Self.logged, [2, 0, 0x6E, 0x71] + a.flatMap { $0 })
        }
        let bytes = log("netpermd:dns", mark: tag) + log("netpermd:dns", mark: nil) + log("netpermd:dns", mark: 7)
            + log("netpermd:maps:wwan", mark: tag)
        let found = bytes.withUnsafeBytes { ReportAnswers.sightings(in: $0) }
        XCTAssertEqual(found, [.answer(tag: tag, DNSAnswer(name: "foo.example", addresses: ["198.51.100.9"]))])
    }
    /// A logged refusal (ReportRefusals): a tag's by its prefix alone, a user's unit's by the prefix's `:unit`, whose
    /// mark is its cgroup's (ReportUnits.mark) rather than a tag; hostile ones are nobody's: a mark cut short, none,
    /// 0 for a unit, a tag's prefix on a mark that is no tag, suffixes that only look like it, a cut message.
    func testLoggedRefusalsAreATagsOrAUsersUnits() {
        var syn = [UInt8](repeating: 0, count: 40)
        syn[0] = 0x45; syn[9] = 6; syn[16...19] = [198, 51, 100, 4]; syn[22] = 0x01; syn[23] = 0xBB
        // NFULA_IFINDEX_OUTDEV.
        let outdev: UInt16 = 5
        func log(_ prefix: String, mark: [UInt8]?, payload: [UInt8]? = nil) -> [UInt8] {
            var a = [attr(Self.prefix, Array(prefix.utf8) + [0]), attr(Self.payload, payload ?? syn), attr(outdev, be(UInt32(7)))]
            if let mark { a.append(attr(Self.nfulaMark, mark)) }
            return NetlinkBytes.message(type: Self.logged, [2, 0, 0x6E, 0x71] + a.flatMap { $0 })
        }
        func found(_ b: [UInt8]) -> [ReportSighting] { b.withUnsafeBytes { ReportAnswers.sightings(in: $0) } }
        let unit: UInt32 = 0x0000_2A05
        XCTAssertEqual(found(log("netpermd:refused:denied:unit", mark: be(unit))), [
            .refused(tag: 0, address: "198.51.100.4", port: 443, proto: 6, ifindex: 7, reason: .denied, unit: unit),
        ])
        XCTAssertEqual(found(log("netpermd:refused:budget", mark: be(tag))), [
            .refused(tag: tag, address: "198.51.100.4", port: 443, proto: 6, ifindex: 7, reason: .budget),
        ])
        let hostile = [
            log("netpermd:refused:denied:unit", mark: [0x2A, 0x05]), log("netpermd:refused:denied:unit", mark: nil),
            log("netpermd:refused:denied:unit", mark: be(UInt32(0))), log("netpermd:refused:denied", mark: be(unit)),
            log("netpermd:refused:denied:unit:unit", mark: be(unit)), log("netpermd:refused:denied:units", mark: be(unit)),
            log("netpermd:refused::unit", mark: be(unit)), log("netpermd:refused:unit", mark: be(unit)),
            log("netpermd:refused:denied:unit", mark: be(unit), payload: Array(syn.prefix(19))),
            log("netpermd:refused:denied:unit", mark: be(unit), payload: []),
        ]
        for (i, h) in hostile.enumerated() { XCTAssertEqual(found(h), [], "\(i)") }
        let whole = log("netpermd:refused:denied:unit", mark: be(unit))
        for n in 0..<whole.count {
            let f = found(Array(whole.prefix(n)))
            XCTAssertTrue(f.isEmpty || f == found(whole), "\(n): \(f)")
        }
    }
}
