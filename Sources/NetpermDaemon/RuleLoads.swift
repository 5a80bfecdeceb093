// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO

/// The rules and the usage table the engine loads (`Effect.loadRules`, `loadUsageRules`, `loadUnitElements`), handed
/// to the Enforcer, with the unit cgroups' descriptors they name: a script names cgroups by descriptor
/// (/proc/self/fd/N), which must stay open until its thread is done with it (`handlesInForce`, CgroupWatcher.inForce).
final class RuleLoads {
    private let enforcer: RuleLoading
    private let feed: InputFeed
    /// What the rules in force name, and what each load under way does (by the order they were asked for).
    private var inForce: Set<Int32> = []
    /// Those of the last load asked for, whatever its answer: after a refusal the engine retries that text.
    private var last: Set<Int32> = []
    private var loading: [Int: Set<Int32>] = [:]
    private var loads = 0
    /// Told the descriptors scripts may still name whenever a load starts or ends.
    var handlesInForce: (Set<Int32>) -> Void = { _ in }

    init(enforcer: RuleLoading, feed: InputFeed) {
        self.enforcer = enforcer
        self.feed = feed
        enforcer.repairFailed = { error in feed(.rulesLoaded(error: error)) }
        enforcer.blocked = { app, kind, uid, index, destination, incoming in
            feed(.blocked(app: app, kind: kind, uid: uid, ifindex: index, destination: destination, incoming: incoming))
        }
        enforcer.usageChanged = { feed(.usageTableChanged) }
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

    /// `report`: the engine hears the outcome (not for the removal of a table an earlier run left).
    func load(_ scripts: [RuleTransaction], report: Bool, inForce whole: String, handles: Set<Int32>) {
        let start = Clock.monotonicMicroseconds()
        // What a repair would load again, as the enforcer keeps it: its cgroups' descriptors must stay open.
        let n = began(handles)
        last = handles
        keepHandles()
        enforcer.load(scripts, inForce: whole) { [unowned self] error in
            ended(n)
            if error == nil { inForce = handles }
            keepHandles()
            Log.debug("enforcement: nft transactions of \(scripts.reduce(0) { $0 + $1.text.utf8.count }) bytes took "
                + "\(Clock.monotonicMicroseconds() - start) µs")
            if report {
                feed(.rulesLoaded(error: error))
            } else if let error {
                Log.debug("enforcement: removing a table left by an earlier run: \(error)")
            }
        }
    }

    func loadUsage(_ script: String, report: Bool, handles: Set<Int32>) {
        let start = Clock.monotonicMicroseconds()
        // It may name cgroups by descriptor too (the connections' tags).
        let n = began(handles)
        keepHandles()
        enforcer.loadUsage(script) { [unowned self] error in
            ended(n)
            keepHandles()
            Log.debug("usage: nft transaction of \(script.utf8.count) bytes took \((Clock.monotonicMicroseconds() - start) / 1000) ms")
            if report {
                feed(.usageRulesLoaded(error: error))
            } else if let error {
                Log.debug("usage: removing a table left by an earlier run: \(error)")
            }
        }
    }

    private func began(_ handles: Set<Int32>) -> Int {
        let n = loads
        loads += 1
        loading[n] = handles
        return n
    }

    private func ended(_ n: Int) { loading[n] = nil }

    /// Tells the cgroup watcher which descriptors scripts may still name: the rules in force, the last asked for,
    /// and every load under way.
    private func keepHandles() {
        handlesInForce(loading.values.reduce(inForce.union(last)) { $0.union($1) })
    }
}
