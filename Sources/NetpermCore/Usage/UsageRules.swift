// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// The nftables table that counts each app's traffic per class of link and enforces metered budgets:
/// `table inet netpermd_usage`, apart from enforcement's `netpermd` (docs/USAGE.md). Pure: its parts in, scripts
/// out.
///
/// A table of its own because its counters are state that a load of the whole enforcement table would throw away:
/// that table is replaced whole (a handover, a repair, a restart's first load), while this one is only ever
/// changed in place. Its counting sets are never flushed nor deleted by the daemon, so no load loses a count.
///
/// What is counted, per packet: `postrouting` (sent) and `prerouting` (received) look the link up by name and go
/// to its class's chain, which adds the packet to the element of its connection's tag (`ct mark`) in that class's
/// dynamic set (`update @count_sent_wifi { ct mark }`): each element has its own counter, made at the first packet
/// of that tag. A packet with no connection (untracked) counts in the class's named counter. Tags are written as
/// enforcement writes them (ConnectionTags), from the socket's uid or system unit's cgroup at a connection's first
/// packet (`output`), a server's SYN-ACK (its listener's uid), or an incoming connection's first packet (its
/// listener's cgroup, `input`): the same maps as enforcement's, so both agree on whose a connection is.
///
/// Budgets: per app with `MeteredBudget=`, two quota objects, `b_TAG` (the budget) and `w_TAG` (80% of it), made
/// with the bytes already used this period (`used`), and evaluated by every packet of the app's connections over a
/// metered link, both ways, so the kernel counts towards them by itself and says when one runs out (a quota
/// object's notification). With `enforce`, a packet over the budget is refused: sent TCP by a reset to the app's
/// socket (an established connection ends at once, never stalls), other sent packets by an ICMP error (`EPERM` at
/// once), received packets other than TCP dropped; received TCP passes, so that the app's next packet (its ACK)
/// meets the reset, and its peer's next one the kernel's reset from a socket that is gone.
public struct UsageRules: Equatable, Sendable {
    public static let family = "inet"
    public static let table = "netpermd_usage"

    /// One app's budget in the kernel: its tag, the budget in bytes, and what the quota objects were made for (the
    /// period and the last reset): a new epoch makes them again, with the bytes used then.
    public struct Budget: Equatable, Sendable {
        public var tag: UInt32
        public var limit: UInt64
        public var epoch: String
        public init(tag: UInt32, limit: UInt64, epoch: String) { self.tag = tag; self.limit = limit; self.epoch = epoch }

        var name: QuotaName { QuotaName(tag: tag) }
        var warningName: QuotaName { QuotaName(tag: tag, warning: true) }
        /// 80% of the budget, rounded up.
        var warningLimit: UInt64 { limit / 10 * 8 + (limit % 10 * 8 + 9) / 10 }
    }

    /// One map of the table and its elements, as nft writes them.
    struct Map: Equatable, Sendable {
        var name: String
        var type: String
        var elements: [String]
    }

    struct Chain: Equatable, Sendable {
        var name: String
        var hook: String?
        var rules: [String]
    }

    var maps: [Map]
    var chains: [Chain]
    public var budgets: [Budget]
    /// Link names nft cannot be given safely: not counted (the daemon logs them).
    public var skipped: [String]
    /// The daemon's descriptors of cgroups the tag maps name (Ruleset.Tagging): open while these rules load.
    public var handles: Set<Int32> = []

    /// The counting sets (`count_sent_wifi` ...) and the counters of untracked packets (`untracked_sent_wifi`),
    /// one each per direction and class: what the edge reads.
    public static func setName(_ d: UsageDirection, _ c: UsageClass) -> String { "count_\(d.rawValue)_\(c.name)" }
    public static func counterName(_ d: UsageDirection, _ c: UsageClass) -> String { "untracked_\(d.rawValue)_\(c.name)" }
    /// The sets counting users' own units per cgroup (`user_sent_wifi` ...), one per direction and class.
    public static func unitSetName(_ d: UsageDirection, _ c: UsageClass) -> String { "user_\(d.rawValue)_\(c.name)" }
    /// How long a user's unit's element outlives its last packet: past a reading or more (`SaveIntervalSec=` is at
    /// most a day), so its last bytes are read before it goes; then it goes, and the set never fills with the units
    /// of long gone launches.
    static let unitElementTimeout = "3d"

    /// The most elements a counting set takes (tags of apps, marks other tools set); packets of a mark that finds
    /// no room count as untracked.
    static let setSize = 65535

    /// `tagging` is what enforcement tags connections with (Ruleset.tagging), for the same apps and cgroups.
    /// `report`: the privacy report's two rules (docs/PRIVACY.md): a new tagged connection's class of link written
    /// into its labels (ReportLabels), which conntrack's events carry, and tagged DNS answers logged to
    /// `reportLogGroup` with their connection.
    static func build(links: [Link], tagging: Ruleset.Tagging, budgets: [Budget], enforce: Bool,
                      report: Bool = false) -> UsageRules {
        var out: [String] = [], post: [String] = [], pre: [String] = [], skipped: [String] = []
        for l in links {
            guard let c = UsageClass(link: l) else { continue }
            guard Ruleset.isSafe(l.name) else { skipped.append(l.name); continue }
            let name = "\"\(l.name)\""
            out.append("\(name) : goto \(c.metered ? "out_metered" : "out")")
            post.append("\(name) : goto sent_\(c.name)")
            pre.append("\(name) : goto received_\(c.name)")
        }
        var maps = [Map(name: "out_links", type: "ifname : verdict", elements: out),
                    Map(name: "sent_links", type: "ifname : verdict", elements: post),
                    Map(name: "received_links", type: "ifname : verdict", elements: pre)]
        for m in tagging.maps { maps.append(Map(name: m.name, type: m.key + " : " + m.value, elements: m.elements.map(\.text))) }
        // The uid's tag for a datagram's socket, and for a uid no app owns, none (its catch-all element).
        let uidTags = tagging.maps.first { $0.name == "tag_uid" }?.elements.map(\.text) ?? []
        maps.append(Map(name: "retag_uid", type: "uid : mark", elements: uidTags + ["* : 0x00000000"]))
        maps += userUnitMaps(tagging, links: links)
        maps += ReportUnits.maps(tagging.userUnits, on: report)
        let sorted = budgets.sorted { $0.tag < $1.tag }
        maps.append(Map(name: "budgets", type: "mark : quota", elements: sorted.map { ConnectionTags.text($0.tag) + " : \"\($0.name.nft)\"" }))
        maps.append(Map(name: "warnings", type: "mark : quota", elements: sorted.map {
            ConnectionTags.text($0.tag) + " : \"\($0.warningName.nft)\""
        }))

        var chains: [Chain] = [Chain(name: "tag", rules: tagging.tag), Chain(name: "tag_in", rules: tagging.tagIn),
                               Chain(name: "retag", rules: retagRules(tagging))]
        // A connection its socket sends on gets its app's tag if nothing gave it one: a new one enforcement's rules did
        // not tag (Mode=off, a link they do not judge), a server's at its SYN-ACK (its listener's uid), one opened
        // before its app was in the policy, a flow its peer began (the app's first reply). A datagram's flow is
        // tagged again by every socket that sends on it: another uid's socket may reuse its addresses and ports
        // while conntrack keeps the flow (TCP cannot: a new connection is a new flow).
        let tagRules = [tagging.tag.isEmpty ? nil : "ct mark 0 jump tag",
                        "meta l4proto != tcp ct mark and \(ConnectionTags.text(~ConnectionTags.mask)) == "
                            + "\(ConnectionTags.text(ConnectionTags.base)) jump retag"].compactMap { $0 }
        let budgeted = !budgets.isEmpty
        let check = budgeted ? ["quota name ct mark map @warnings",
                                "quota name ct mark map @budgets" + (enforce ? " jump over_out" : "")] : []
        chains.append(Chain(name: "out", rules: tagRules))
        chains.append(Chain(name: "out_metered", rules: tagRules + check))
        // With the report on, what is refused for the budget is logged first (ReportRefusals).
        chains.append(Chain(name: "over_out", rules: ["tcp flags & rst == rst return"]
            + (report ? [ReportRefusals.jump] : [])
            + ["meta l4proto tcp reject with tcp reset", "reject with icmpx admin-prohibited"]))
        chains += ReportRefusals.chains(.budget).map { Chain(name: $0.name, hook: nil, rules: report ? $0.rules : []) }
        chains.append(Chain(name: "budget_in", rules: budgeted ? ["quota name ct mark map @warnings",
                                                                   "quota name ct mark map @budgets" + (enforce ? " jump over_in" : "")] : []))
        chains.append(Chain(name: "over_in", rules: ["meta l4proto tcp return", "drop"]))
        for d in UsageDirection.allCases {
            for c in UsageClass.all {
                // Received over a metered link: counted first (it came, whatever happens next), then its budget.
                let then = d == .received && c.metered && budgeted ? "goto budget_in" : "return"
                let labels = report && d == .sent ? [reportLabelRule(c), reportUnitLabelRule(c)] : []
                chains.append(Chain(name: "\(d.rawValue)_\(c.name)", rules: labels + [
                    "update @\(setName(d, c)) { ct mark } \(then)", "counter name \"\(counterName(d, c))\"",
                ]))
            }
        }
        chains += ReportUnits.chains(tagging.userUnits, on: report)
        chains += userUnitChains(tagging, report: report)
        chains.append(Chain(name: "output", hook: "type filter hook output priority filter + 10; policy accept;",
                            rules: (report ? [reportLoopbackRule] : []) + ["oifname vmap @out_links"]))
        chains.append(Chain(name: "input", hook: "type filter hook input priority filter + 10; policy accept;",
                            rules: tagging.tagIn.isEmpty ? [] : ["ct state new ct mark 0 jump tag_in"]))
        chains.append(Chain(name: "postrouting", hook: "type filter hook postrouting priority srcnat + 10; policy accept;",
                            rules: ["oifname vmap @sent_links"]))
        chains.append(Chain(name: "prerouting", hook: "type filter hook prerouting priority mangle + 10; policy accept;",
                            rules: (report ? [reportAnswerRule] : []) + ["iifname vmap @received_links"]))
        return UsageRules(maps: maps, chains: chains, budgets: sorted, skipped: skipped, handles: tagging.handles)
    }

    /// Users' own units (Ruleset.Tagging.userUnits): the set of their cgroups, and the links each way to the chains
    /// that count them per class.
    static func userUnitMaps(_ tagging: Ruleset.Tagging, links: [Link]) -> [Map] {
        var sent: [String] = [], received: [String] = []
        for l in links {
            guard let c = UsageClass(link: l), Ruleset.isSafe(l.name) else { continue }
            sent.append("\"\(l.name)\" : goto unit_sent_\(c.name)")
            received.append("\"\(l.name)\" : goto unit_received_\(c.name)")
        }
        return [Map(name: "user_units", type: "cgroupsv2", elements: tagging.userUnits.map(\.key.text)),
                Map(name: "user_sent_links", type: "ifname : verdict", elements: sent),
                Map(name: "user_received_links", type: "ifname : verdict", elements: received)]
    }

    /// Counting users' own units, after everything else has judged the packet (`filter + 11`): what an app of a
    /// user's unit sends (`output`) and receives (`input`, where the kernel finds the packet's socket), added to its
    /// unit's cgroup's element in its class's set, by the socket's cgroup at each level a unit is at, deepest first
    /// (a sub-cgroup of an app's unit is the app's). Nothing else reads or writes the connection: the same bytes are
    /// its tag's, its uid's app's, for counts and budgets alike. No rules while no user's unit is an app's.
    static func userUnitChains(_ tagging: Ruleset.Tagging, report: Bool = false) -> [Chain] {
        let levels = Set(tagging.userUnits.map(\.level)).sorted(by: >)
        var chains: [Chain] = []
        for d in UsageDirection.allCases {
            for c in UsageClass.all {
                chains.append(Chain(name: "unit_\(d.rawValue)_\(c.name)", rules: levels.map {
                    "socket cgroupv2 level \($0) @user_units update @\(unitSetName(d, c)) { socket cgroupv2 level \($0) } return"
                }))
            }
        }
        let any = !levels.isEmpty
        chains.append(Chain(name: "user_output", hook: "type filter hook output priority filter + 11; policy accept;",
                            rules: ReportUnits.rule(tagging.userUnits, on: report) + (any ? ["oifname vmap @user_sent_links"] : [])))
        chains.append(Chain(name: "user_input", hook: "type filter hook input priority filter + 11; policy accept;",
                            rules: any ? ["iifname vmap @user_received_links"] : []))
        return chains
    }

    /// The NFLOG group the report's DNS answers go to (enforcement's prompts use 28272).
    public static let reportLogGroup: UInt16 = 28273
    public static let reportLogPrefix = "netpermd:dns"
    /// What a tag is: the mark's high bits are ConnectionTags.base.
    static var tagged: String { "ct mark and \(ConnectionTags.text(~ConnectionTags.mask)) == \(ConnectionTags.text(ConnectionTags.base))" }

    /// A new tagged connection's class, as labels: set before conntrack confirms it, so its NEW event carries them.
    static func reportLabelRule(_ c: UsageClass) -> String {
        "ct state new \(tagged) " + ReportLabels.bits(c).map { "ct label set \($0)" }.joined(separator: " ")
    }

    /// The same for a new connection of a user's unit (`ReportUnits`), tagged or not: its unit's id is in its labels.
    static func reportUnitLabelRule(_ c: UsageClass) -> String {
        "ct state new ct label \(ReportUnits.present) " + ReportLabels.bits(c).map { "ct label set \($0)" }.joined(separator: " ")
    }

    /// A tagged connection's DNS answers, whole (an EDNS answer fits 1,500 bytes), with the connection's tag as the
    /// packet's mark while it is logged (NFULA_MARK), then 0 again as it came: only a packet with no mark of its own.
    /// NFLOG's own way to carry the connection (NFULNL_CFG_F_CONNTRACK) needs the kernel's netlink glue for
    /// conntrack, which kernels are built without (this project's answers EOPNOTSUPP).
    static var reportAnswerRule: String {
        "udp sport 53 meta mark 0 \(tagged) meta mark set ct mark log prefix \"\(reportLogPrefix)\" group "
            + "\(reportLogGroup) snaplen 1500 meta mark set 0"
    }

    /// An app's own DNS query to a resolver on the machine's loopback (systemd-resolved's 127.0.0.53, dnsmasq's
    /// 127.0.0.1) tagged as its queries over a link are (`out`: its app's tag, nothing counted), so that the
    /// resolver's answer, which comes back over lo on the same connection, is logged as the app's by
    /// `reportAnswerRule`. lo is no link of the policy: nothing else tags it, and its connection has no class
    /// (no labels), so the report shows no destination for it.
    static let reportLoopbackRule = "oifname \"lo\" udp dport 53 jump out"

    /// `retag`: the socket's app's tag, by its unit's cgroup first (deepest first, as `tag` lets the deepest win),
    /// then by its uid, none when no app owns it. Each sets the mark once: no mark changes twice a packet.
    static func retagRules(_ tagging: Ruleset.Tagging) -> [String] {
        let units = tagging.maps.compactMap { m -> Int? in
            guard m.name.hasPrefix("tag_unit"), !m.elements.isEmpty else { return nil }
            return Int(m.name.dropFirst("tag_unit".count))
        }
        return units.sorted(by: >).map { "ct mark set socket cgroupv2 level \($0) map @tag_unit\($0) return" }
            + ["ct mark set meta skuid map @retag_uid"]
    }

    /// The script that removes the table, whether or not it exists.
    public static let removal = "table \(family) \(table) {}\ndelete table \(family) \(table)\n"

    /// The one transaction that makes the table what these rules say, from `old` (the rules in force; nil when
    /// unknown: a start, a repair, after a failure, which writes every part). The counting sets and counters are
    /// declared (a no-op where they exist) and never flushed, so they keep every count through any load. Quota
    /// objects are made again when their budget's limit or epoch changed, with the bytes `used` gives (at most the
    /// budget, which nft requires); `kernelQuotas` are those the kernel holds now, deleted first when made again
    /// or no longer wanted.
    public func script(from old: UsageRules?, kernelQuotas: Set<QuotaName>, used: (UInt32) -> UInt64) -> String {
        let t = "\(Self.family) \(Self.table)"
        var s = ""
        let whole = old == nil
        if whole {
            s += "table \(t) {}\nflush table \(t)\n"
            for c in chains { s += "add chain \(t) \(c.name)" + (c.hook.map { " { \($0) }" } ?? "") + "\n" }
            for d in UsageDirection.allCases {
                for c in UsageClass.all {
                    s += "add set \(t) \(Self.setName(d, c)) { type mark; size \(Self.setSize); flags dynamic; counter; }\n"
                    s += "add counter \(t) \(Self.counterName(d, c))\n"
                    s += "add set \(t) \(Self.unitSetName(d, c)) { type cgroupsv2; size \(Self.setSize); flags dynamic,timeout; "
                        + "timeout \(Self.unitElementTimeout); counter; }\n"
                }
            }
            s += "add set \(t) \(ReportRefusals.setName) { \(ReportRefusals.set) }\n"
            s += "add limit \(t) \(ReportRefusals.totalName) { \(ReportRefusals.total); }\n"
        }
        let oldMaps = Dictionary((old?.maps ?? []).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        // Quotas made again: first no element may name them, then they go, then they come back.
        let oldBudgets = Dictionary((old?.budgets ?? []).map { ($0.tag, $0) }, uniquingKeysWith: { a, _ in a })
        let remade = budgets.filter { whole || oldBudgets[$0.tag] != $0 }
        let keep = Set(budgets.filter { !remade.contains($0) }.flatMap { [$0.name, $0.warningName] })
        let deleting = kernelQuotas.subtracting(keep).sorted()
        let quotasMove = !remade.isEmpty || !deleting.isEmpty
        for m in maps {
            let changed = whole || oldMaps[m.name] != m || (quotasMove && m.type.hasSuffix(": quota"))
            guard changed else { continue }
            // A type with no value is a set's.
            let kind = m.type.contains(" : ") ? "map" : "set"
            if whole { s += "add \(kind) \(t) \(m.name) { type \(m.type); }\n" }
            s += "flush \(kind) \(t) \(m.name)\n"
            if !m.elements.isEmpty, !m.type.hasSuffix(": quota") {
                s += "add element \(t) \(m.name) { " + m.elements.joined(separator: ", ") + " }\n"
            }
        }
        for q in deleting { s += "delete quota \(t) \(q.nft)\n" }
        for b in remade {
            let u = min(used(b.tag), b.limit)
            s += "add quota \(t) \(b.name.nft) { over \(b.limit) bytes used \(u) bytes }\n"
            s += "add quota \(t) \(b.warningName.nft) { over \(b.warningLimit) bytes used \(min(u, b.warningLimit)) bytes }\n"
        }
        for m in maps where m.type.hasSuffix(": quota") && !m.elements.isEmpty
            && (whole || quotasMove || oldMaps[m.name] != m) {
            s += "add element \(t) \(m.name) { " + m.elements.joined(separator: ", ") + " }\n"
        }
        let oldChains = Dictionary((old?.chains ?? []).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for c in chains where whole || oldChains[c.name] != c {
            if !whole { s += "flush chain \(t) \(c.name)\n" }
            for r in c.rules { s += "add rule \(t) \(c.name) \(r)\n" }
        }
        return s
    }

    /// The quota objects these rules hold once loaded.
    public var quotaNames: Set<QuotaName> { Set(budgets.flatMap { [$0.name, $0.warningName] }) }
}
