// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// What Mode=steer puts in the kernel besides the nft table (docs/ENFORCEMENT.md, "Steer"): a mark per app whose
/// permissions keep it off some link, set on its sockets at creation by a BPF program that reads two maps (unit
/// cgroup id -> mark, uid -> mark); per mark in use, one routing rule per family (`fwmark MARK lookup TABLE`) and a
/// table holding the main table's routes through the links that mark may use, over an `unreachable default`, so
/// a marked socket leaves by an allowed link with that link's source address, or fails at once, never by a denied
/// link. Pure: built from the ruleset's owners, the permissions and the links; the edge diffs it with the kernel.
public struct SteeringPlan: Equatable, Sendable {
    /// Marks are `markBase | allowance`: an unusual high half keeps clear of other tools' small marks.
    public static let markBase: UInt32 = 0x6E70_0000
    /// Tables are `tableBase + allowance` (28240-28303).
    public static let tableBase: UInt32 = 28240
    /// The rules' priority: after `local` (0), before `main` (32766) and `default` (32767), so a marked socket's
    /// lookup ends in its table.
    public static let rulePriority: UInt32 = 28239
    /// The source rules' priority, just before: a marked socket bound to an address of a link its mark does not
    /// allow looks up the table that allows nothing (`nowhere`), so it fails at once rather than leave by an
    /// allowed link with that address (whose replies would come back over the denied one).
    public static let sourceRulePriority: UInt32 = rulePriority - 1
    /// The table of the allowance that allows nothing: only the unreachable defaults.
    public static let nowhere = Allowance(bits: 0)
    /// "Highest metric": the unreachable default comes after every copied default.
    public static let unreachableMetric: UInt32 = 0xFFFF_FFFF

    /// Which links an app may use, as bits: one per kind of `Ruleset.kinds` (wifi, wwan, ethernet, other) that
    /// allows it, `meteredBit` when Metered= does, and `notRoamingBit` when Roaming= does not (the other way round,
    /// so that a policy without Roaming= keeps the marks and tables it had). `everything`: every link, no mark.
    public struct Allowance: Hashable, Comparable, Sendable {
        public let bits: UInt32
        public static let meteredBit: UInt32 = 1 << 4
        public static let notRoamingBit: UInt32 = 1 << 5
        public static let everything = Allowance(bits: 0x1F)

        public init(bits: UInt32) { self.bits = bits & 0x3F }

        public init(_ p: PermissionSet) {
            var b: UInt32 = 0
            for (i, k) in Ruleset.kinds.enumerated() where p[k] == .allow { b |= 1 << UInt32(i) }
            if p.metered == .allow { b |= Self.meteredBit }
            if p.roaming != .allow { b |= Self.notRoamingBit }
            self.init(bits: b)
        }

        public var mark: UInt32 { SteeringPlan.markBase | bits }
        public var table: UInt32 { SteeringPlan.tableBase + bits }

        /// Whether a socket so marked may leave by a link (loopback, and links of no kind, always).
        public func allows(kind: LinkKind, metered: Bool, roaming: Bool = false) -> Bool {
            guard let i = Ruleset.kinds.firstIndex(of: kind) else { return true }
            return bits & (1 << UInt32(i)) != 0 && (!metered || bits & Self.meteredBit != 0)
                && (!roaming || bits & Self.notRoamingBit == 0)
        }
        public func allows(_ link: Link) -> Bool { allows(kind: link.kind, metered: link.metered, roaming: link.roaming == true) }

        public static func < (a: Allowance, b: Allowance) -> Bool { a.bits < b.bits }
    }

    /// Unit cgroup id -> mark; 0 for a unit whose app may use every link (its sockets must not take their uid's
    /// mark, as in the nft rules a unit's verdict comes before its uid's).
    public var cgroupMarks: [UInt64: UInt32]
    /// Uid -> mark, for apps that may not use every link.
    public var uidMarks: [UInt32: UInt32]
    /// The allowances some app has (sorted): one rule per family and one table each.
    public var allowances: [Allowance]
    /// The links whose routes are copied: up with carrier (a link without carrier would swallow the traffic).
    public var links: [SteerLink]
    /// Per mark in use, per address of a link it does not allow (up or not; link-local IPv6 addresses aside, as a
    /// socket using one is bound to its link anyway): `from ADDRESS fwmark MARK lookup` the `nowhere` table.
    public var sourceRules: [SteerRule]

    public init(cgroupMarks: [UInt64: UInt32] = [:], uidMarks: [UInt32: UInt32] = [:],
                allowances: [Allowance] = [], links: [SteerLink] = [], sourceRules: [SteerRule] = []) {
        self.cgroupMarks = cgroupMarks; self.uidMarks = uidMarks
        self.allowances = allowances; self.links = links; self.sourceRules = sourceRules
    }

    /// Owners as the ruleset found them (the first `[App]` naming a uid or unit cgroup), so steering and blocking
    /// agree on who is who, and permissions as it took them (`ownPermissions`: a uid's own decisions, for its uid
    /// and its own units).
    public static func build(ruleset: Ruleset, apps: [AppPolicy], permissions: (AppPolicy) -> PermissionSet,
                             ownPermissions: (AppPolicy, UInt32) -> PermissionSet? = { _, _ in nil },
                             links: [Link]) -> SteeringPlan {
        var allowance: [Int: Allowance] = [:]
        func of(_ i: Int, uid: UInt32? = nil) -> Allowance {
            if let uid, let own = ownPermissions(apps[i], uid) { return Allowance(own) }
            if let a = allowance[i] { return a }
            let a = Allowance(permissions(apps[i]))
            allowance[i] = a
            return a
        }
        var plan = SteeringPlan()
        var used: Set<Allowance> = []
        for u in ruleset.unitOwners {
            var a = of(u.app, uid: u.userUID)
            if let uid = u.userUID {
                // A user's own unit only narrows (Ruleset): where it allows, the uid's allowance still holds.
                a = Allowance(bits: a.bits & (ruleset.uidOwners[uid].map { of($0, uid: uid).bits } ?? Allowance.everything.bits))
                guard a != .everything else { continue }
            }
            plan.cgroupMarks[u.id] = a == .everything ? 0 : a.mark
            if a != .everything { used.insert(a) }
        }
        for (uid, i) in ruleset.uidOwners {
            let a = of(i, uid: uid)
            guard a != .everything else { continue }
            plan.uidMarks[uid] = a.mark
            used.insert(a)
        }
        plan.allowances = used.sorted()
        plan.links = links.filter { $0.status.adminUp && $0.status.carrier }.sorted { $0.index < $1.index }
            .map { SteerLink(index: $0.index, kind: $0.kind, metered: $0.metered, roaming: $0.roaming == true) }
        for a in plan.allowances {
            for l in links where !a.allows(l) {
                for text in l.addresses {
                    let address = String(text.prefix { $0 != "/" })
                    let v6 = address.contains(":")
                    guard !v6 || !["fe8", "fe9", "fea", "feb"].contains(address.prefix(3).lowercased()) else { continue }
                    plan.sourceRules.append(SteerRule(family: v6 ? .ipv6 : .ipv4, mark: a.mark, table: nowhere.table,
                                                      source: address))
                }
            }
        }
        return plan
    }

    /// The routes of `allowance`'s table: the main table's routes through the links it allows (defaults with their
    /// gateways and metrics, prefix routes, so on-link peers stay on-link), and an unreachable default per family.
    public func routes(for allowance: Allowance, main: [SteerRoute]) -> [SteerRoute] {
        let allowed = Set(links.filter { allowance.allows(kind: $0.kind, metered: $0.metered, roaming: $0.roaming) }.map(\.index))
        var out = main.filter { r in r.oif.map { allowed.contains($0) } ?? false }
        for f in AddressFamily.allCases { out.append(.unreachableDefault(f, table: allowance.table)) }
        for i in out.indices { out[i].table = allowance.table }
        return out
    }

    /// The rules in force for this plan: per allowance, one per family; and the source rules.
    public var rules: [SteerRule] {
        allowances.flatMap { a in AddressFamily.allCases.map { SteerRule(family: $0, mark: a.mark, table: a.table) } }
            + sourceRules
    }

    /// Whether a table number is one of steering's (what a clean stop flushes, and a restart repairs).
    public static func isSteeringTable(_ t: UInt32) -> Bool { t >= tableBase && t < tableBase + 64 }

    /// Where a marked socket's traffic goes by the kernel's lookup in its table: the allowed link with a usable
    /// default route and the lowest metric (the table holds copies of the main table's defaults), else the
    /// unreachable default. What the verdict of a steered app says (`via`, `egress`).
    public func egress(for allowance: Allowance, network: NetworkState) -> [AddressFamily: Egress] {
        var out: [AddressFamily: Egress] = [:]
        for f in AddressFamily.allCases {
            let candidates = network.links.filter {
                $0.status.adminUp && $0.status.carrier && allowance.allows($0) && $0.kind != .loopback
                    && $0.defaultRoute[f]
            }
            if let best = candidates.min(by: { ($0.metric ?? .max, $0.index) < ($1.metric ?? .max, $1.index) }) {
                out[f] = .link(best.index)
            } else {
                out[f] = .blocked(.unreachable)
            }
        }
        return out
    }
}

/// What steering needs of a link that is up with carrier.
public struct SteerLink: Equatable, Sendable {
    public var index: Int32
    public var kind: LinkKind
    public var metered: Bool
    public var roaming: Bool
    public init(index: Int32, kind: LinkKind, metered: Bool, roaming: Bool = false) {
        self.index = index; self.kind = kind; self.metered = metered; self.roaming = roaming
    }
}

/// One route of a steering table (or of the main table, read to be copied).
public struct SteerRoute: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: Hashable, Sendable { case unicast, unreachable }
    public var family: AddressFamily
    public var table: UInt32
    public var kind: Kind
    /// 4 or 16 bytes (all zero for a default).
    public var destination: [UInt8]
    public var prefixLength: UInt8
    public var oif: Int32?
    public var gateway: [UInt8]?
    /// The preferred source address (`src` of a prefix route).
    public var source: [UInt8]?
    public var metric: UInt32
    /// RT_SCOPE_*: link for prefix routes, universe for routes via a gateway.
    public var scope: UInt8

    public init(family: AddressFamily, table: UInt32, kind: Kind, destination: [UInt8], prefixLength: UInt8,
                oif: Int32?, gateway: [UInt8]?, source: [UInt8]?, metric: UInt32, scope: UInt8) {
        self.family = family; self.table = table; self.kind = kind; self.destination = destination
        self.prefixLength = prefixLength; self.oif = oif; self.gateway = gateway; self.source = source
        self.metric = metric; self.scope = scope
    }

    public static func unreachableDefault(_ f: AddressFamily, table: UInt32) -> SteerRoute {
        SteerRoute(family: f, table: table, kind: .unreachable, destination: [UInt8](repeating: 0, count: f == .ipv4 ? 4 : 16),
                   prefixLength: 0, oif: nil, gateway: nil, source: nil, metric: SteeringPlan.unreachableMetric,
                   scope: 0)
    }

    public var description: String {
        "\(kind == .unreachable ? "unreachable " : "")\(family.rawValue) \(destination)/\(prefixLength) table \(table)"
            + (oif.map { " oif \($0)" } ?? "") + (gateway.map { " via \($0)" } ?? "") + " metric \(metric)"
    }
}

/// One routing rule of steering: `fwmark MARK/0xffffffff lookup TABLE` at `SteeringPlan.rulePriority`, or with
/// `source`, `from SOURCE fwmark MARK/0xffffffff lookup TABLE` at `SteeringPlan.sourceRulePriority`.
public struct SteerRule: Hashable, Sendable {
    public var family: AddressFamily
    public var mark: UInt32
    public var table: UInt32
    /// An address as the kernel writes it (inet_ntop), without a prefix length: the rule matches it alone.
    public var source: String?
    public init(family: AddressFamily, mark: UInt32, table: UInt32, source: String? = nil) {
        self.family = family; self.mark = mark; self.table = table; self.source = source
    }
    public var priority: UInt32 { source == nil ? SteeringPlan.rulePriority : SteeringPlan.sourceRulePriority }
}

/// What must change in the kernel to get from what is there to what is wanted: added first (tables before rules,
/// so no marked socket ever looks up an empty table and falls through to main), removed last.
public struct SteeringDiff: Equatable, Sendable {
    public var addRoutes: [SteerRoute] = []
    public var addRules: [SteerRule] = []
    public var deleteRules: [SteerRule] = []
    public var deleteRoutes: [SteerRoute] = []

    public var isEmpty: Bool { addRoutes.isEmpty && addRules.isEmpty && deleteRules.isEmpty && deleteRoutes.isEmpty }

    /// `plan`: nil to remove everything of steering's. `main`: the main table's routes; `tables`: the routes of
    /// steering's tables now; `rules`: steering's rules now (at its priority).
    public init(plan: SteeringPlan?, main: [SteerRoute], tables: [SteerRoute], rules: [SteerRule]) {
        var wantRoutes: Set<SteerRoute> = []
        if let plan {
            var tables = Set(plan.allowances)
            if !plan.sourceRules.isEmpty { tables.insert(SteeringPlan.nowhere) }
            for a in tables { wantRoutes.formUnion(plan.routes(for: a, main: main)) }
        }
        let haveRoutes = Set(tables)
        addRoutes = wantRoutes.subtracting(haveRoutes).sorted { $0.description < $1.description }
        deleteRoutes = haveRoutes.subtracting(wantRoutes).sorted { $0.description < $1.description }
        let wantRules = Set(plan?.rules ?? [])
        let haveRules = Set(rules)
        func order(_ a: SteerRule, _ b: SteerRule) -> Bool {
            (a.table, a.family.rawValue, a.mark, a.source ?? "") < (b.table, b.family.rawValue, b.mark, b.source ?? "")
        }
        addRules = wantRules.subtracting(haveRules).sorted(by: order)
        deleteRules = haveRules.subtracting(wantRules).sorted(by: order)
    }
}

extension Ruleset {
    /// A unit cgroup the rules name, and the app (its index in the policy) that owns it.
    public struct UnitOwner: Equatable, Sendable {
        public var id: UInt64
        public var level: Int
        public var app: Int
        /// For a unit of a user's own manager, that manager's uid (`user@UID.service` in its path): the unit may only
        /// narrow what the uid may do, so its mark is the intersection of both allowances.
        public var userUID: UInt32? = nil

        /// The uid of the user manager a cgroup path lies under, if any (its first `user@UID.service` component).
        /// By the path's bytes, in one pass: a user's unit names may be thousands of bytes long and this runs for
        /// every unit of every load; split into Strings, it was a third of the loop's time while users made and
        /// removed long-named cgroups (SoakTests).
        public static func userUID(path: String) -> UInt32? {
            var path = path
            return path.withUTF8 { b -> UInt32? in
                let prefix: [UInt8] = Array("user@".utf8), suffix: [UInt8] = Array(".service".utf8)
                var start = 0
                while start < b.count {
                    var end = start
                    while end < b.count && b[end] != 0x2F { end += 1 }
                    if end - start >= prefix.count + suffix.count,
                       b[start..<(start + prefix.count)].elementsEqual(prefix), b[(end - suffix.count)..<end].elementsEqual(suffix) {
                        return UInt32(String(decoding: UnsafeBufferPointer(rebasing: b[(start + prefix.count)..<(end - suffix.count)]),
                                             as: UTF8.self))
                    }
                    start = end + 1
                }
                return nil
            }
        }
    }
}
