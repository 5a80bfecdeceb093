// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// Units named to the kernel as they are made (docs/ENFORCEMENT.md, "The first moments of a new cgroup"). A scan of
/// every cgroup and a load of the rules they lead to take hundreds of milliseconds while thousands of units come
/// and go; a unit made meanwhile waited for both and sent freely for 0.2-3 s. The engine hands the edge how units
/// are named (`UnitNaming`, `Effect.nameUnits`) whenever the rules in force or the permissions change; the edge's
/// watch names each unit it sees made at once, off the loop, by its cgroup's id, with what its app must not do
/// (`UnitNaming.restrictions`), and tells the engine (`Input.unitsNamed`). The next load of the rules adds the rest. Scans still reconcile everything: once a load of rules built from a scan that found it has
/// taken, the unit is the rules' like any other; a unit gone before that has its elements deleted by id
/// (`Input.unitsGone`).
struct FreshUnit: Equatable {
    var unit: UnitCgroup
    /// What the kernel holds for it: what goes when it goes, and what a change of its app's permissions replaces.
    var elements: [UnitElement]
}

/// What the engine keeps of the units named as they were made; its fields change only in this file.
struct UnitsMade {
    /// Units named to the kernel as they were made, by cgroup id: until a load of rules built from a scan that found
    /// them takes, or they go.
    fileprivate(set) var fresh: [UInt64: FreshUnit] = [:]
    /// How the edge names units just made: the last handed over (nil: none are), the same before its rules in force
    /// were set (made again at each full build), how many were handed over, and the generation of the first after
    /// the last load of the whole table.
    fileprivate(set) var naming: UnitNaming?
    fileprivate(set) var namingBase: UnitNaming?
    fileprivate(set) var namingGenerations = 0
    fileprivate(set) var wholeLoadNaming = 0
}

extension Engine {
    /// Units the edge named as they were made, with the naming of `generation`; nil `error`: the kernel took them.
    /// One named with a naming older than the last load of the whole table may have been replaced by it, and one
    /// whose elements are not what the permissions give now is named again (`Effect.loadUnitElements`).
    func unitsNamed(_ units: [NamedUnit], generation: Int, error: EdgeError?) {
        if let error {
            // The next scan's load names them, as it would have without the edge.
            log(.debug, "enforcement: naming \(units.count) unit cgroups just made failed: \(error)")
            return
        }
        guard state.config.enforcement == .block, let naming = enforcement.units.naming else { return }
        var add: [(id: UInt64, elements: [UnitElement])] = [], delete: [(id: UInt64, elements: [UnitElement])] = []
        for n in units where !enforcement.inForceUnitIDs.contains(n.unit.id) {
            guard generation < naming.generation else {
                enforcement.units.fresh[n.unit.id] = FreshUnit(unit: n.unit, elements: n.elements)
                continue
            }
            let now = naming.restrictions(of: n.unit).flatMap { $0.isEmpty ? nil : $0 }
            if now != n.elements { delete.append((n.unit.id, n.elements)) }
            if let now {
                if now != n.elements || generation < enforcement.units.wholeLoadNaming { add.append((n.unit.id, now)) }
                enforcement.units.fresh[n.unit.id] = FreshUnit(unit: n.unit, elements: now)
            }
        }
        loadUnitElements(delete: delete, add: add)
    }

    /// The answer to an `Effect.loadUnitElements` the engine asked for: a refusal leaves the units to their scans.
    func unitElementsLoaded(_ ids: [UInt64], error: EdgeError?) {
        guard let error else { return }
        log(.debug, "enforcement: naming \(ids.count) unit cgroups again failed: \(error)")
        for id in ids { enforcement.units.fresh[id] = nil }
    }

    /// Units named as they were made that a scan begun after them did not find: their elements go (by id: their
    /// cgroup has no path any more). A deletion refused (a load of the whole table took them first) leaves nothing
    /// that matters: elements of cgroups gone match no socket, and the next load of the whole table clears them.
    func unitsGone(_ ids: [UInt64]) {
        // One the rules handed over name (loading, or in force) is theirs to delete: as their next change deletes
        // every unit that went (deleting it here too would fail that change).
        let handedOver = Set(enforcement.loadedUnitIDs)
        var gone: [(id: UInt64, elements: [UnitElement])] = []
        for id in ids {
            if let f = enforcement.units.fresh.removeValue(forKey: id), !handedOver.contains(id) { gone.append((id, f.elements)) }
        }
        guard !gone.isEmpty else { return }
        out.append(.loadUnitElements(UnitNaming.deletions(gone), ids: []))
    }

    /// Rules took: the edge names units against them from now on. Units the load's scan found are the rules' now;
    /// after a load of the whole table (which replaced the maps), the others are named again.
    func freshUnitsAfterLoad(whole: Bool) {
        publishNaming(whole: whole)
        guard !enforcement.units.fresh.isEmpty else { return }
        for id in enforcement.units.fresh.keys where enforcement.inForceUnitIDs.contains(id) { enforcement.units.fresh[id] = nil }
        guard whole, let naming = enforcement.units.naming else { return }
        var add: [(id: UInt64, elements: [UnitElement])] = []
        for id in enforcement.units.fresh.keys.sorted() {
            guard let now = naming.restrictions(of: enforcement.units.fresh[id]!.unit), !now.isEmpty else {
                enforcement.units.fresh[id] = nil
                continue
            }
            enforcement.units.fresh[id]!.elements = now
            add.append((id, now))
        }
        loadUnitElements(delete: [], add: add)
    }

    /// The permissions or the policy changed (a full build): the naming is made again, and units named as they were
    /// made whose elements differ now get the new ones (or are left to their scans).
    func freshUnitsAfterBuild() {
        enforcement.units.namingBase = nil
        publishNaming(whole: false)
        guard let naming = enforcement.units.naming, !enforcement.units.fresh.isEmpty else {
            enforcement.units.fresh = [:]
            return
        }
        var add: [(id: UInt64, elements: [UnitElement])] = [], delete: [(id: UInt64, elements: [UnitElement])] = []
        for id in enforcement.units.fresh.keys.sorted() {
            let f = enforcement.units.fresh[id]!
            let now = naming.restrictions(of: f.unit).flatMap { $0.isEmpty ? nil : $0 }
            guard now != f.elements else { continue }
            delete.append((id, f.elements))
            if let now { add.append((id, now)); enforcement.units.fresh[id]!.elements = now } else { enforcement.units.fresh[id] = nil }
        }
        loadUnitElements(delete: delete, add: add)
    }

    /// Hands the edge how units are named now (none unless rules are in force in Mode=block).
    func publishNaming(whole: Bool) {
        let inForce: Ruleset?
        switch enforcement.lifecycle.phase {
        case .enforcing, .changing, .repairing: inForce = state.config.enforcement == .block ? enforcement.inForceRuleset : nil
        case .off, .removing, .loading, .failed: inForce = nil
        }
        guard let inForce else {
            enforcement.units.fresh = [:]
            if enforcement.units.naming != nil { enforcement.units.naming = nil; out.append(.nameUnits(nil)) }
            return
        }
        enforcement.units.namingGenerations += 1
        let generation = enforcement.units.namingGenerations
        if whole { enforcement.units.wholeLoadNaming = generation }
        if enforcement.units.namingBase == nil { enforcement.units.namingBase = prepared(\.naming, for: NamingInputs(permissions: enforcedPermissions, tags: appBooks.tags)) { $0.naming() } }
        let naming = enforcement.units.namingBase!.with(inForce: inForce, generation: generation)
        enforcement.units.naming = naming
        out.append(.nameUnits(naming))
    }

    private func loadUnitElements(delete: [(id: UInt64, elements: [UnitElement])], add: [(id: UInt64, elements: [UnitElement])]) {
        guard !delete.isEmpty || !add.isEmpty else { return }
        var changes = UnitNaming.deletions(delete)
        changes.commands += UnitNaming.additions(add).commands
        out.append(.loadUnitElements(changes, ids: add.map(\.id)))
    }
}
