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
/// What it does when (install, sync, remove), what the maps must be told and which outcomes the engine hears of are
/// `SteeringUpkeep`'s (NetpermCore, tested without a kernel): this object only writes to the kernel.
final class Steerer {
    private var tables: SteeringTables?
    private var cgroupMap: BPFHashMap?
    private var uidMap: BPFHashMap?
    private var link: BPFCgroupLink?
    private var upkeep = SteeringUpkeep()

    /// Puts `plan` in the kernel (nil: removes everything of steering's); nil or what failed.
    func apply(_ plan: SteeringPlan?) -> EdgeError? {
        upkeep.applied(carryOut(upkeep.apply(plan)))
    }

    /// The kernel's picture changed: the tables follow the main table. An error, or its end, is returned only when it
    /// differs from the last one reported.
    func follow() -> SteeringChange {
        guard let step = upkeep.follow() else { return .unchanged }
        return upkeep.followed(carryOut(step))
    }

    private func carryOut(_ step: SteeringUpkeep.Step) -> EdgeError? {
        switch step {
        case let .install(plan):
            return install(plan)
        case let .sync(plan):
            return syncTables(plan, addsOnly: false)
        case .remove:
            link = nil
            cgroupMap = nil
            uidMap = nil
            let error = syncTables(nil, addsOnly: false)
            tables = nil
            return error
        }
    }

    private func install(_ plan: SteeringPlan) -> EdgeError? {
        // Tables and rules before any mark that leads to them, stale ones removed after the marks moved on.
        if let e = syncTables(plan, addsOnly: true) { return e }
        do throws(Errno) {
            if cgroupMap == nil || uidMap == nil {
                cgroupMap = try BPFHashMap(name: "netpermd_cgroup", keySize: 8, valueSize: 4, maxEntries: 65536)
                uidMap = try BPFHashMap(name: "netpermd_uid", keySize: 4, valueSize: 4, maxEntries: 65536)
                upkeep.mapsMade()
            }
            let (cgroups, uids) = upkeep.mapChanges(plan)
            for (k, v) in cgroups.update { try cgroupMap!.update(key: k, value: v) }
            for k in cgroups.delete { try cgroupMap!.delete(key: k) }
            upkeep.wroteCgroups(plan)
            for (k, v) in uids.update { try uidMap!.update(key: UInt64(k), value: v) }
            for k in uids.delete { try uidMap!.delete(key: UInt64(k)) }
            upkeep.wroteUIDs(plan)
        } catch {
            return EdgeError(.steer, errno: error.code, "writing the steering maps: \(error)")
        }
        if link == nil {
            guard let root = UnitCgroupScanner().mountPoint else { return EdgeError(.steer, "no cgroup v2 hierarchy to attach to") }
            do {
                let cookie = try BPFSyscall.netnsCookie()
                let code = SteerProgram.instructions(cookie: cookie, levels: SteerProgram.levels, cgroupMap: cgroupMap!.fd,
                                                     uidMap: uidMap!.fd)
                link = try BPFCgroupLink(name: "netpermd_steer", instructions: code, cgroup: root)
                Log.info("steering: program netpermd_steer attached to \(root) (\(code.count / 8) instructions)")
            } catch let e as BPFError {
                return EdgeError(.steer, errno: e.errno.code, "\(e)")
            } catch {
                return EdgeError(.steer, errno: (error as? Errno)?.code, "reading the network namespace's cookie: \(error)")
            }
        }
        return syncTables(plan, addsOnly: false)
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

    /// Reads what is in the kernel (the tables `SteeringUpkeep.tablesToRead` names) and applies the difference (only
    /// its additions with `addsOnly`).
    private func syncTables(_ plan: SteeringPlan?, addsOnly: Bool) -> EdgeError? {
        do throws(NetlinkError) {
            if tables == nil { tables = try SteeringTables() }
            let now = try tables!.read(only: upkeep.tablesToRead(plan))
            var diff = SteeringDiff(plan: plan, main: now.main, tables: now.tables, rules: now.rules)
            if addsOnly { diff.deleteRules = []; diff.deleteRoutes = [] }
            if !diff.isEmpty {
                Log.debug("steering: +\(diff.addRoutes.count) -\(diff.deleteRoutes.count) routes, "
                    + "+\(diff.addRules.count) -\(diff.deleteRules.count) rules")
                try tables!.apply(diff)
            }
            upkeep.synced(plan, addsOnly: addsOnly)
            return nil
        } catch {
            return EdgeError(.steer, errno: error.errno, "routing rules and tables: \(error)")
        }
    }
}
