// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// What usage is counted per: a link's kind (loopback is never counted), whether it was metered and whether it was
/// roaming when the packet passed, as the rules saw it (docs/USAGE.md): what roaming cost is counted apart.
public struct UsageClass: Hashable, Sendable, Comparable {
    public var kind: PolicyDimension
    public var metered: Bool
    public var roaming: Bool

    public init(kind: PolicyDimension, metered: Bool, roaming: Bool = false) {
        precondition(!kind.isOverlay, "a class is a kind of link")
        self.kind = kind; self.metered = metered; self.roaming = roaming
    }

    /// Every class, in reporting order: each kind unmetered, then metered, then the same while roaming.
    public static let all: [UsageClass] = Ruleset.kinds.flatMap { k in
        [false, true].flatMap { r in [false, true].map { UsageClass(kind: PolicyDimension(kind: k)!, metered: $0, roaming: r) } }
    }

    public init?(link: Link) {
        guard let d = PolicyDimension(kind: link.kind) else { return nil }
        self.init(kind: d, metered: link.metered, roaming: link.roaming == true)
    }

    /// `wwan`, `wwan_metered`, `wwan_metered_roaming`: the nft sets' names and the usage file's words.
    public var name: String { kind.rawValue + (metered ? "_metered" : "") + (roaming ? "_roaming" : "") }

    public init?(name: String) {
        guard let c = UsageClass.all.first(where: { $0.name == name }) else { return nil }
        self = c
    }

    var index: Int { UsageClass.all.firstIndex(of: self)! }

    public static func < (a: UsageClass, b: UsageClass) -> Bool { a.index < b.index }
}

/// Which way a packet went, from the machine's side.
public enum UsageDirection: String, Sendable, CaseIterable {
    case sent, received
}

/// Bytes (IP headers included) and packets, each way.
public struct UsageCounts: Equatable, Sendable {
    public var sentBytes: UInt64 = 0, sentPackets: UInt64 = 0
    public var receivedBytes: UInt64 = 0, receivedPackets: UInt64 = 0

    public init(sentBytes: UInt64 = 0, sentPackets: UInt64 = 0, receivedBytes: UInt64 = 0, receivedPackets: UInt64 = 0) {
        self.sentBytes = sentBytes; self.sentPackets = sentPackets
        self.receivedBytes = receivedBytes; self.receivedPackets = receivedPackets
    }

    public var isZero: Bool { sentBytes == 0 && sentPackets == 0 && receivedBytes == 0 && receivedPackets == 0 }
    public var bytes: UInt64 { sentBytes &+ receivedBytes }

    public mutating func add(_ direction: UsageDirection, bytes: UInt64, packets: UInt64) {
        switch direction {
        case .sent: sentBytes &+= bytes; sentPackets &+= packets
        case .received: receivedBytes &+= bytes; receivedPackets &+= packets
        }
    }

    public static func + (a: UsageCounts, b: UsageCounts) -> UsageCounts {
        UsageCounts(sentBytes: a.sentBytes &+ b.sentBytes, sentPackets: a.sentPackets &+ b.sentPackets,
                    receivedBytes: a.receivedBytes &+ b.receivedBytes, receivedPackets: a.receivedPackets &+ b.receivedPackets)
    }

    func write(to w: inout JSONWriter) {
        w.field("sent_bytes", sentBytes)
        w.field("received_bytes", receivedBytes)
        w.field("sent_packets", sentPackets)
        w.field("received_packets", receivedPackets)
    }
}

/// Counts per class, only the classes that have any: most apps use one or two kinds of link, and 10,000 apps keep
/// three of these each.
public struct UsageTotals: Equatable, Sendable {
    public struct Entry: Equatable, Sendable {
        public var usageClass: UsageClass
        public var counts: UsageCounts
    }
    /// In class order.
    public private(set) var entries: [Entry] = []

    public init() {}

    public var isEmpty: Bool { entries.isEmpty }

    public subscript(c: UsageClass) -> UsageCounts {
        get { entries.first { $0.usageClass == c }?.counts ?? UsageCounts() }
        set {
            if let i = entries.firstIndex(where: { $0.usageClass == c }) {
                if newValue.isZero { entries.remove(at: i) } else { entries[i].counts = newValue }
            } else if !newValue.isZero {
                entries.append(Entry(usageClass: c, counts: newValue))
                entries.sort { $0.usageClass < $1.usageClass }
            }
        }
    }

    public mutating func add(_ c: UsageClass, _ direction: UsageDirection, bytes: UInt64, packets: UInt64) {
        guard bytes != 0 || packets != 0 else { return }
        var x = self[c]
        x.add(direction, bytes: bytes, packets: packets)
        self[c] = x
    }

    /// Every class together.
    public var sum: UsageCounts { entries.reduce(UsageCounts()) { $0 + $1.counts } }
    /// What a metered budget counts: bytes both ways over metered links.
    public var meteredBytes: UInt64 { entries.reduce(0) { $1.usageClass.metered ? $0 &+ $1.counts.bytes : $0 } }
    /// Bytes both ways over roaming links: what roaming cost.
    public var roamingBytes: UInt64 { entries.reduce(0) { $1.usageClass.roaming ? $0 &+ $1.counts.bytes : $0 } }

    public static func + (a: UsageTotals, b: UsageTotals) -> UsageTotals {
        var t = a
        for e in b.entries { t[e.usageClass] = t[e.usageClass] + e.counts }
        return t
    }

    /// `{"sent_bytes":...,"roaming_bytes":...,"kinds":[{"kind":"wwan","metered":true,"roaming":false,"sent_bytes":...},...]}`
    func write(to w: inout JSONWriter) {
        sum.write(to: &w)
        w.field("roaming_bytes", roamingBytes)
        w.objects("kinds", entries) { w, e in
            w.field("kind", e.usageClass.kind.rawValue)
            w.field("metered", e.usageClass.metered)
            w.field("roaming", e.usageClass.roaming)
            e.counts.write(to: &w)
        }
    }
}
