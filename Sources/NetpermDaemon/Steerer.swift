// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermBPF
import NetpermCore
import NetpermHost
import NetpermIO
import NetpermNetlink

/// Carries out `Effect.steer` (docs/ENFORCEMENT.md, "Steer"): the `netpermd_steer` program attached to the root of
/// the cgroup v2 hierarchy through a bpf_link (gone when the daemon exits, however it exits), its two maps written
/// in place, and the routing rules and tables, which follow the main table: every kernel picture (links,
/// addresses, routes changed) re-reads it and applies what differs.
///
/// What it does when (install, sync, remove), what the maps are told and which tables it reads are the engine's
/// (`SteeringUpkeep`, held by its steering machine, tested without a kernel): this object writes to the kernel
/// exactly what a step names and says how far it went.
final class Steerer {
    private var tables: SteeringTables?
    private var cgroupMap: BPFHashMap?
    private var uidMap: BPFHashMap?
    private var link: BPFCgroupLink?

    /// Carries out one step of the engine's; what the kernel holds after it, and what stopped it.
    func carryOut(_ action: SteeringStep.Action) -> SteeringOutcome {
        var outcome = SteeringOutcome()
        switch action {
        case let .install(i):
            outcome.error = install(i, &outcome)
        case let .sync(plan, read):
            outcome.error = syncTables(plan, read: read, addsOnly: false)
            outcome.synced = outcome.error == nil
        case .remove:
            link = nil
            cgroupMap = nil
            uidMap = nil
            outcome.error = syncTables(nil, read: nil, addsOnly: false)
            outcome.synced = outcome.error == nil
            tables = nil
        }
        return outcome
    }

    private func install(_ i: SteeringInstall, _ outcome: inout SteeringOutcome) -> EdgeError? {
        // Tables and rules before any mark that leads to them, stale ones removed after the marks moved on.
        if let e = syncTables(i.plan, read: i.read, addsOnly: true) { return e }
        if let e = writeMaps(i, &outcome) { return e }
        if i.attach {
            if let e = attach() { return e }
            outcome.attached = true
        }
        if let e = syncTables(i.plan, read: i.read, addsOnly: false) { return e }
        outcome.synced = true
        return nil
    }

    private func writeMaps(_ i: SteeringInstall, _ outcome: inout SteeringOutcome) -> EdgeError? {
        do throws(Errno) {
            if i.makeMaps {
                (cgroupMap, uidMap) = (nil, nil)
                cgroupMap = try BPFHashMap(name: "netpermd_cgroup", keySize: 8, valueSize: 4, maxEntries: 65536)
                uidMap = try BPFHashMap(name: "netpermd_uid", keySize: 4, valueSize: 4, maxEntries: 65536)
                outcome.mapsMade = true
            }
            guard let cgroupMap, let uidMap else { return EdgeError(.steer, "the steering maps are gone") }
            for (k, v) in i.cgroups.update { try cgroupMap.update(key: k, value: v) }
            for k in i.cgroups.delete { try cgroupMap.delete(key: k) }
            outcome.cgroupsWritten = true
            for (k, v) in i.uids.update { try uidMap.update(key: UInt64(k), value: v) }
            for k in i.uids.delete { try uidMap.delete(key: UInt64(k)) }
            outcome.uidsWritten = true
            return nil
        } catch {
            return EdgeError(.steer, errno: error.code, "writing the steering maps: \(error)")
        }
    }

    private func attach() -> EdgeError? {
        guard let root = UnitCgroupScanner().mountPoint else { return EdgeError(.steer, "no cgroup v2 hierarchy to attach to") }
        guard let cgroupMap, let uidMap else { return EdgeError(.steer, "the steering maps are gone") }
        do {
            let cookie = try BPFSyscall.netnsCookie()
            let code = SteerProgram.instructions(cookie: cookie, levels: SteerProgram.levels, cgroupMap: cgroupMap.fd,
                                                 uidMap: uidMap.fd)
            link = try BPFCgroupLink(name: "netpermd_steer", instructions: code, cgroup: root)
            Log.info("steering: program netpermd_steer attached to \(root) (\(code.count / 8) instructions)")
            return nil
        } catch let e as BPFError {
            return EdgeError(.steer, errno: e.errno.code, "\(e)")
        } catch {
            return EdgeError(.steer, errno: (error as? Errno)?.code, "reading the network namespace's cookie: \(error)")
        }
    }

    /// Removes steering's routing rules and tables, whoever left them (`netpermd --remove-rules`); how many.
    static func removeLeftovers() -> Result<Int, NetlinkError> {
        Result { () throws(NetlinkError) -> Int in
            let tables = try SteeringTables()
            let now = try tables.read()
            let diff = SteeringDiff(plan: nil, main: now.main, tables: now.tables, rules: now.rules)
            try tables.apply(diff)
            return diff.deleteRules.count + diff.deleteRoutes.count
        }
    }

    /// Reads what is in the kernel (the tables `read` names; nil: every one) and applies the difference (only its
    /// additions with `addsOnly`).
    private func syncTables(_ plan: SteeringPlan?, read: Set<UInt32>?, addsOnly: Bool) -> EdgeError? {
        do throws(NetlinkError) {
            if tables == nil { tables = try SteeringTables() }
            let now = try tables!.read(only: read)
            var diff = SteeringDiff(plan: plan, main: now.main, tables: now.tables, rules: now.rules)
            if addsOnly { diff.deleteRules = []; diff.deleteRoutes = [] }
            if !diff.isEmpty {
                Log.debug("steering: +\(diff.addRoutes.count) -\(diff.deleteRoutes.count) routes, "
                    + "+\(diff.addRules.count) -\(diff.deleteRules.count) rules")
                try tables!.apply(diff)
            }
            return nil
        } catch {
            return EdgeError(.steer, errno: error.errno, "routing rules and tables: \(error)")
        }
    }
}
