// SPDX-License-Identifier: LGPL-2.1-or-later
/// The names each app resolved, by address: what turns an app's connection to an address into the name the app
/// itself asked for. Kept per owner, so an answer one app received never names another app's connection (a
/// hostile app cannot make a second app's report show the names it chose). Bounded per owner and in all; the oldest
/// learnt go first. Not kept on disk: the entries already hold the names that were used.
public struct ReportNames: Equatable, Sendable {
    struct Learnt: Equatable, Sendable {
        var name: String
        /// The order learnt: ties of `time` broken so eviction is deterministic.
        var serial: UInt64
    }

    public struct Limits: Equatable, Sendable {
        public var perOwner = 1024
        public var total = 16384
        public var perAnswer = 32
        public init() {}
    }

    public let limits: Limits
    private(set) var byOwner: [ReportOwner: [String: Learnt]] = [:]
    public private(set) var count = 0
    private var serial: UInt64 = 0

    public init(limits: Limits = Limits()) { self.limits = limits }

    /// The name `owner` last resolved to `address`, if it did.
    public func name(of address: String, for owner: ReportOwner) -> String? { byOwner[owner]?[address]?.name }

    public mutating func learn(_ answer: ReportAnswer) {
        var table = byOwner.removeValue(forKey: answer.owner) ?? [:]
        for address in answer.addresses.prefix(limits.perAnswer) {
            serial &+= 1
            if table.updateValue(Learnt(name: answer.name, serial: serial), forKey: address) == nil {
                count += 1
            }
        }
        if table.count > limits.perOwner {
            count -= table.count
            Self.dropOldest(&table, keeping: limits.perOwner - limits.perOwner / 8)
            count += table.count
        }
        byOwner[answer.owner] = table
        if count > limits.total { dropOldestOverall() }
    }

    public mutating func forget(where drop: (ReportOwner) -> Bool) {
        for owner in byOwner.keys where drop(owner) {
            count -= byOwner.removeValue(forKey: owner)!.count
        }
    }

    /// Keeps the `keeping` newest of one table.
    private static func dropOldest(_ table: inout [String: Learnt], keeping: Int) {
        let newest = table.sorted { $0.value.serial > $1.value.serial }.prefix(keeping)
        table = Dictionary(uniqueKeysWithValues: newest.map { ($0.key, $0.value) })
    }

    /// An eighth below the bound at once: one sort per many answers, not per answer.
    private mutating func dropOldestOverall() {
        let keep = limits.total - limits.total / 8
        var all: [(ReportOwner, String, UInt64)] = []
        all.reserveCapacity(count)
        for (owner, table) in byOwner { for (address, l) in table { all.append((owner, address, l.serial)) } }
        all.sort { $0.2 < $1.2 }
        for (owner, address, _) in all.prefix(all.count - keep) {
            byOwner[owner]![address] = nil
            if byOwner[owner]!.isEmpty { byOwner[owner] = nil }
        }
        count = keep
    }
}
