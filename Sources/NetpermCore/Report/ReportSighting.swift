// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// What the kernel told the report's edge, before the engine knows whose it is: a connection's tag (its conntrack
/// mark, ConnectionTags) rather than its app, the class of link as the counting table wrote it into the connection's
/// labels (`ReportLabels`). The engine turns the tag into an app and a person, and the time into its wall clock.
public enum ReportSighting: Equatable, Sendable {
    /// A new connection (conntrack's `NEW` event). `link` nil: no labels (it left by no link the table classes).
    /// `unit`: the cgroup id of the user's unit it is of (ReportUnits), nil when none; its tag may then be none (0).
    case opened(tag: UInt32, address: String, port: UInt16, proto: UInt8, link: ReportLink?, unit: UInt64? = nil)
    /// A connection's end (`DESTROY`), with both ways' bytes where the kernel counts them.
    case closed(tag: UInt32, address: String, link: ReportLink?, bytes: UInt64, unit: UInt64? = nil)
    /// A DNS answer to a connection of the tag (NFLOG, with the connection's mark).
    case answer(tag: UInt32, DNSAnswer)
    /// A packet of the tag's the rules refused (ReportRefusals), leaving by interface `ifindex`. `unit`: a user's
    /// unit's packet, by its cgroup id's `ReportUnits.mark` (its tag then 0: the log carries one or the other).
    case refused(tag: UInt32, address: String, port: UInt16, proto: UInt8, ifindex: Int32?, reason: ReportRefusal,
                 unit: UInt32? = nil)
}

/// The connection labels (`ct label`) the counting table writes on a new tagged connection when the report is on:
/// bits 120 to 123 the kind of link (Ruleset.kinds' order), 125 metered, 126 roaming, 127 that the others are set.
/// High bits, clear of the low ones other tools name in `connlabel.conf`.
public enum ReportLabels {
    public static let kindBase = 120
    public static let metered = 125
    public static let roaming = 126
    public static let present = 127

    /// Whether a conntrack mark is one of the daemon's connection tags: what the edge keeps.
    public static func isTag(_ mark: UInt32) -> Bool { mark & ~ConnectionTags.mask == ConnectionTags.base }

    /// The bits to set for a class of link.
    public static func bits(_ c: UsageClass) -> [Int] {
        guard let kind = LinkKind(rawValue: c.kind.rawValue), let i = Ruleset.kinds.firstIndex(of: kind) else { return [] }
        return [kindBase + i] + (c.metered ? [metered] : []) + (c.roaming ? [roaming] : []) + [present]
    }

    /// The cgroup id of the user's unit the labels name (ReportUnits), nil when none.
    public static func unit(_ labels: [UInt8]) -> UInt64? { ReportUnits.unit(labels) }

    /// The class the labels say: `labels` as the kernel sends them (CTA_LABELS: a bitmap of host-order `long`s;
    /// on the little-endian machines this runs on, bit N is bit N%8 of byte N/8).
    public static func link(_ labels: [UInt8]) -> ReportLink? {
        func bit(_ n: Int) -> Bool { n / 8 < labels.count && labels[n / 8] & (1 << UInt8(n % 8)) != 0 }
        guard bit(present) else { return nil }
        let kinds = Ruleset.kinds.indices.filter { bit(kindBase + $0) }
        guard kinds.count == 1 else { return nil }
        return ReportLink(kind: Ruleset.kinds[kinds[0]], metered: bit(metered), roaming: bit(roaming))
    }
}
