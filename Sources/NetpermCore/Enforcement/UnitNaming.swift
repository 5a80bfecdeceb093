// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// How a unit cgroup just made is named to the kernel by itself, as the rules in force would name it: its app (the
/// policy's order, AppResolver) and that app's verdict per kind in its level's maps, and for a system unit its
/// connections' tag (Ruleset.build). The engine hands it to the edge whenever the rules in force or the permissions
/// change (`Effect.nameUnits`), and the edge names units with it off the loop as their directory's watch sees them
/// made (docs/ENFORCEMENT.md, "The first moments of a new cgroup"). Pure: the same unit gives the same elements.
public struct UnitNaming: Equatable, Sendable {
    /// Bumped by each hand-over: a unit named with an older one is named again by the engine (its elements may have
    /// changed, or a load of the whole table may have replaced them).
    public var generation: Int
    let apps: [AppPolicy]
    let index: AppResolver
    /// Each app's permissions in the rules (decisions applied), and a user's own for the apps they decided for.
    let permissions: [PermissionSet]
    let own: [Int: [UInt32: PermissionSet]]
    let tags: [UInt32?]
    /// What the rules in force look up, and the pending apps' chains they hold.
    let used: Set<String>
    let asks: Set<Ruleset.AskChain.ID>

    init(generation: Int, apps: [AppPolicy], index: AppResolver, permissions: [PermissionSet],
         own: [Int: [UInt32: PermissionSet]], tags: [UInt32?], inForce: Ruleset? = nil) {
        self.generation = generation; self.apps = apps; self.index = index; self.permissions = permissions
        self.own = own; self.tags = tags
        used = inForce?.used ?? []
        asks = Set(inForce?.askChains.map(\.id) ?? [])
    }

    /// The same permissions, against other rules in force.
    func with(inForce: Ruleset, generation: Int) -> UnitNaming {
        UnitNaming(generation: generation, apps: apps, index: index, permissions: permissions, own: own, tags: tags,
                   inForce: inForce)
    }

    /// What the rules would take away from `c`: its app's denials and undecided `ask`s, in its level's maps. What a
    /// unit just made is named with: a unit named so is held at least as tightly as the rules would hold it (the
    /// kinds its app may use fall through to its uid's verdict, as before it was named: never more than the rules
    /// allow), with one element for each kind it must not use rather than one for every kind and its tag, which the
    /// next load of the rules adds. Empty: nothing to take away (the unit waits for its load); nil: the rules in
    /// force could not take it away by elements alone (a map they do not look up, or a pending kind's chain they
    /// lack: loading either changes the chains, which a load of the rules does).
    public func restrictions(of c: UnitCgroup) -> [UnitElement]? { elements(of: c, restrictionsOnly: true) }

    /// The elements the rules would give `c`, every kind's and its tag, or nil when they alone would not enforce it:
    /// no app owns it; a map the rules in force do not look up, or a pending kind's chain they lack.
    public func elements(of c: UnitCgroup) -> [UnitElement]? { elements(of: c, restrictionsOnly: false) }

    private func elements(of c: UnitCgroup, restrictionsOnly: Bool) -> [UnitElement]? {
        guard let i = Ruleset.owner(of: c, index), let tag = tags[i] else { return nil }
        let uid = c.user ? Ruleset.UnitOwner.userUID(path: c.path) : nil
        if c.user, uid == nil { return nil }
        let p = uid.flatMap { own[i]?[$0] } ?? permissions[i]
        var elements: [UnitElement] = []
        let reported = Ruleset.reportKinds.compactMap(PolicyDimension.init(kind:))
        for k in Ruleset.dimensions {
            let map = (c.user ? "user" : "unit") + "\(c.level)_\(k.rawValue)"
            let value: ElementChanges.Value
            switch p[k] {
            case .allow:
                // A user's unit only takes away; a system unit's allow must not fall through to its uid's verdict.
                if c.user || restrictionsOnly { continue }
                value = k.isOverlay ? .pass : .accept
            case .deny:
                value = .goto("deny")
            case .ask:
                guard Ruleset.logPrefix(app: apps[i].id, kind: k) != nil else { value = .goto("deny"); break }
                let chain = Ruleset.AskChain.ID(tag: tag, kind: k)
                guard asks.contains(chain) else { return nil }
                value = .goto(chain.name)
            }
            // A kind's chain drops membership reports only while some owner is kept off it (Ruleset.usedMaps).
            let keptOff = value != .accept && value != .pass
            let reports = k.isOverlay ? reported : reported.filter { $0 == k }
            guard used.contains(map), !keptOff || reports.allSatisfy({ used.contains("reports_" + $0.rawValue) }) else {
                return nil
            }
            elements.append(UnitElement(map: map, value: value))
        }
        if !c.user, !restrictionsOnly {
            let map = "tag_unit\(c.level)"
            guard used.contains(map) else { return nil }
            elements.append(UnitElement(map: map, value: .mark(tag)))
        }
        return elements
    }

    /// `elements` of each unit (by cgroup id) as one change: every map's additions together.
    public static func additions(_ units: [(id: UInt64, elements: [UnitElement])]) -> ElementChanges {
        var order: [String] = []
        var byMap: [String: [ElementChanges.Element]] = [:]
        for u in units {
            for e in u.elements {
                if byMap[e.map] == nil { order.append(e.map) }
                byMap[e.map, default: []].append(ElementChanges.Element(key: .cgroupID(u.id), value: e.value))
            }
        }
        return ElementChanges(commands: order.map { .add(map: $0, elements: byMap[$0]!) })
    }

    /// The deletions of `elements` of each unit, every map's together.
    public static func deletions(_ units: [(id: UInt64, elements: [UnitElement])]) -> ElementChanges {
        var order: [String] = []
        var byMap: [String: [ElementChanges.Key]] = [:]
        for u in units {
            for e in u.elements {
                if byMap[e.map] == nil { order.append(e.map) }
                byMap[e.map, default: []].append(.cgroupID(u.id))
            }
        }
        return ElementChanges(commands: order.map { .delete(map: $0, keys: byMap[$0]!) })
    }
}

/// One element naming a unit's cgroup: the map, and what it gives the unit's sockets.
public struct UnitElement: Equatable, Sendable {
    public var map: String
    public var value: ElementChanges.Value
}

/// A unit the edge named with a `UnitNaming` (of `generation`), as the engine hears of it (`Input.unitsNamed`).
public struct NamedUnit: Equatable, Sendable {
    public var unit: UnitCgroup
    public var elements: [UnitElement]
    public init(unit: UnitCgroup, elements: [UnitElement]) { self.unit = unit; self.elements = elements }
}

extension UnitNaming: CustomStringConvertible {
    /// In a defined order (what the effects' transcript compares), without the dictionaries' own.
    public var description: String {
        let perms: [String] = permissions.map { "\($0)" }
        var owned: [String] = []
        for i in own.keys.sorted() {
            for uid in own[i]!.keys.sorted() { owned.append("\(i)/\(uid)=\(own[i]![uid]!)") }
        }
        let tagText: [String] = tags.map { $0.map(ConnectionTags.text) ?? "-" }
        let chains: [String] = asks.map(\.name).sorted()
        return "UnitNaming(generation: \(generation), apps: \(apps.map(\.id)), permissions: \(perms), own: \(owned), "
            + "tags: \(tagText), used: \(used.sorted()), asks: \(chains))"
    }
}
