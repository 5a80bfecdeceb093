// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO

/// The engine's steps of the nftables tables (`Effect.loadRules` and `loadUsageRules` asked for, `lookUpTables`,
/// `runLoad`, `loadAnswered`, `followTables`, `repairTablesSoon`, `loadUnitElements`) handed to the Enforcer, its
/// answers fed back, and the unit cgroups' descriptors the loads name: a script names cgroups by descriptor
/// (/proc/self/fd/N), which must stay open from the load's asking until its answer (`handlesInForce`,
/// CgroupWatcher.inForce).
final class RuleLoads {
    private let enforcer: RuleLoading
    private let feed: InputFeed
    /// What the rules in force name.
    private var inForce: Set<Int32> = []
    /// Those of the last rules asked for, whatever its answer: after a refusal the engine retries that text.
    private var last: Set<Int32> = []
    /// Each load asked for and not yet answered, by the engine's id.
    private var loading: [UInt64: Asked] = [:]
    /// Told the descriptors scripts may still name whenever a load is asked for or answered.
    var handlesInForce: (Set<Int32>) -> Void = { _ in }

    /// A load asked for: what it names, when it was asked, what it is (for the log).
    private struct Asked {
        var handles: Set<Int32>
        var start: UInt64
        var usage: Bool
        var report: Bool
        var bytes: Int
    }

    init(enforcer: RuleLoading, feed: InputFeed) {
        self.enforcer = enforcer
        self.feed = feed
        enforcer.changed = { change in feed(.tablesChanged(change)) }
        enforcer.blocked = { app, kind, uid, index, destination, incoming in
            feed(.blocked(app: app, kind: kind, uid: uid, ifindex: index, destination: destination, incoming: incoming))
        }
        enforcer.quotaReached = { quota in feed(.budgetReached(quota: quota)) }
    }

    /// Another socket of the daemon's commits to the rules' table (UnitNamer): the enforcer counts it as its own.
    func alsoCommitting(port: UInt32, commits: @escaping () -> (started: UInt32, finished: UInt32)) {
        enforcer.alsoCommitting(port: port, commits: commits)
    }

    func loadUnitElements(_ changes: ElementChanges, ids: [UInt64]) {
        enforcer.loadUnitElements(changes) { [feed] error in
            if !ids.isEmpty { feed(.unitElementsLoaded(ids: ids, error: error)) }
        }
    }

    /// The engine asked for rules (`Effect.loadRules`): their descriptors stay open until the answer.
    func asked(_ id: UInt64, _ scripts: [RuleTransaction], report: Bool, handles: Set<Int32>) {
        // What a repair would load again: its cgroups' descriptors must stay open.
        loading[id] = Asked(handles: handles, start: Clock.monotonicMicroseconds(), usage: false, report: report,
                            bytes: scripts.reduce(0) { $0 + $1.text.utf8.count })
        last = handles
        keepHandles()
        enforcer.asked(scripts, usage: false)
    }

    /// The engine asked for a script of the counting table (`Effect.loadUsageRules`); it may name cgroups by
    /// descriptor too (the connections' tags).
    func askedUsage(_ id: UInt64, _ script: String, report: Bool, handles: Set<Int32>) {
        loading[id] = Asked(handles: handles, start: Clock.monotonicMicroseconds(), usage: true, report: report,
                            bytes: script.utf8.count)
        keepHandles()
        enforcer.asked([RuleTransaction(whole: script)], usage: true)
    }

    func lookUp(_ lookup: TableUpkeep.Lookup) { feed(.tablesLookedUp(enforcer.lookUp(lookup))) }

    func run(_ run: TableUpkeep.Run) {
        enforcer.run(run) { [feed] failure, others in feed(.loadRan(failure: failure, othersCommitted: others)) }
    }

    func follow(_ watching: TableUpkeep.Watching) { enforcer.follow(watching) }

    func repairSoon() { enforcer.repairSoon() }

    /// The load asked for as `id` ended: its descriptors may go (those of rules now in force stay).
    func answered(_ id: UInt64, error: EdgeError?) {
        guard let a = loading.removeValue(forKey: id) else { return }
        if !a.usage, error == nil { inForce = a.handles }
        keepHandles()
        let took = Clock.monotonicMicroseconds() - a.start
        if a.usage {
            Log.debug("usage: nft transaction of \(a.bytes) bytes took \(took / 1000) ms")
        } else {
            Log.debug("enforcement: nft transactions of \(a.bytes) bytes took \(took) µs")
        }
        if !a.report, let error {
            Log.debug("\(a.usage ? "usage" : "enforcement"): removing a table left by an earlier run: \(error)")
        }
    }

    /// Tells the cgroup watcher which descriptors scripts may still name: the rules in force, the last asked for,
    /// and every load not yet answered.
    private func keepHandles() {
        handlesInForce(loading.values.reduce(inForce.union(last)) { $0.union($1.handles) })
    }
}
