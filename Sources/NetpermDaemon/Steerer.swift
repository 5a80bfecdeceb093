// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermBPF
import NetpermCore
import NetpermHost
import NetpermIO
import NetpermNetlink

/// What following the main table (`Steerer.follow`) has for the engine: only a change of outcome is reported.
public enum SteeringChange: Equatable {
    /// Nothing new: no plan, or the same outcome as last reported.
    case unchanged
    /// Steering is in force again after a failure.
    case recovered
    /// Steering failed, or failed otherwise than last reported.
    case failed(EdgeError)
}

/// Carries out `Effect.steer` (docs/ENFORCEMENT.md, "Steer"): the `netpermd_steer` program attached to the root of
/// the cgroup v2 hierarchy through a bpf_link (gone when the daemon exits, however it exits), its two maps written
/// in place, and the routing rules and tables, which follow the main table: every kernel picture (links,
/// addresses, routes changed) re-reads it and applies what differs.
final class Steerer {
    private var tables: SteeringTables?
    private var cgroupMap: BPFHashMap?
    private var uidMap: BPFHashMap?
    private var link: BPFCgroupLink?
    /// The plan in force (nil: none, or removed).
    private var plan: SteeringPlan?
    /// What the maps hold, as written.
    private var cgroupMarks: [UInt64: UInt32] = [:]
    private var uidMarks: [UInt32: UInt32] = [:]
    /// The last error reported, so that following the main table reports only changes.
    private(set) var lastError: EdgeError?
    /// The last install of the plan went through (program, maps, tables); until it does, every kernel change
    /// tries it again, and a later table sync that succeeds does not hide the failure.
    private var installed = false
    /// Steering's tables this process's plans used since it last read every table (nil: it has not yet, or a
    /// removal since): what a later read must look at besides those the rules name, to find routes left behind.
    private var ownTables: Set<UInt32>?

    /// Puts `plan` in the kernel (nil: removes everything of steering's); nil or what failed.
    func apply(_ plan: SteeringPlan?) -> EdgeError? {
        self.plan = plan
        let error: EdgeError?
        if let plan {
            error = install(plan)
            installed = error == nil
        } else {
            installed = false
            // Program first (no new socket is marked), then rules, then tables.
            link = nil
            cgroupMap = nil
            uidMap = nil
            cgroupMarks = [:]
            uidMarks = [:]
            error = syncTables(nil, addsOnly: false)
            tables = nil
        }
        lastError = error
        return error
    }

    /// The kernel's picture changed: the tables follow the main table. An error, or its end, is returned only when it
    /// differs from the last one reported.
    func follow() -> SteeringChange {
        guard let plan else { return .unchanged }
        let error = installed ? syncTables(plan, addsOnly: false) : install(plan)
        installed = error == nil
        guard error != lastError else { return .unchanged }
        lastError = error
        return error.map(SteeringChange.failed) ?? .recovered
    }

    private func install(_ plan: SteeringPlan) -> EdgeError? {
        // Tables and rules before any mark that leads to them, stale ones removed after the marks moved on.
        if let e = syncTables(plan, addsOnly: true) { return e }
        do throws(Errno) {
            if cgroupMap == nil || uidMap == nil {
                cgroupMap = try BPFHashMap(name: "netpermd_cgroup", keySize: 8, valueSize: 4, maxEntries: 65536)
                uidMap = try BPFHashMap(name: "netpermd_uid", keySize: 4, valueSize: 4, maxEntries: 65536)
                cgroupMarks = [:]
                uidMarks = [:]
            }
            for (k, v) in plan.cgroupMarks where cgroupMarks[k] != v { try cgroupMap!.update(key: k, value: v) }
            for k in cgroupMarks.keys where plan.cgroupMarks[k] == nil { try cgroupMap!.delete(key: k) }
            cgroupMarks = plan.cgroupMarks
            for (k, v) in plan.uidMarks where uidMarks[k] != v { try uidMap!.update(key: UInt64(k), value: v) }
            for k in uidMarks.keys where plan.uidMarks[k] == nil { try uidMap!.delete(key: UInt64(k)) }
            uidMarks = plan.uidMarks
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

    /// Reads what is in the kernel and applies the difference (only its additions with `addsOnly`). Every table is
    /// read the first time and for a removal (to find what an earlier run left); after that only the main table and
    /// steering's own (those its plans used, and those its rules name), so that a kernel change costs the same
    /// whatever other tables hold.
    private func syncTables(_ plan: SteeringPlan?, addsOnly: Bool) -> EdgeError? {
        do throws(NetlinkError) {
            if tables == nil { tables = try SteeringTables() }
            let used = Set(plan?.allowances.map(\.table) ?? [])
            let now = try tables!.read(only: plan == nil ? nil : ownTables.map { $0.union(used) })
            var diff = SteeringDiff(plan: plan, main: now.main, tables: now.tables, rules: now.rules)
            if addsOnly { diff.deleteRules = []; diff.deleteRoutes = [] }
            if !diff.isEmpty {
                Log.debug("steering: +\(diff.addRoutes.count) -\(diff.deleteRoutes.count) routes, "
                    + "+\(diff.addRules.count) -\(diff.deleteRules.count) rules")
                try tables!.apply(diff)
            }
            // Only once what the read found is dealt with, leftovers deleted too (a failure, or additions alone,
            // read every table again next time).
            if !addsOnly { ownTables = plan == nil ? nil : (ownTables ?? []).union(used) }
            return nil
        } catch {
            return EdgeError(.steer, errno: error.errno, "routing rules and tables: \(error)")
        }
    }
}
