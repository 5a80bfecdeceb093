// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// The nftables ruleset that makes the kernel follow the verdicts (Mode=block), built from the engine's state:
/// one `table inet netpermd` (IPv4 and IPv6 alike), loaded as one transaction. Pure: text in, text out.
///
/// Shape (docs/ENFORCEMENT.md): one verdict map from link name to its kind's chain (`oifname` matches survive a
/// link being deleted and re-created, and a link that appears later is one map element); per kind a chain that
/// looks the socket's unit cgroup up, then its uid, in verdict maps (`accept` or `goto deny`), so 10,000 apps are
/// map elements, not rules. A metered link's chain first checks `Metered=` the same way (`return` or `goto deny`),
/// then its kind. The first matching `[App]` wins, as in the daemon's own matching; a unit's cgroup comes before a
/// uid (the kernel has no executables). Loopback and links of no kind always pass, as does every socket no map
/// names. The kernel's membership reports (which no socket of an app's sends) leave no wwan link while some app may
/// not use it (`reportKinds`).
///
/// **Every packet out of a link pays for these rules**, so there are as few as the policy needs: one link lookup,
/// and in the kind's chain only the lookups whose maps have elements (measured with 64-byte datagrams on this
/// project's 2-vCPU VM: ~80 ns per rule evaluated, ~900 ns a packet with every lookup present against a ~4 µs
/// `sendto()`). A map that gains its first element or loses its last changes its chain: `update(from:)` writes
/// that chain again in the same transaction.
///
/// **Users' own units only narrow** (docs/SECURITY.md). A user names the units of their own manager
/// (`user@UID.service/...`, `UserUnit=`, and the scopes `netpermctl run` starts as a user) as they like, so such a
/// unit may take away what its uid may do, never add to it: its maps (`user6_KIND`, `user5_KIND`, `user4_KIND`,
/// deepest first, before the system units' and the uid's) hold only the unit's denials (`goto deny` or its ask
/// chain); where the unit's app allows, there is no element and the packet goes on to the system units' maps (which
/// never match below `user@UID.service`) and then to its uid's verdict. A system unit's allow accepts (or, for
/// metered, returns to the kind's check): root or the system's manager named it. Anything that reads this order
/// (steering's marks) must keep it: a user unit's allow is "no opinion", never "allowed".
public struct Ruleset: Equatable, Sendable {
    public static let family = "inet"
    public static let table = "netpermd"
    /// The kinds with a permission, in the order their rules come.
    public static let kinds: [LinkKind] = [.wifi, .wwan, .ethernet, .other]
    /// What the sets and maps are per: `roaming` and `metered` (checked first, on roaming and metered links only),
    /// then the kinds.
    public static let dimensions: [PolicyDimension] = [.roaming, .metered] + kinds.compactMap { PolicyDimension(kind: $0) }

    /// The nft script: creates the table if absent, deletes it, and adds it whole. nft runs a script as one
    /// transaction, so the old rules hold until the new ones are in force (no window), and a failure changes
    /// nothing.
    public var text: String
    /// Why each of the policy's apps is not enforced; an app absent from here is enforced.
    public var notEnforced: [String: Enforcement.Why]
    /// What the rules hold, counted (STATUS, METRICS, the log, and how large a change may grow).
    public var counts: Counts
    /// Link names or cgroup paths nft cannot be given safely (a quote, a wildcard, a control character): left
    /// out, so those links or cgroups are not enforced. The daemon logs them.
    public var skipped: [String]
    /// The ids of the unit cgroups the rules name, in the order of their paths: not in the text (nft resolves the
    /// paths when loading), so a cgroup made again at the same path shows here only.
    public var unitIDs: [UInt64]
    /// The daemon's descriptors of cgroups the text names (`UnitCgroups.nftPath`): open while these rules may be
    /// loaded again (a repair loads the rules in force as they were). Data beside the text, never read back from it.
    public internal(set) var handles: Set<Int32> = []
    /// The part of the text that depends on the links alone: what `withLinks` writes again.
    var linkSection: LinkSection
    /// Every verdict map's elements and every pending app's chain, as in the text: all of the text that depends on
    /// the apps (the rest is the same for every build), so that `update(from:)` can change just what differs.
    var maps: [VerdictMap]
    var askChains: [AskChain]
    /// The id of every unit cgroup that existed at this build (named by the maps or not), by the path nft is given:
    /// an element can be deleted by its path only while the path still resolves to the id it holds.
    var cgroupIDs: [String: UInt64]
    /// Who owns each uid and unit cgroup: what steering marks (SteeringPlan).
    public var owned: Owned
    /// The maps the chains look up (`usedMaps`, and `build`'s `lookedUp`): an element added to another one changes
    /// nothing.
    var used: Set<String> = []

    /// How much the rules hold.
    public struct Counts: Equatable, Sendable {
        /// How many of the policy's apps these rules enforce (those of the policy they were built from).
        public var appsEnforced = 0
        public var uids: Int
        public var cgroups: Int
        public var links: Int
        /// Elements of every set and map together.
        public var elements: Int
        /// Chains that log a pending app and kind before rejecting: one per app and undecided `ask` kind.
        public var pendingChains: Int
    }

    public var appsEnforced: Int { get { counts.appsEnforced } set { counts.appsEnforced = newValue } }
    public var uids: Int { get { counts.uids } set { counts.uids = newValue } }
    public var cgroups: Int { get { counts.cgroups } set { counts.cgroups = newValue } }
    public var links: Int { get { counts.links } set { counts.links = newValue } }
    public var elements: Int { get { counts.elements } set { counts.elements = newValue } }
    public var pendingChains: Int { get { counts.pendingChains } set { counts.pendingChains = newValue } }

    /// The `links` map's part of the text.
    struct LinkSection: Equatable, Sendable {
        /// The elements of the `links` map, as in the text (`"wwan0" : goto metered_wwan`).
        var elements: [MapElement]
        /// Where the text after the `links` map starts (a UTF-8 offset): what `withLinks` keeps.
        var appRulesOffset: Int
        /// How many of `skipped` (the first ones) are link names; the rest are cgroup paths.
        var skippedLinks: Int
    }

    var linkElements: [MapElement] { linkSection.elements }

    /// Who owns each uid and unit cgroup (an index into the policy's apps).
    public struct Owned: Equatable, Sendable {
        public var uids: [UInt32: Int] = [:]
        public var units: [UnitOwner] = []
    }

    public var uidOwners: [UInt32: Int] { owned.uids }
    public var unitOwners: [UnitOwner] { owned.units }

    /// Of `used`, the units' maps: kept looked up by the engine once some unit's elements were (`build`'s
    /// `lookedUp`) until the policy changes, so that a unit made while none of its level is can be named by its
    /// elements alone (Engine+FreshUnits.swift).
    var unitLookups: Set<String> {
        used.filter { $0.hasPrefix("unit") || $0.hasPrefix("user") || $0.hasPrefix("tag_unit") }
    }

    /// The NFLOG group the rules log an app's first rejected packets of a pending (`ask`) kind to, and the daemon
    /// reads (docs/ENFORCEMENT.md, "The first blocked connection"). One process per network namespace can bind a
    /// group: an unusual number keeps clear of ulogd's and others' (0, 1, 2, ...).
    public static let logGroup: UInt16 = 28272
    /// Every log prefix starts so: "netpermd:APP:KIND".
    static let logPrefixHead = "netpermd:"
    /// nft refuses a log prefix of more than 127 bytes (the kernel's NF_LOG_PREFIXLEN is 128 with its NUL).
    static let logPrefixMax = 127

    /// The log prefix that names the app and kind of a rejected packet; nil when it would not fit (an app name of
    /// more than 100 or so bytes: its packets are rejected without being logged).
    public static func logPrefix(app: String, kind: PolicyDimension) -> String? {
        let p = logPrefixHead + app + ":" + kind.rawValue
        return p.utf8.count <= logPrefixMax && isSafe(p) ? p : nil
    }

    /// The app and kind a log prefix names; nil for anything else (another tool's prefix on the same group, a
    /// truncated or malformed one).
    public static func parseLogPrefix(_ prefix: String) -> (app: String, kind: PolicyDimension)? {
        guard prefix.hasPrefix(logPrefixHead) else { return nil }
        let rest = prefix.dropFirst(logPrefixHead.count)
        guard let colon = rest.lastIndex(of: ":"), let kind = PolicyDimension(rawValue: String(rest[rest.index(after: colon)...]))
        else { return nil }
        let app = String(rest[..<colon])
        guard AppPolicy.isValidID(app) else { return nil }
        return (app, kind)
    }

    /// The table that holds the new rules while a whole load replaces the table (`handover`).
    public static let handoverTable = "netpermd_handover"

    /// The script that removes a table, whether or not it exists.
    static func dropping(_ name: String) -> String { "table \(family) \(name) {}\ndelete table \(family) \(name)\n" }

    /// The script that removes the table (and a handover's, left by a daemon killed during one), whether or not
    /// they exist.
    public static let removal = dropping(table) + dropping(handoverTable)

    /// How a whole ruleset (`text`) is loaded, given which of the two tables the kernel has. Replacing a table in
    /// force must leave no moment in which neither holds: the kernel reads a base chain's rules for the generation a
    /// packet started with, but map elements for the generation now, so a packet racing the commit that deletes one
    /// table and adds the next saw neither's rules (measured: 26 datagrams of an app denied before and after, in 150
    /// loads). So the new rules go into a table of their own first, then the table is replaced while that one
    /// holds, then it goes: three transactions, each leaving one table unchanged that rejects what the new rules
    /// reject. With no table in force, one transaction (and the removal of a handover's table a daemon killed
    /// during one left, once the new table holds).
    public static func wholeLoad(_ text: String, tableInForce: Bool, handoverLeft: Bool) -> [String] {
        let head = dropping(table) + "table \(family) \(table) {\n"
        guard text.hasPrefix(head) else { return [text] }
        guard tableInForce else { return handoverLeft ? [text, dropping(handoverTable)] : [text] }
        let guardText = dropping(handoverTable) + "table \(family) \(handoverTable) {\n" + text.dropFirst(head.count)
        return [guardText, text, dropping(handoverTable)]
    }

    /// One app's permissions are looked up through `permissions` (the policy's, with decisions applied): only
    /// `allow` passes; `deny` and `ask` are rejected, and an undecided `ask` is logged first (rate-limited) to
    /// `logGroup`, so that the daemon can raise the prompt. A uid's element, and a unit of that uid's own manager,
    /// take `ownPermissions` instead where it says something: a user's decisions for their own processes, which
    /// only that uid's sockets get (a system unit's sockets can be anyone's, so it keeps the app's).
    public static func build(apps: [AppPolicy], permissions: (AppPolicy) -> PermissionSet,
                             ownPermissions: (AppPolicy, UInt32) -> PermissionSet? = { _, _ in nil }, links: [Link],
                             cgroups: UnitCgroups, tags given: [String: UInt32]? = nil, lookedUp: Set<String> = [],
                             installed: InstalledDesktopApps = InstalledDesktopApps()) -> Ruleset {
        let linkPart = LinkPart(links)
        let owners = Owners(apps: apps, cgroups: cgroups, installed: installed)
        let skipped = linkPart.skipped + owners.skipped
        let uidOwner = owners.uidOwner, cgroupOwner = owners.cgroupOwner
        // Each app's permissions (a uid's own instead, where it has some) and tag (ConnectionTags, kept in a TagTable:
        // it names its connections and pending chains, whatever its place), by its index: a DECIDE builds every
        // app's rules again, and hashing a key per element and kind was a fifth of it.
        let tags = given ?? ConnectionTags.assign(apps.map(\.id))
        let appPerms = apps.map(permissions), appTags = apps.map { tags[$0.id] ?? 0 }
        func appPermissions(_ i: Int, uid: UInt32?) -> PermissionSet {
            uid.flatMap { ownPermissions(apps[i], $0) } ?? appPerms[i]
        }
        // Pending kinds go to a chain of their own that logs before it rejects: the prefix must name the app.
        var askChains: [AskChain] = []
        var askSeen: Set<AskChain.ID> = []
        // `p`: the app's permission for kind `k`, not `allow`.
        func reject(_ i: Int, _ k: PolicyDimension, _ p: Permission) -> MapVerdict {
            guard p == .ask else { return .deny }
            let id = AskChain.ID(tag: appTags[i], kind: k)
            // Its chain is made once, by the first element that asks (an app's uids, units and tag all do).
            guard askSeen.insert(id).inserted else { return .ask(id) }
            guard let prefix = logPrefix(app: apps[i].id, kind: k) else {
                askSeen.remove(id)
                return .deny
            }
            askChains.append(AskChain(id: id, prefix: prefix))
            return .ask(id)
        }

        var t = ""
        t.reserveCapacity(4096 + 64 * (uidOwner.count + cgroupOwner.count) * kinds.count)
        t += linkPart.text
        var elements = linkPart.elements.count
        let appRulesOffset = t.utf8.count
        let maps = verdictMaps(owners: owners, apps: apps, tags: tags, appTags: appTags,
                               permissions: { appPermissions($0, uid: $1) }, reject: { reject($0, $1, $2) })
        for m in maps {
            elements += m.elements.count
            set(&t, m.name, type: m.key + " : " + m.value, m.elements)
        }
        let used = usedMaps(maps).union(lookedUp)
        writeChains(into: &t, askChains: askChains, used: used)
        t += "}\n"

        let notEnforced = notEnforcedApps(apps, owning: Set(uidOwner.values).union(cgroupOwner.map(\.app)), cgroups: cgroups)
        let counts = Counts(uids: uidOwner.count, cgroups: cgroupOwner.count, links: linkPart.elements.count,
                            elements: elements, pendingChains: askChains.count)
        let section = LinkSection(elements: linkPart.elements, appRulesOffset: appRulesOffset,
                                  skippedLinks: linkPart.skipped.count)
        let owned = Owned(uids: uidOwner,
                          units: cgroupOwner.map { UnitOwner(id: $0.cgroup.id, level: $0.cgroup.level, app: $0.app,
                                                             userUID: $0.cgroup.user ? UnitOwner.userUID(path: $0.cgroup.path) : nil) })
        var r = Ruleset(text: t, notEnforced: notEnforced, counts: counts, skipped: skipped,
                       unitIDs: cgroupOwner.map(\.cgroup.id), linkSection: section, maps: maps, askChains: askChains,
                       cgroupIDs: Dictionary(cgroups.units.compactMap { c in cgroups.nftPath(c).map { ($0, c.id) } },
                                             uniquingKeysWith: { a, _ in a }),
                       owned: owned)
        r.appsEnforced = apps.count - notEnforced.count
        r.used = used
        r.handles = owners.handles { _ in true }
        return r
    }

    /// The verdict maps: each kind's by uid, by user's unit and by system unit at each level, the tags' marks, and
    /// each kind's by tag. `permissions` gives app `i`'s (a uid's own, where given), `reject` the verdict of a
    /// permission that is not `allow`; `appTags` each app's tag by its index.
    private static func verdictMaps(owners: Owners, apps: [AppPolicy], tags: [String: UInt32], appTags: [UInt32],
                                    permissions appPermissions: (Int, UInt32?) -> PermissionSet,
                                    reject: (Int, PolicyDimension, Permission) -> MapVerdict) -> [VerdictMap] {
        var maps: [VerdictMap] = []
        let uidOwner = owners.uidOwner, cgroupOwner = owners.cgroupOwner, appIndex = owners.appIndex
        // Only denials need a uid element: a uid no element names passes anyway.
        let uidSets = owners.sortedUIDs.map { uid in
            let app = uidOwner[uid]!
            return (uid: uid, app: app, set: appPermissions(app, uid))
        }
        for k in dimensions {
            maps.append(VerdictMap(name: "uid_\(k.rawValue)", key: "uid", elements: uidSets.compactMap { u in
                let p = u.set[k]
                return p == .allow ? nil : MapElement(key: .uid(u.uid), verdict: reject(u.app, k, p))
            }))
        }
        // A user's unit names only what it takes away: where its app allows, the packet goes on to its uid's verdict.
        for level in UnitCgroups.userLevels {
            let owned = cgroupOwner.filter { $0.cgroup.user && $0.cgroup.level == level }
            for k in dimensions {
                maps.append(VerdictMap(name: "user\(level)_\(k.rawValue)", key: "cgroupsv2", elements: owned.compactMap {
                    let p = appPermissions($0.app, UnitOwner.userUID(path: $0.cgroup.path))[k]
                    return p == .allow ? nil : MapElement(key: .cgroup($0.path, $0.cgroup.id), verdict: reject($0.app, k, p))
                }))
            }
        }
        // A unit's element says accept (return, for metered: the kind is checked next) too: its sockets must not
        // fall through to their uid's verdict.
        for level in UnitCgroups.levels {
            let owned = cgroupOwner.filter { !$0.cgroup.user && $0.cgroup.level == level }
            for k in dimensions {
                let pass: MapVerdict = k.isOverlay ? .pass : .accept
                maps.append(VerdictMap(name: "unit\(level)_\(k.rawValue)", key: "cgroupsv2", elements: owned.map {
                    let p = appPermissions($0.app, nil)[k]
                    return MapElement(key: .cgroup($0.path, $0.cgroup.id), verdict: p == .allow ? pass : reject($0.app, k, p))
                }))
            }
        }
        // Each connection's app, in its conntrack mark from its first packet (ConnectionTags).
        maps += owners.tagMaps(apps: apps, tags: tags)
        // A user's unit's refused packet is logged as its unit's (ReportRefusals), every unit of an app's.
        let users = cgroupOwner.filter { $0.cgroup.user && UnitCgroups.userLevels.contains($0.cgroup.level) }
        maps.append(VerdictMap(name: ReportUnits.mapName, key: "cgroupsv2", value: "mark", elements: users.map {
            MapElement(key: .cgroup($0.path, $0.cgroup.id), verdict: .mark(ReportUnits.mark($0.cgroup.id)))
        }))
        let unitApps = owners.systemUnitApps
        // A tag's verdict, for packets no socket owner names: denials, and a unit's allow (whose uid must not be
        // consulted instead, as above). Every app's, not only those owning something now: a connection outlives
        // the cgroup it was tagged in.
        // Each app's tag looked up once: the comparison hashed two ids (10,001 apps: 5% of a reload on the loop).
        let tagged = Set(appIndex.values).map { (i: $0, tag: appTags[$0]) }.sorted { $0.tag < $1.tag }
            .map { (i: $0.i, tag: $0.tag, set: appPermissions($0.i, nil), unit: unitApps.contains($0.i)) }
        for k in dimensions {
            let pass: MapVerdict = k.isOverlay ? .pass : .accept
            maps.append(VerdictMap(name: "conn_\(k.rawValue)", key: "mark", elements: tagged.compactMap { a in
                let p = a.set[k]
                let verdict = p == .allow ? (a.unit ? pass : nil) : reject(a.i, k, p)
                return verdict.map { MapElement(key: .tag(a.tag), verdict: $0) }
            }))
        }
        return maps
    }

    /// The chains after the maps: deny, the apps' pending kinds' (logging, then rejecting), the links' and kinds'.
    private static func writeChains(into t: inout String, askChains: [AskChain], used: Set<String>) {
        // A reset for TCP: connect() fails at once with ECONNREFUSED, an established connection with ECONNRESET,
        // and an orphaned socket goes. The ICMP error reached a connect() only after the SYN was sent again a second
        // later (IPv4 EHOSTUNREACH, IPv6 EACCES: the error comes while connect() holds the socket, which makes it a
        // soft one), io_uring's CONNECT reported success, and an established IPv4 connection stalled until its
        // time-out. Others get ICMP admin-prohibited: sendto() fails at once with EPERM; a drop would leave the app
        // waiting.
        t += "\tchain refuse {\n\t\tmeta l4proto tcp counter reject with tcp reset\n"
        t += "\t\tcounter reject with icmpx admin-prohibited\n\t}\n"
        // A denied app's packet is logged for the privacy report first (ReportRefusals: by its user's unit or its
        // tag, rate-limited per app), then rejected; a pending app's goes to `refuse` from its own chain (logged as
        // waiting, for the prompt).
        t += ReportRefusals.setText
        for c in ReportRefusals.chains(.denied) { t += "\tchain \(c.name) {\n" + c.rules.map { "\t\t\($0)\n" }.joined() + "\t}\n" }
        t += "\tchain deny {\n\t\t\(ReportRefusals.jump)\n\t\tgoto refuse\n\t}\n"
        // At most 5 messages a second per app and kind: the daemon needs the first, never one per packet (the engine
        // raises one prompt); a burst of 5 lets a connect just after another one (TCP, then UDP) be seen.
        for chain in askChains { chain.write(to: &t) }
        func chain(_ name: String, _ rules: [String]) {
            t += "\tchain \(name) {\n"
            if let hook = hooks[name] { t += "\t\t" + hook + "\n" }
            for rule in rules { t += "\t\t" + rule + "\n" }
            t += "\t}\n"
        }
        let chains = chainRules(used: used)
        for c in chains where hooks[c.chain] == nil { chain(c.chain, c.rules) }
        // A link's chain checks what is on top of its kind first: Roaming= when roaming, Metered= when metered.
        for k in dimensions where !k.isOverlay {
            chain("metered_\(k.rawValue)", ["jump metered", "goto kind_\(k.rawValue)"])
            chain("roaming_\(k.rawValue)", ["jump roaming", "goto kind_\(k.rawValue)"])
            chain("roaming_metered_\(k.rawValue)", ["jump roaming", "jump metered", "goto kind_\(k.rawValue)"])
        }
        chain("output", ["oifname vmap @links"])
        for c in chains where hooks[c.chain] != nil { chain(c.chain, c.rules) }
    }

    /// Why each app that owns no uid and no unit cgroup (`owning`: the indices of those that do) is not enforced.
    private static func notEnforcedApps(_ apps: [AppPolicy], owning: Set<Int>, cgroups: UnitCgroups)
        -> [String: Enforcement.Why] {
        var notEnforced: [String: Enforcement.Why] = [:]
        for (i, app) in apps.enumerated() where !owning.contains(i) {
            let why: Enforcement.Why
            if !app.uids.isEmpty {
                why = .shadowed
            } else if !app.units.isEmpty || !app.userUnits.isEmpty {
                // Its unit's cgroup exists but belongs to an earlier app: shadowed; none exists: absent.
                let exists = cgroups.units.contains { c in (c.user ? app.userUnits : app.units).contains { $0.matches(c.unit) } }
                why = exists ? .shadowed : .cgroupAbsent
            } else {
                why = .executableOnly
            }
            notEnforced[app.id] = why
        }
        return notEnforced
    }

    /// Who owns each uid and unit cgroup, as AppResolver orders them (the answers' order: a unit's app, then its
    /// uid's; the kernel has no executables). What the rules judge, and what connections are tagged with
    /// (ConnectionTags): usage counting tags alike (UsageRules).
    struct Owners {
        var uidOwner: [UInt32: Int] = [:]
        var sortedUIDs: [UInt32] = []
        var cgroupOwner: [(cgroup: UnitCgroup, path: String, app: Int)] = []
        /// Each app's index, by id.
        var appIndex: [String: Int] = [:]
        /// Cgroup paths nft cannot be given safely.
        var skipped: [String] = []

        /// The descriptors through which the owned cgroups `named` are given to nft.
        func handles(_ named: (UnitCgroup) -> Bool) -> Set<Int32> {
            Set(cgroupOwner.filter { named($0.cgroup) }.compactMap(\.cgroup.handle))
        }

        init(apps: [AppPolicy], cgroups: UnitCgroups, installed: InstalledDesktopApps) {
            let resolver = AppResolver(apps: apps, installed: installed)
            appIndex = resolver.appIndex
            for app in apps {
                for uid in app.uids where uidOwner[uid] == nil { uidOwner[uid] = resolver.uidOwner(uid) }
            }
            for c in cgroups.units {
                guard let owner = Ruleset.owner(of: c, resolver), let path = cgroups.nftPath(c) else { continue }
                guard isSafe(path) else { skipped.append(path); continue }
                cgroupOwner.append((c, path, owner))
            }
            sortedUIDs = uidOwner.keys.sorted()
        }

        /// The maps that give a new connection its app's tag: by uid, then by system unit, deepest last (a unit's
        /// verdict comes before its uid's). Users' own units are not tagged: their orphaned sockets keep their
        /// cgroup, and so their unit's elements, while those stay.
        func tagMaps(apps: [AppPolicy], tags: [String: UInt32]) -> [VerdictMap] {
            var maps = [VerdictMap(name: "tag_uid", key: "uid", value: "mark", elements: sortedUIDs.map {
                MapElement(key: .uid($0), verdict: .mark(tags[apps[uidOwner[$0]!].id]!))
            })]
            for level in UnitCgroups.levels {
                let owned = cgroupOwner.filter { !$0.cgroup.user && $0.cgroup.level == level }
                maps.append(VerdictMap(name: "tag_unit\(level)", key: "cgroupsv2", value: "mark", elements: owned.map {
                    MapElement(key: .cgroup($0.path, $0.cgroup.id), verdict: .mark(tags[apps[$0.app].id]!))
                }))
            }
            return maps
        }

        /// The apps owning a system unit's cgroup the tag maps name.
        var systemUnitApps: Set<Int> {
            Set(cgroupOwner.lazy.filter { !$0.cgroup.user && UnitCgroups.levels.contains($0.cgroup.level) }.map(\.app))
        }

        /// The apps whose connections carry their tag: those owning a uid or such a cgroup.
        var taggedApps: Set<Int> { Set(uidOwner.values).union(systemUnitApps) }
    }

    /// How connections are tagged with their app: the tag maps and the rules of the chains that use them.
    struct Tagging: Equatable, Sendable {
        var maps: [VerdictMap]
        /// `chain tag` (a new connection, from its socket) and `chain tag_in` (an incoming one, from its listener).
        var tag: [String]
        var tagIn: [String]
        /// The apps whose connections get their tag.
        var taggedApps: Set<String>
        /// The descriptors the tag maps (and `userUnits`) name cgroups through.
        var handles: Set<Int32> = []
        /// Users' own units an app owns: not tagged, but counted apart as their user's own app (UsageRules).
        var userUnits: [UserUnit] = []

        struct UserUnit: Equatable, Sendable {
            var level: Int
            /// The cgroup as nft is given it (`.cgroup`).
            var key: Key
            var id: UInt64
            var owner: UserApp
        }
    }

    /// The app owning unit cgroup `c` (AppResolver's `unitMatch`, for its path's user): nil for a desktop app no
    /// `[App]` of `apps` names (the engine adds one for each that runs: Config.addingDesktopApps).
    static func owner(of c: UnitCgroup, _ resolver: AppResolver) -> Int? {
        let uid = c.user ? UnitOwner.userUID(path: c.path) : nil
        if c.user, uid == nil { return nil }
        return resolver.unitMatch(unit: c.unit, slice: c.slice, user: c.user, uid: uid)?.app
    }

    /// The tagging `build` puts in the rules, for these apps and cgroups: what usage counting tags with too.
    static func tagging(apps: [AppPolicy], cgroups: UnitCgroups, tags: [String: UInt32]? = nil,
                        installed: InstalledDesktopApps = InstalledDesktopApps()) -> Tagging {
        let owners = Owners(apps: apps, cgroups: cgroups, installed: installed)
        let maps = owners.tagMaps(apps: apps, tags: tags ?? ConnectionTags.assign(apps.map(\.id)))
        let chains = chainRules(used: usedMaps(maps))
        let userUnits = owners.cgroupOwner.compactMap { o -> Tagging.UserUnit? in
            guard o.cgroup.user, UnitCgroups.userLevels.contains(o.cgroup.level),
                  let uid = UnitOwner.userUID(path: o.cgroup.path) else { return nil }
            return Tagging.UserUnit(level: o.cgroup.level, key: .cgroup(o.path, o.cgroup.id), id: o.cgroup.id,
                                    owner: UserApp(uid: uid, app: apps[o.app].id))
        }
        return Tagging(maps: maps, tag: chains.first { $0.chain == "tag" }!.rules,
                       tagIn: chains.first { $0.chain == "tag_in" }!.rules,
                       taggedApps: Set(owners.taggedApps.map { apps[$0].id }),
                       handles: owners.handles {
                           $0.user ? UnitCgroups.userLevels.contains($0.level) : UnitCgroups.levels.contains($0.level)
                       },
                       userUnits: userUnits)
    }

    /// What the links alone decide: the `links` map, at the head of the text.
    private struct LinkPart {
        /// Each link of a kind goes to its kind's chain, through `Roaming=` first when roaming and `Metered=` when
        /// metered.
        var elements: [MapElement] = []
        var skipped: [String] = []
        /// The text up to the first of the app rules.
        var text = dropping(table) + "table \(family) \(table) {\n"

        init(_ links: [Link]) {
            for l in links {
                guard let d = PolicyDimension(kind: l.kind) else { continue }
                guard isSafe(l.name) else { skipped.append(l.name); continue }
                let head = (l.roaming == true ? "roaming_" : "") + (l.metered ? "metered_" : "")
                elements.append(MapElement(key: .ifname(l.name), verdict: .chain((head.isEmpty ? "kind_" : head) + d.rawValue)))
            }
            set(&text, "links", type: "ifname : verdict", elements)
        }
    }

    /// These rules with other links: what `build` gives for the same apps, permissions and cgroups and these
    /// links, without building the apps' maps again (a link appearing with 10,000 apps in the policy costs its
    /// map, not the whole table; RulesetTests checks both agree). `update(from:)` then finds only the links changed.
    public func withLinks(_ links: [Link]) -> Ruleset {
        let part = LinkPart(links)
        var r = self
        let tail = text.utf8.index(text.utf8.startIndex, offsetBy: linkSection.appRulesOffset)
        var t = part.text
        t.reserveCapacity(part.text.utf8.count + text.utf8.count - linkSection.appRulesOffset)
        r.linkSection = LinkSection(elements: part.elements, appRulesOffset: t.utf8.count, skippedLinks: part.skipped.count)
        t += text[tail...]
        r.text = t
        r.links = part.elements.count
        r.elements = elements - linkElements.count + part.elements.count
        r.skipped = part.skipped + skipped.dropFirst(linkSection.skippedLinks)
        return r
    }

    /// The chain that checks dimension `k`: `metered`, `roaming`, or `kind_KIND`.
    static func chainName(_ k: PolicyDimension) -> String { k.isOverlay ? k.rawValue : "kind_" + k.rawValue }

    /// The maps that have elements: only those are looked up. And `reports_KIND` for a kind of `reportKinds` that
    /// some owner of a uid or unit cgroup may not use (by its kind or by `Metered=`): not a map, but the chains'
    /// rules depend on it too.
    static func usedMaps(_ maps: [VerdictMap]) -> Set<String> {
        var used = Set(maps.lazy.filter { !$0.elements.isEmpty }.map(\.name))
        // The maps of those who own a uid or a unit cgroup (not the tags': those name apps that may own nothing).
        let owners = ["uid"] + UnitCgroups.userLevels.map { "user\($0)" } + UnitCgroups.levels.map { "unit\($0)" }
        for kind in reportKinds {
            guard let d = PolicyDimension(kind: kind) else { continue }
            let names = Set([d, .metered, .roaming].flatMap { dimension in owners.map { "\($0)_\(dimension.rawValue)" } })
            let keptOff = maps.contains { m in
                names.contains(m.name) && m.elements.contains { e in
                    switch e.verdict {
                    case .deny, .ask: return true
                    case .accept, .pass, .mark, .chain: return false
                    }
                }
            }
            if keptOff { used.insert("reports_" + d.rawValue) }
        }
        return used
    }

    /// The kinds whose links carry no membership report (IGMP, MLD) while some app may not use them
    /// (docs/ENFORCEMENT.md, "Membership reports"). The kernel sends a report for every socket's join, with the
    /// groups and sources the app chose, from a timer and no socket of the app's, so no rule can tell whose it is:
    /// dropping them all is the only way to keep a denied app's out. Cellular links only: their carriers route no
    /// multicast to a handset, while on Wi-Fi and ethernet the machine's own memberships need their reports (IPv6
    /// neighbour discovery through MLD-snooping switches, mDNS, SSDP).
    static let reportKinds: [LinkKind] = [.wwan]

    /// Every IGMP message (reports, leaves) and MLD's reports and dones. After the owner test: only packets with no
    /// socket owner (the kernel's) reach them; a socket's own (a raw socket) is judged as its app's.
    static let reportDrops = ["meta l4proto igmp counter drop",
                              "icmpv6 type { mld-listener-report, mld-listener-done, mld2-listener-report } counter drop"]

    /// Whether dimension `k`'s chain sends packets with a socket owner to `owned_KIND`: when it judges the others by
    /// their connection's tag, or drops membership reports (which have none).
    static func splitsOwners(_ k: PolicyDimension, used: Set<String>) -> Bool {
        used.contains("conn_\(k.rawValue)") || used.contains("reports_\(k.rawValue)")
    }

    /// The base chains' hooks. `input` tags a server's connections on their SYN, from the listener's cgroup.
    static let hooks = ["output": "type filter hook output priority filter; policy accept;",
                        "input": "type filter hook input priority filter; policy accept;"]

    /// Every chain whose rules depend on which maps have elements, with its rules, in the text's order: the tagging
    /// chains, then each dimension's (`metered` first: its socket owners' chain, then its own), then `input`.
    /// Built from `used` alone, so that an update can write a chain with the lookups of two builds together (a map
    /// with no elements matches nothing).
    static func chainRules(used: Set<String>) -> [(chain: String, rules: [String])] {
        let unitTags = UnitCgroups.levels.filter { used.contains("tag_unit\($0)") }
        var tag: [String] = used.contains("tag_uid") ? ["ct mark set meta skuid map @tag_uid"] : []
        var tagIn: [String] = []
        for level in unitTags {
            tag.append("ct mark set socket cgroupv2 level \(level) map @tag_unit\(level)")
            tagIn.append(tag.last!)
        }
        var out: [(chain: String, rules: [String])] = [("tag", tag), ("tag_in", tagIn)]
        for k in dimensions {
            let owned = splitsOwners(k, used: used) ? ownerLookups(k, used: used, uid: true) : []
            out.append(("owned_" + k.rawValue, owned))
            out.append((chainName(k), lookups(k, used: used)))
        }
        out.append(("input", tagIn.isEmpty ? [] : ["ct state new tcp flags & (syn | ack) == syn ct mark 0 jump tag_in"]))
        return out
    }

    /// The rules of dimension `k`'s chain. A new connection is tagged with its app first. With tags to look up
    /// (`conn_KIND`) or reports to drop, a packet whose socket has an owner (`meta skuid` says) goes on to
    /// `owned_KIND`, the socket's own lookups; one whose socket has none (the kernel's membership reports, dropped;
    /// an orphaned socket's: no file; a time-wait socket's) is judged by its connection's tag, then by its cgroup,
    /// which an orphaned socket keeps (a user's own unit narrows it still). Its tag comes first: a cgroup that went
    /// leaves its elements, whose verdicts no longer follow its app.
    static func lookups(_ k: PolicyDimension, used: Set<String>) -> [String] {
        var rules: [String] = []
        if used.contains("tag_uid") || UnitCgroups.levels.contains(where: { used.contains("tag_unit\($0)") }) {
            rules.append("ct state new ct mark 0 jump tag")
        }
        guard splitsOwners(k, used: used) else { return rules + ownerLookups(k, used: used, uid: true) }
        rules.append("meta skuid 0-4294967295 goto owned_\(k.rawValue)")
        if used.contains("reports_\(k.rawValue)") { rules += reportDrops }
        if used.contains("conn_\(k.rawValue)") { rules.append("ct mark vmap @conn_\(k.rawValue)") }
        return rules + ownerLookups(k, used: used, uid: false)
    }

    /// A socket's lookups for dimension `k`, in the order the first matching app wins: users' units deepest first,
    /// system units, the uid; a lookup only where its map has elements (`used`), as each costs every packet. A
    /// request socket (a SYN-ACK) has its listener's uid but no cgroup: with `uid`, a unit's server is judged by
    /// its connection's tag (from the listener's cgroup, on the SYN) before the uid.
    static func ownerLookups(_ k: PolicyDimension, used: Set<String>, uid: Bool) -> [String] {
        var rules: [String] = []
        for level in UnitCgroups.userLevels.reversed() where used.contains("user\(level)_\(k.rawValue)") {
            rules.append("socket cgroupv2 level \(level) vmap @user\(level)_\(k.rawValue)")
        }
        for level in UnitCgroups.levels.reversed() where used.contains("unit\(level)_\(k.rawValue)") {
            rules.append("socket cgroupv2 level \(level) vmap @unit\(level)_\(k.rawValue)")
        }
        guard uid else { return rules }
        if used.contains("conn_\(k.rawValue)"), UnitCgroups.levels.contains(where: { used.contains("tag_unit\($0)") }) {
            rules.append("tcp flags & (syn | ack) == syn | ack ct mark vmap @conn_\(k.rawValue)")
        }
        if used.contains("uid_\(k.rawValue)") { rules.append("meta skuid vmap @uid_\(k.rawValue)") }
        return rules
    }

    private static func set<S: Sequence>(_ t: inout String, _ name: String, type: String, _ elements: S)
    where S.Element == String {
        let isMap = type.contains(":")
        t += "\t\(isMap ? "map" : "set") \(name) {\n\t\ttype \(type)\n"
        var first = true
        for e in elements {
            t += first ? "\t\telements = { " : ",\n\t\t\t     "
            t += e
            first = false
        }
        if !first { t += " }\n" }
        t += "\t}\n"
    }

    /// A map of these elements, each written in place.
    private static func set(_ t: inout String, _ name: String, type: String, _ elements: [MapElement]) {
        t += "\tmap \(name) {\n\t\ttype \(type)\n"
        for (i, e) in elements.enumerated() {
            t += i == 0 ? "\t\telements = { " : ",\n\t\t\t     "
            e.write(to: &t)
        }
        if !elements.isEmpty { t += " }\n" }
        t += "\t}\n"
    }

    /// Safe inside nft's double quotes: printable, no quote (nft has no escape for it), no `*` (a wildcard in an
    /// ifname set). A backslash is taken literally by nft, as systemd's `\x2d` in unit names needs.
    static func isSafe(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count < 4096
            && s.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F && $0 != 0x22 && $0 != 0x2A }
    }
}
