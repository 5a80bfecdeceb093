// SPDX-License-Identifier: LGPL-2.1-or-later
import CNftables
import Glibc
import NetpermCore
import NetpermIO

/// Reads the usage table's counters (UsageRules) over netfilter netlink, without libnftables: each counting set's
/// elements with their counters (`NFT_MSG_GETSETELEM` dumps), the named counters and quota objects
/// (`NFT_MSG_GETOBJ`), and the table's handle, which with the boot and the network namespace names this table among
/// all that ever were (UsageReading.instance). Read, never reset: nft 1.0.6 cannot reset one element, and the
/// daemon keeps totals from the growth since the last reading.
public enum UsageCounters {
    /// nil when there is no usage table.
    public static func read() throws(Errno) -> UsageReading? {
        let family = UInt8(NFPROTO_INET)
        let table = Array(UsageRules.table.utf8) + [0]
        let handle: UInt64
        switch try NftablesRequest.ask(NFT_MSG_GETTABLE.rawValue, family: family,
                                       attributes: [(UInt16(NFTA_TABLE_NAME.rawValue), table)]) {
        case let .failure(e): if e.code == ENOENT { return nil } else { throw e }
        case let .success(answers):
            guard let h = answers.lazy.compactMap({ a in a.message.withUnsafeBytes {
                NftablesRequest.attributeBytes($0, UInt16(NFTA_TABLE_HANDLE.rawValue)).flatMap(Self.be64)
            } }).first else { throw Errno(EPROTO) }
            handle = h
        }
        var reading = UsageReading(instance: "\(try Self.bootID()):\(try BPFSyscall.netnsCookie()):\(handle)")
        // The quota objects first, the counting sets after: a quota read as used up was counted by the sets before
        // they are read, so a reading that says "used up" has the bytes that used it (read the other way round,
        // a busy machine showed a budget used up with 855 KB of 1 MiB counted).
        let objects = try NftablesRequest.ask(NFT_MSG_GETOBJ.rawValue, family: family, attributes: [
            (UInt16(NFTA_OBJ_TABLE.rawValue), table),
        ], dump: true).get()
        for a in objects where a.type == NFT_MSG_NEWOBJ.rawValue {
            guard let o = a.message.withUnsafeBytes({ Self.object($0) }) else { continue }
            switch o {
            case let .counter(name, counter):
                guard let key = Self.untrackedKey(name) else { continue }
                reading.counters[key] = counter
            case let .quota(q, depleted, consumed):
                reading.quotas[q] = depleted
                reading.quotaUsed[q] = consumed
            }
        }
        for d in UsageDirection.allCases {
            for c in UsageClass.all {
                for m in try Self.dump(UsageRules.setName(d, c), table: table) {
                    m.withUnsafeBytes { m in
                        for e in Self.elements(m) { reading.counters[UsageKey(d, c, mark: e.mark)] = e.counter }
                    }
                }
                // Users' units' sets (a table an older daemon made has none: nothing to read there).
                for m in try Self.dump(UsageRules.unitSetName(d, c), table: table, absentIsEmpty: true) {
                    m.withUnsafeBytes { m in
                        for e in Self.unitElements(m) { reading.unitCounters[UnitUsageKey(d, c, cgroup: e.cgroup)] = e.counter }
                    }
                }
            }
        }
        return reading
    }

    /// The NEWSETELEM messages of one set of the usage table.
    private static func dump(_ name: String, table: [UInt8], absentIsEmpty: Bool = false) throws(Errno) -> [[UInt8]] {
        switch try NftablesRequest.ask(NFT_MSG_GETSETELEM.rawValue, family: UInt8(NFPROTO_INET), attributes: [
            (UInt16(NFTA_SET_ELEM_LIST_TABLE.rawValue), table), (UInt16(NFTA_SET_ELEM_LIST_SET.rawValue), Array(name.utf8) + [0]),
        ], dump: true) {
        case let .failure(e):
            if absentIsEmpty, e.code == ENOENT { return [] }
            throw e
        case let .success(answers):
            return answers.filter { $0.type == NFT_MSG_NEWSETELEM.rawValue }.map(\.message)
        }
    }

    /// This boot's id: a table's handle and the namespace's cookie are unique only within one boot.
    static func bootID() throws(Errno) -> String {
        guard let text = FD.readText("/proc/sys/kernel/random/boot_id") else { throw Errno(ENOENT) }
        return String(text.prefix { $0 != "\n" })
    }

    /// `untracked_sent_wifi` -> its key.
    static func untrackedKey(_ name: String) -> UsageKey? {
        for d in UsageDirection.allCases {
            for c in UsageClass.all where UsageRules.counterName(d, c) == name { return UsageKey(d, c, mark: nil) }
        }
        return nil
    }

    // MARK: - Messages (pure, tested on bytes built as the kernel lays them out)

    /// The elements of one NFT_MSG_NEWSETELEM (after its nlmsghdr): each key (a mark, in host order) and its counter.
    public static func elements(_ msg: UnsafeRawBufferPointer) -> [(mark: UInt32, counter: UsageCounter)] {
        keyed(msg, size: 4).map { (UInt32(truncatingIfNeeded: $0.key), $0.counter) }
    }

    /// Each element's key of `size` bytes (4 or 8, in host order) and its counter.
    static func keyed(_ msg: UnsafeRawBufferPointer, size: Int) -> [(key: UInt64, counter: UsageCounter)] {
        var out: [(key: UInt64, counter: UsageCounter)] = []
        guard let list = NftablesRequest.attributeBytes(msg, UInt16(NFTA_SET_ELEM_LIST_ELEMENTS.rawValue)) else { return out }
        for (t, element) in attributes(list) where t == UInt16(NFTA_LIST_ELEM.rawValue) {
            var mark: UInt64?, counter: UsageCounter?
            for (et, value) in attributes(element) {
                switch et {
                case UInt16(NFTA_SET_ELEM_KEY.rawValue):
                    if let data = first(value, UInt16(NFTA_DATA_VALUE.rawValue)), data.count == size {
                        mark = size == 8 ? data.loadUnaligned(as: UInt64.self) : UInt64(data.loadUnaligned(as: UInt32.self))
                    }
                case UInt16(NFTA_SET_ELEM_EXPRESSIONS.rawValue):
                    for (lt, expr) in attributes(value) where lt == UInt16(NFTA_LIST_ELEM.rawValue) {
                        counter = counter ?? Self.counter(expression: expr)
                    }
                case UInt16(NFTA_SET_ELEM_EXPR.rawValue):
                    counter = counter ?? Self.counter(expression: value)
                default: break
                }
            }
            if let mark, let counter { out.append((mark, counter)) }
        }
        return out
    }

    /// The elements of one NFT_MSG_NEWSETELEM of a users' units' set: each key (a cgroup's id, in host order, as
    /// `socket cgroupv2` gives it) and its counter.
    public static func unitElements(_ msg: UnsafeRawBufferPointer) -> [(cgroup: UInt64, counter: UsageCounter)] {
        keyed(msg, size: 8).map { (UInt64(truncatingIfNeeded: $0.key), $0.counter) }
    }

    public enum Object: Equatable {
        case counter(String, UsageCounter)
        /// A budget's quota object (or its warning's), whether it is used up, and the bytes it counted.
        case quota(QuotaName, depleted: Bool, consumed: UInt64)
    }

    /// One NFT_MSG_NEWOBJ (after its nlmsghdr): a named counter or a quota of ours (QuotaName); nil for anything else.
    public static func object(_ msg: UnsafeRawBufferPointer) -> Object? {
        guard let nameBytes = NftablesRequest.attributeBytes(msg, UInt16(NFTA_OBJ_NAME.rawValue)),
              let type = NftablesRequest.attribute(msg, UInt16(NFTA_OBJ_TYPE.rawValue)),
              let data = NftablesRequest.attributeBytes(msg, UInt16(NFTA_OBJ_DATA.rawValue)) else { return nil }
        let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
        switch type {
        case UInt32(NFT_OBJECT_COUNTER):
            return counter(data).map { .counter(name, $0) }
        case UInt32(NFT_OBJECT_QUOTA):
            guard let q = QuotaName(nft: name) else { return nil }
            let flags = first(data, UInt16(NFTA_QUOTA_FLAGS.rawValue)).flatMap(be32) ?? 0
            let quota = first(data, UInt16(NFTA_QUOTA_BYTES.rawValue)).flatMap(be64) ?? 0
            let consumed = first(data, UInt16(NFTA_QUOTA_CONSUMED.rawValue)).flatMap(be64) ?? 0
            return .quota(q, depleted: flags & UInt32(NFT_QUOTA_F_DEPLETED.rawValue) != 0 || consumed >= quota,
                          consumed: consumed)
        default:
            return nil
        }
    }

    /// An expression `{NFTA_EXPR_NAME "counter", NFTA_EXPR_DATA {bytes, packets}}`'s counter.
    static func counter(expression e: UnsafeRawBufferPointer) -> UsageCounter? {
        guard let name = first(e, UInt16(NFTA_EXPR_NAME.rawValue)),
              Array(name.prefix { $0 != 0 }) == Array("counter".utf8),
              let data = first(e, UInt16(NFTA_EXPR_DATA.rawValue)) else { return nil }
        return counter(data)
    }

    static func counter(_ data: UnsafeRawBufferPointer) -> UsageCounter? {
        guard let bytes = first(data, UInt16(NFTA_COUNTER_BYTES.rawValue)).flatMap(be64),
              let packets = first(data, UInt16(NFTA_COUNTER_PACKETS.rawValue)).flatMap(be64) else { return nil }
        return UsageCounter(bytes: bytes, packets: packets)
    }

    static func attributes(_ b: UnsafeRawBufferPointer) -> NetlinkAttributes { NetlinkAttributes(b) }

    static func first(_ b: UnsafeRawBufferPointer, _ type: UInt16) -> UnsafeRawBufferPointer? { NetlinkAttributes(b).first(type) }

    static func be64(_ b: UnsafeRawBufferPointer) -> UInt64? { b.count == 8 ? UInt64(bigEndian: b.loadUnaligned(as: UInt64.self)) : nil }
    static func be32(_ b: UnsafeRawBufferPointer) -> UInt32? { Netlink.bigEndianU32(b) }
}
