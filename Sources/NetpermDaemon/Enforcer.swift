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
final class Enforcer {
    private let loop: EventLoop
    /// Where loads run (on the loop if no thread can be had).
    private let worker: Worker<Load>
    /// Loads not yet started, and when a repair is worth one (LoadQueue: its policy, tested in the core).
    private var queue = LoadQueue<(EdgeError?) -> Void>()
    /// Whether a load runs (on the worker, or on the loop between its start and its end).
    private var running = false
    /// Where changes of elements alone go (`NftablesElements`): used by one load at a time, on its thread.
    private var elementSocket: NetlinkSocket?
    private var monitor: NftablesMonitor?
    /// Where the elements of units just made go, never behind a load (UnitLane).
    private let lane: UnitLane
    /// The daemon's other sockets committing to the table (the lane's, UnitNamer's): their batches begun and
    /// finished, and what all had finished when the last load left the event group.
    private var committers: [() -> (started: UInt32, finished: UInt32)] = []
    private var finishedAtQuiet: UInt32 = 0
    private var nflog: NflogReader?
    /// Binding the NFLOG group failed and the log said so: not said again at every load.
    private var nflogFailed = false
    /// The rules last loaded successfully; nil while none are (Mode=off, or after removal).
    private var inForce: String?
    /// A repair asked for by a commit of another process during the daemon's own transaction.
    private var repairTimer: TimerSource?
    /// Called when loading the rules again after a foreign change fails: the engine retries.
    var repairFailed: (EdgeError) -> Void = { _ in }
    /// The kernel rejected and logged a packet of this app and pending kind.
    var blocked: (String, PolicyDimension, UInt32?, Int32?, String?, Bool) -> Void = { _, _, _, _, _, _ in }
    /// Another process changed the usage table; a quota object of it ran out.
    var usageChanged: () -> Void = {}
    var quotaReached: (QuotaName) -> Void = { _ in }
    /// The usage table was loaded by this process and not removed since.
    private var usageInForce = false
    /// This process's netfilter sockets that loads used: changes they make are the daemon's own.
    private var ownPortIDs: Set<UInt32> = []

    private typealias Job = LoadQueue<(EdgeError?) -> Void>.Job

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
            ownPortIDs.insert(port)
            monitor?.ownPortIDs = ownPortIDs
        }
        committers.append { [unowned self] in (lane.started, lane.finished) }
    }

    /// Another socket of the daemon's (UnitNamer's) commits to the table at any time: its notifications and
    /// commits are the daemon's own.
    func alsoCommitting(port: UInt32, commits: @escaping () -> (started: UInt32, finished: UInt32)) {
        ownPortIDs.insert(port)
        monitor?.ownPortIDs = ownPortIDs
        committers.append(commits)
    }

    /// Element changes of units just made or gone, by id (`Effect.loadUnitElements`): `done` gets nil, or why the
    /// kernel refused them.
    func loadUnitElements(_ changes: ElementChanges, done: @escaping (EdgeError?) -> Void) {
        lane.load(changes, done: done)
    }

    /// Whether a load runs or waits.
    var busy: Bool { running || !queue.isEmpty }

    /// Runs the transactions in order, stopping at the first that fails, after the loads before them; `done` gets
    /// nil, or why it failed, on the loop. `whole`: the whole ruleset they lead to, loaded again should another
    /// process change the table (they may change only part of it). A whole ruleset is handed over from the table in
    /// force, if there is one (`Ruleset.wholeLoad`).
    func load(_ transactions: [RuleTransaction], inForce whole: String, done: @escaping (EdgeError?) -> Void) {
        queue.rules(transactions, whole: whole, done: done)
        startNext()
    }

    /// Runs one script of the usage table (UsageRules) as one transaction, in turn with the rules' loads; `done` gets
    /// nil, or why it failed. The removal runs only if the table exists, so that a daemon that never counts never
    /// loads libnftables.
    func loadUsage(_ script: String, done: @escaping (EdgeError?) -> Void) {
        queue.usage(script, done: done)
        startNext()
    }

    private func startNext() {
        guard !running, let job = queue.next(inForce: inForce) else { return }
        if job.kind == .usage { return startUsage(job) }
        let whole = job.whole!
        let removal = whole == Ruleset.removal
        var scripts = job.transactions
        if removal, inForce == nil {
            // Removing with nothing loaded by this run (Mode=off at start-up): only if a table was left behind, so
            // that Mode=off never loads libnftables.
            let answer: Shortcut
            switch Result(catching: { () throws(Errno) in try Self.tables() }) {
            case .success((false?, false?)): answer = .answered(nil)
            case .success((nil, _)), .success((_, nil)): answer = .answered(Self.notPermitted(.loadRules))
            case let .failure(e): answer = .answered(Self.cannotAsk(.loadRules, e))
            case .success: answer = .run
            }
            if case let .answered(error) = answer {
                job.done?(error)
                return startNext()
            }
        } else if !removal, job.loadsWhole {
            // Unknown answers take the handover: it is right whatever is there.
            let (table, handover) = (try? Self.tables()) ?? (nil, nil)
            scripts = Ruleset.wholeLoad(whole, tableInForce: table ?? true, handoverLeft: handover ?? true)
                .map(RuleTransaction.init(whole:))
        }
        run(job, Load(scripts: scripts, elements: !job.loadsWhole, operation: .loadRules, socket: elementSocket))
    }

    private func startUsage(_ job: Job) {
        let script = job.transactions[0]
        if script.text == UsageRules.removal {
            let answer: Shortcut
            switch Result(catching: { () throws(Errno) in try NftablesTable.exists(name: UsageRules.table) }) {
            case .success(false?): usageInForce = false; answer = .answered(nil)
            case .success(nil): answer = .answered(Self.notPermitted(.loadUsageRules))
            case let .failure(e): answer = .answered(Self.cannotAsk(.loadUsageRules, e))
            case .success(true?): answer = .run
            }
            if case let .answered(error) = answer {
                job.done?(error)
                return startNext()
            }
        }
        run(job, Load(scripts: [script], elements: false, operation: .loadUsageRules, socket: nil))
    }

    /// Whether a removal runs, or is answered without running (nothing to remove, or nftables would not say).
    private enum Shortcut {
        case run
        case answered(EdgeError?)
    }

    /// The kernel would not say whether a table exists (no CAP_NET_ADMIN).
    private static func notPermitted(_ operation: EdgeError.Operation) -> EdgeError {
        EdgeError(operation, "not permitted to look at nftables")
    }

    private static func cannotAsk(_ operation: EdgeError.Operation, _ e: Errno) -> EdgeError {
        EdgeError(operation, errno: e.code, "cannot ask nftables: \(e)")
    }

    private func run(_ job: Job, _ load: Load) {
        // Out of the nftables group meanwhile: the kernel builds no notification of our own changes, and the
        // generation tells whether another process committed in between.
        // What the others had finished before the generation `quiet` reads: a commit of theirs finishing in between
        // is counted as theirs (begun since), never taken for another process's.
        finishedAtQuiet = committers.reduce(0) { $0 &+ $1().finished }
        monitor?.quiet()
        running = true
        if load.elements { elementSocket = nil }
        worker.run({ load.execute(); return load }) { [unowned self] in self.finished($0, job) }
    }

    private func finished(_ load: Load, _ job: Job) {
        running = false
        if load.elements { elementSocket = load.socket }
        for n in load.batches { Log.debug("enforcement: \(n) commands sent as one nf_tables batch") }
        if !load.ownPortIDs.isEmpty {
            ownPortIDs.formUnion(load.ownPortIDs)
            monitor?.ownPortIDs = ownPortIDs
        }
        // What the others began since (or had begun and not finished then) may have committed meanwhile.
        let others = committers.reduce(0) { $0 &+ $1().started } &- finishedAtQuiet
        if monitor?.listen(ownCommits: load.commits + others) == true {
            // Repaired once this load is accounted for.
            repairSoon()
            if usageInForce { usageChanged() }
        }
        let failure = load.failure
        switch job.kind {
        case .usage:
            if failure == nil {
                usageInForce = job.transactions.first?.text != UsageRules.removal
                if usageInForce { ensureMonitor() } else if inForce == nil { monitor = nil }
            }
        case .rules, .repair:
            if failure == nil { took(job.whole!) }
            if job.kind == .repair, let failure {
                Log.err("enforcement: loading the rules again failed: \(failure)")
                if !queue.repairFailed() { repairFailed(failure) }
            }
        }
        job.done?(failure)
        startNext()
    }

    /// `whole` is in force: the sockets that follow it are set up (or, for the removal, closed).
    private func took(_ whole: String) {
        if whole == Ruleset.removal {
            inForce = nil
            repairTimer?.cancel()
            repairTimer = nil
            if !usageInForce { monitor = nil }
            nflog = nil
            elementSocket = nil
            return
        }
        inForce = whole
        if nflog == nil {
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
        ensureMonitor()
    }

    private func ensureMonitor() {
        guard monitor == nil else { return }
        do {
            monitor = try NftablesMonitor(loop: loop, tables: [Ruleset.table, UsageRules.table])
            monitor?.ownPortIDs = ownPortIDs
            monitor?.ownCommits = { [unowned self] in
                committers.reduce((UInt32(0), UInt32(0))) { sum, c in
                    let n = c()
                    return (sum.0 &+ n.started, sum.1 &+ n.finished)
                }
            }
            monitor?.countFromNow()
            monitor?.changed = { [unowned self] table, pid, name in
                if table == UsageRules.table {
                    if self.usageInForce { self.usageChanged() }
                } else {
                    self.foreignChange(pid: pid, name: name)
                }
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

    /// Whether the kernel has the table and a handover's table (nil where it would not say).
    private static func tables() throws(Errno) -> (table: Bool?, handover: Bool?) {
        (try NftablesTable.exists(name: Ruleset.table), try NftablesTable.exists(name: Ruleset.handoverTable))
    }

    /// Another process committed while the daemon's own transaction ran: it may have touched the table.
    private func repairSoon() {
        guard repairTimer == nil else { return }
        repairTimer = try? loop.addTimer(afterMicroseconds: 0) { [unowned self] in
            self.repairTimer = nil
            self.foreignChange(pid: nil, name: nil, during: true)
        }
    }

    private func foreignChange(pid: UInt32?, name: String?, during: Bool = false) {
        guard inForce != nil else { return }
        // Never a loop with another tool that keeps changing the table (or with ourselves, were our own socket
        // ever mistaken for another's): at most 5 repairs a second, then the engine's bounded retries.
        let outcome = queue.repair(at: Clock.monotonicMicroseconds())
        guard outcome != .tooMany else {
            Log.err("enforcement: table \(Ruleset.family) \(Ruleset.table) keeps being changed by others; not loading it again")
            repairFailed(EdgeError(.loadRules, "the table keeps being changed by another process"))
            return
        }
        let who = pid.map { "pid \($0)" + (name.map { " (\($0))" } ?? "") }
            ?? (during ? "another process (it committed during the daemon's own load)" : "another process (events were lost)")
        Log.notice("enforcement: \(who) changed table \(Ruleset.family) \(Ruleset.table); loading the rules again")
        if outcome == .queued { startNext() }
    }
}
