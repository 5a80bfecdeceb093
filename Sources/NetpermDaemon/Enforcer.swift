// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO
import NetpermNftables
import NetpermProtocol

/// Carries out `Effect.loadRules` through libnftables, and keeps the rules in force: another process changing
/// or removing the table (`nft flush ruleset`) is seen on the nftables event socket and the last rules are loaded
/// again. The sockets are made only when first needed, so Mode=off costs nothing. While rules are in force, the
/// packets they log (a pending app's first rejected ones) are read from their NFLOG group. The usage table
/// (`Effect.loadUsageRules`) goes through the same queue and event socket: another process's change to it, and the
/// kernel's notice of a quota used up, are handed to the engine.
///
/// Loads run on a thread of their own (`OffLoop`), one at a time and in the order they came, repairs queued
/// behind them: a whole table of 10,000 apps takes seconds under load, and clients must be answered meanwhile.
/// Each load's libnftables context is made and freed on its thread (a context is not thread-safe; a new one costs a
/// millisecond); the loop's sources (the event socket, NFLOG) are touched only on the loop, before and after.
///
/// What runs next, what is in force, whether a change is repaired and what follows a load's end are decided by
/// `TableUpkeep` (NetpermCore, tested without a kernel): this object asks the kernel what it needs and carries out.
final class Enforcer {
    private let loop: EventLoop
    /// Where loads run (on the loop if no thread can be had).
    private let worker: Worker<Load>
    /// Loads not yet started, the one running, what is in force, and when a repair is worth one.
    private var upkeep = Upkeep()
    /// Who hears each load's answer, by the id `upkeep` gave it.
    private var answers: [Upkeep.LoadID: (EdgeError?) -> Void] = [:]
    /// Where changes of elements alone go (`NftablesElements`): used by one load at a time, on its thread.
    private var elementSocket: NetlinkSocket?
    private var monitor: NftablesMonitor?
    /// Where the elements of units just made go, never behind a load (UnitLane).
    private let lane: UnitLane
    private var own = OwnCommits()
    private var nflog: NflogReader?
    /// Binding the NFLOG group failed and the log said so: not said again at every load.
    private var nflogFailed = false
    /// A repair asked for by a commit of another process during the daemon's own transaction.
    private var repairTimer: TimerSource?
    /// Called when loading the rules again after a foreign change fails: the engine retries.
    var repairFailed: (EdgeError) -> Void = { _ in }
    /// The kernel rejected and logged a packet of this app and pending kind.
    var blocked: (String, PolicyDimension, UInt32?, Int32?, String?, Bool) -> Void = { _, _, _, _, _, _ in }
    /// Another process changed the usage table; a quota object of it ran out.
    var usageChanged: () -> Void = {}
    var quotaReached: (QuotaName) -> Void = { _ in }

    private typealias Upkeep = TableUpkeep
    private typealias Job = Upkeep.Job

    /// What of the table's changes is the daemon's own: this process's netfilter sockets that loads used, its other
    /// sockets committing to the table (the lane's, UnitNamer's: their batches begun and finished), and what all had
    /// finished when the last load left the event group.
    private struct OwnCommits {
        var portIDs: Set<UInt32> = []
        var committers: [() -> (started: UInt32, finished: UInt32)] = []
        var finishedAtQuiet: UInt32 = 0

        var finished: UInt32 { committers.reduce(0) { $0 &+ $1().finished } }
        var started: UInt32 { committers.reduce(0) { $0 &+ $1().started } }
    }

    /// What runs on the thread: the scripts, and what came of them. The thread owns it from `run` until it has
    /// written its result back; the loop reads it only after.
    final class Load: @unchecked Sendable {
        let scripts: [RuleTransaction]
        /// Element changes may go as nf_tables messages (not a whole load).
        let elements: Bool
        /// What a failure says was being done: the rules, or the usage table.
        let operation: EdgeError.Operation
        var socket: NetlinkSocket?
        var failure: EdgeError?
        var commits: UInt32 = 0
        var ownPortIDs: Set<UInt32> = []
        /// The commands of each batch sent as nf_tables messages (logged on the loop: the log is the loop's).
        var batches: [Int] = []

        init(scripts: [RuleTransaction], elements: Bool, operation: EdgeError.Operation, socket: NetlinkSocket?) {
            self.scripts = scripts; self.elements = elements; self.operation = operation; self.socket = socket
        }

        func execute() {
            var nft: Nftables?
            do {
                scripts: for script in scripts {
                    // Only elements change (and chains go): sent as nf_tables messages, without libnftables' reading
                    // of the whole table first.
                    if elements, let changes = script.elements {
                        if socket == nil { socket = try NftablesElements.socket() }
                        switch NftablesElements.run(changes, on: socket!, for: operation) {
                        case .committed:
                            commits += 1
                            batches.append(changes.commands.count)
                            continue scripts
                        case let .refused(refused):
                            failure = refused
                            break scripts
                        case .tooLarge:
                            break
                        }
                    }
                    if nft == nil { nft = try Nftables() }
                    try nft!.run(script.text)
                    commits += 1
                }
            } catch {
                // libnftables' words (NftError), or the socket's errno.
                failure = EdgeError(operation, errno: (error as? Errno)?.code, "\(error)")
            }
            // While libnftables' socket surely exists: the commits it made are the daemon's own. The context goes
            // with the load, and what it cached of the table (for 10,000 apps about 40 MB) with it.
            if nft != nil { ownPortIDs = NftablesMonitor.ownPortIDs() }
            nft = nil
            if !elements { Heap.releaseFree() }
        }
    }

    init(loop: EventLoop) {
        self.loop = loop
        lane = UnitLane(loop: loop)
        // Loads yield the CPU to the loop and to naming units just made (UnitNamer): a scan's thousands of elements
        // must not starve the one unit the person just started.
        worker = Worker(loop: loop, doing: "loading rules", background: true)
        lane.portOpened = { [unowned self] port in
            own.portIDs.insert(port)
            monitor?.ownPortIDs = own.portIDs
        }
        own.committers.append { [unowned self] in (lane.started, lane.finished) }
    }

    /// Another socket of the daemon's (UnitNamer's) commits to the table at any time: its notifications and
    /// commits are the daemon's own.
    func alsoCommitting(port: UInt32, commits: @escaping () -> (started: UInt32, finished: UInt32)) {
        own.portIDs.insert(port)
        monitor?.ownPortIDs = own.portIDs
        own.committers.append(commits)
    }

    /// Element changes of units just made or gone, by id (`Effect.loadUnitElements`): `done` gets nil, or why the
    /// kernel refused them.
    func loadUnitElements(_ changes: ElementChanges, done: @escaping (EdgeError?) -> Void) {
        lane.load(changes, done: done)
    }

    /// Whether a load runs or waits.
    var busy: Bool { upkeep.busy }

    /// Runs the transactions in order, stopping at the first that fails, after the loads before them; `done` gets
    /// nil, or why it failed, on the loop. `whole`: the whole ruleset they lead to, loaded again should another
    /// process change the table (they may change only part of it). A whole ruleset is handed over from the table in
    /// force, if there is one (`Ruleset.wholeLoad`).
    func load(_ transactions: [RuleTransaction], inForce whole: String, done: @escaping (EdgeError?) -> Void) {
        answers[upkeep.rules(transactions, whole: whole)] = done
        startNext()
    }

    /// Runs one script of the usage table (UsageRules) as one transaction, in turn with the rules' loads; `done` gets
    /// nil, or why it failed. The removal runs only if the table exists, so that a daemon that never counts never
    /// loads libnftables.
    func loadUsage(_ script: String, done: @escaping (EdgeError?) -> Void) {
        answers[upkeep.usage(script)] = done
        startNext()
    }

    private func startNext() {
        while let step = upkeep.next() {
            if carryOut(step) { return }
        }
    }

    /// Carries out one step of `upkeep`'s; true when a load runs (the next waits for its end).
    private func carryOut(_ step: Upkeep.Step) -> Bool {
        switch step {
        case let .lookUp(lookup):
            return upkeep.lookedUp(Self.lookUp(lookup)).map(carryOut) ?? false
        case let .answered(job, error):
            answer(job, error)
            return false
        case let .run(job, plan):
            let socket = plan.elements ? elementSocket : nil
            run(job, Load(scripts: plan.scripts, elements: plan.elements, operation: plan.operation, socket: socket))
            return true
        }
    }

    /// Whoever asked for `job` hears how it went (nobody for a repair).
    private func answer(_ job: Job, _ error: EdgeError?) {
        guard let id = job.done else { return }
        answers.removeValue(forKey: id)?(error)
    }

    /// What the kernel says of the tables a load needs to know about.
    private static func lookUp(_ lookup: Upkeep.Lookup) -> Upkeep.TableLookup {
        do throws(Errno) {
            switch lookup {
            case .rules:
                return .tables(rules: try NftablesTable.exists(name: Ruleset.table),
                               handover: try NftablesTable.exists(name: Ruleset.handoverTable))
            case .usage:
                return .usage(try NftablesTable.exists(name: UsageRules.table))
            }
        } catch {
            return .failed(errno: error.code, words: "\(error)")
        }
    }

    private func run(_ job: Job, _ load: Load) {
        // Out of the nftables group meanwhile: the kernel builds no notification of our own changes, and the
        // generation tells whether another process committed in between.
        // What the others had finished before the generation `quiet` reads: a commit of theirs finishing in between
        // is counted as theirs (begun since), never taken for another process's.
        own.finishedAtQuiet = own.finished
        monitor?.quiet()
        if load.elements { elementSocket = nil }
        worker.run({ load.execute(); return load }) { [unowned self] in self.finished($0, job) }
    }

    private func finished(_ load: Load, _ job: Job) {
        if load.elements { elementSocket = load.socket }
        for n in load.batches { Log.debug("enforcement: \(n) commands sent as one nf_tables batch") }
        if !load.ownPortIDs.isEmpty {
            own.portIDs.formUnion(load.ownPortIDs)
            monitor?.ownPortIDs = own.portIDs
        }
        // What the others began since (or had begun and not finished then) may have committed meanwhile.
        let others = own.started &- own.finishedAtQuiet
        let othersCommitted = monitor?.listen(ownCommits: load.commits + others) == true
        let f = upkeep.finished(job, failure: load.failure, othersCommitted: othersCommitted)
        // Repaired once this load is accounted for.
        if f.repairSoon { repairSoon() }
        if f.usageChanged { usageChanged() }
        follow(f.watching)
        if let failure = f.repairFailure { Log.err("enforcement: loading the rules again failed: \(failure)") }
        if let failure = f.engineRetries { repairFailed(failure) }
        answer(job, load.failure)
        startNext()
    }

    /// The sockets that follow the tables, as what is in force asks.
    private func follow(_ watching: Upkeep.Watching) {
        switch watching {
        case .unchanged:
            break
        case .rulesInForce:
            readLog()
            ensureMonitor()
        case let .rulesRemoved(keepWatch):
            repairTimer?.cancel()
            repairTimer = nil
            if !keepWatch { monitor = nil }
            nflog = nil
            elementSocket = nil
        case .usageInForce:
            ensureMonitor()
        case let .usageRemoved(keepWatch):
            if !keepWatch { monitor = nil }
        }
    }

    /// Rules are in force: the packets they log are read.
    private func readLog() {
        guard nflog == nil else { return }
        do {
            nflog = try NflogReader(loop: loop, group: Ruleset.logGroup)
            nflog?.logged = { [unowned self] packet in
                guard let (app, kind) = Ruleset.parseLogPrefix(packet.prefix) else { return }
                self.blocked(app, kind, packet.uid, packet.outIndex, packet.destination, packet.answersIncoming)
            }
            nflogFailed = false
        } catch {
            if !nflogFailed {
                Log.warning("enforcement: cannot read NFLOG group \(Ruleset.logGroup) (\(error)); a pending app's "
                    + "rejected traffic raises no prompt")
            }
            nflogFailed = true
        }
    }

    private func ensureMonitor() {
        guard monitor == nil else { return }
        do {
            monitor = try NftablesMonitor(loop: loop, tables: [Ruleset.table, UsageRules.table])
            monitor?.ownPortIDs = own.portIDs
            monitor?.ownCommits = { [unowned self] in
                own.committers.reduce((UInt32(0), UInt32(0))) { sum, c in
                    let n = c()
                    return (sum.0 &+ n.started, sum.1 &+ n.finished)
                }
            }
            monitor?.countFromNow()
            monitor?.changed = { [unowned self] table, pid, name in
                self.foreignChange(usage: table == UsageRules.table, pid: pid, name: name)
            }
            monitor?.objectNotified = { [unowned self] table, object in
                // Decoded here, once: an object not one of our quotas is no notice of a budget.
                if table == UsageRules.table, let q = QuotaName(nft: object) { self.quotaReached(q) }
            }
        } catch {
            Log.warning("enforcement: cannot watch nftables for changes by others (\(error)); "
                + "a flushed ruleset stays flushed until the next change")
        }
    }

    /// Another process committed while the daemon's own transaction ran: it may have touched the table.
    private func repairSoon() {
        guard repairTimer == nil else { return }
        repairTimer = try? loop.addTimer(afterMicroseconds: 0) { [unowned self] in
            self.repairTimer = nil
            self.foreignChange(usage: false, pid: nil, name: nil, during: true)
        }
    }

    private func foreignChange(usage: Bool, pid: UInt32?, name: String?, during: Bool = false) {
        let who = pid.map { "pid \($0)" + (name.map { " (\($0))" } ?? "") }
            ?? (during ? "another process (it committed during the daemon's own load)" : "another process (events were lost)")
        switch upkeep.foreignChange(usage: usage, at: Clock.monotonicMicroseconds()) {
        case .ignored:
            break
        case .usageChanged:
            usageChanged()
        case let .tooMany(error):
            Log.err("enforcement: table \(Ruleset.family) \(Ruleset.table) keeps being changed by others; not loading it again")
            repairFailed(error)
        case .repairQueued, .repairWaiting:
            Log.notice("enforcement: \(who) changed table \(Ruleset.family) \(Ruleset.table); loading the rules again")
            // A repair that waits already starts after the load that runs.
            startNext()
        }
    }
}
