// SPDX-License-Identifier: LGPL-2.1-or-later
/// One counter the kernel keeps for usage: which way, which class of link, and whose connection by its tag
/// (`ct mark`), or `nil` for packets that had no connection (untracked), which count as other processes.
public struct UsageKey: Hashable, Sendable, Comparable {
    public var direction: UsageDirection
    public var usageClass: UsageClass
    public var mark: UInt32?

    public init(_ direction: UsageDirection, _ usageClass: UsageClass, mark: UInt32?) {
        self.direction = direction; self.usageClass = usageClass; self.mark = mark
    }

    public static func < (a: UsageKey, b: UsageKey) -> Bool {
        (a.direction == .sent ? 0 : 1, a.usageClass.index, a.mark.map { Int64($0) } ?? -1)
            < (b.direction == .sent ? 0 : 1, b.usageClass.index, b.mark.map { Int64($0) } ?? -1)
    }
}

/// A counter's value.
public struct UsageCounter: Equatable, Sendable {
    public var bytes: UInt64
    public var packets: UInt64
    public init(bytes: UInt64, packets: UInt64) { self.bytes = bytes; self.packets = packets }
}

/// What the edge read of the usage table: every counter since the table was made, which table that was, and the
/// budgets' quota objects it holds.
public struct UsageReading: Equatable, Sendable {
    /// Names this table among every table that ever existed (the boot, the network namespace, the table's handle):
    /// counters are only comparable with earlier readings of the same table.
    public var instance: String
    public var counters: [UsageKey: UsageCounter]
    /// The budgets' quota objects (names not ours are left out), and whether the kernel found each exhausted.
    public var quotas: [QuotaName: Bool]
    /// The bytes each quota object counted (from the `used` it was made with): a budget's quota counts the packet
    /// that crossed it, which it refused and no counter saw, so it may be past the budget while the counters are not.
    public var quotaUsed: [QuotaName: UInt64]
    /// Every user's unit's counters (UserApp): counted beside `counters`, which have the same bytes by their tags.
    public var unitCounters: [UnitUsageKey: UsageCounter]

    public init(instance: String, counters: [UsageKey: UsageCounter] = [:], quotas: [QuotaName: Bool] = [:],
                quotaUsed: [QuotaName: UInt64] = [:], unitCounters: [UnitUsageKey: UsageCounter] = [:]) {
        self.instance = instance; self.counters = counters; self.quotas = quotas; self.quotaUsed = quotaUsed
        self.unitCounters = unitCounters
    }
}
