// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO
import NetpermNftables
import NetpermProtocol

/// Carries out the engine's loads of its nftables tables (`Effect.runLoad`) through libnftables, and sees what would
/// undo them: another process changing or removing a table (`nft flush ruleset`) is seen on the nftables event socket
/// and told to the engine (`Input.tablesChanged`), which loads the last rules again. The sockets are made only when the
/// engine says the tables need following (`Effect.followTables`), so Mode=off costs nothing. While rules are in force,
/// the packets they log (a pending app's first rejected ones) are read from their NFLOG group. The usage table
/// (`Effect.loadUsageRules`) goes through the same loads and event socket: the kernel's notice of a quota used up is
/// handed to the engine.
///
/// Loads run on a thread of their own (`OffLoop`), one at a time as the engine hands them out (repairs queued behind
/// its loads): a whole table of 10,000 apps takes seconds under load, and clients must be answered meanwhile.
/// One libnftables context serves every load, handed to the load's thread and back as the element socket is (a
/// context is not thread-safe; one load at a time uses it); the loop's sources (the event socket, NFLOG) are touched
/// only on the loop, before and after.
///
/// What runs next, what is in force, whether a change is repaired and what follows a load's end are the engine's
/// (`TableUpkeep`, held by its enforcement machine, Engine+Tables.swift): this object asks the kernel what a step
/// needs, runs the loads it hands out, opens and closes what follows the tables, and says what the kernel did.
final class Enforcer {
    private let loop: EventLoop
    /// Where loads run (on the loop if no thread can be had).
    private let worker: Worker<Load>
    /// Where changes of elements alone go (`NftablesElements`): used by one load at a time, on its thread.
    private var elementSocket: NetlinkSocket?
    /// Where the other loads go, kept between them (its cache dropped after each): `Nftables.dropCache`.
    private var nft: Nftables?
    private var monitor: NftablesMonitor?
    /// Where the elements of units just made go, never behind a load (UnitLane).
    private let lane: UnitLane
    private var own = OwnCommits()
    private var nflog: NflogReader?
    /// Binding the NFLOG group failed and the log said so: not said again at every load.
    private var nflogFailed = false
    /// A repair asked for by a commit of another process during the daemon's own transaction.
    private var repairTimer: TimerSource?
    /// Another process changed a table, or a repair soon came due.
    var changed: (TablesChange) -> Void = { _ in }
    /// The kernel rejected and logged a packet of this app and pending kind.
    var blocked: (String, PolicyDimension, UInt32?, Int32?, String?, Bool) -> Void = { _, _, _, _, _, _ in }
    /// A quota object of the usage table ran out.
    var quotaReached: (QuotaName) -> Void = { _ in }

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
        var nft: Nftables?
        var failure: EdgeError?
        var commits: UInt32 = 0
        var ownPortIDs: Set<UInt32> = []
        /// The commands of each batch sent as nf_tables messages (logged on the loop: the log is the loop's).
        var batches: [Int] = []

        init(scripts: [RuleTransaction], elements: Bool, operation: EdgeError.Operation, socket: NetlinkSocket?,
             nft: Nftables?) {
            self.scripts = scripts; self.elements = elements; self.operation = operation; self.socket = socket
            self.nft = nft
        }

        func execute() {
            var used = false
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
                    used = true
                    try nft!.run(script.text)
                    commits += 1
                }
            } catch {
                // libnftables' words (NftError), or the socket's errno.
                failure = EdgeError(operation, errno: (error as? Errno)?.code, "\(error)")
            }
            // libnftables' socket may be new (made again after an error): the commits it made are the daemon's own.
            // What it cached of the table (for 10,000 apps about 40 MB) goes with the load.
            if used, let nft {
                ownPortIDs = NftablesMonitor.ownPortIDs()
                nft.dropCache()
            }
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

    /// What the kernel says of the tables a load needs to know about, asked on the loop: over the monitor's kept
    /// socket while tables are followed (a socket made and closed per lookup made the loop wait in its `close()` for
    /// a grace period after any commit that removed something: a repair after another process deleted the table, a
    /// Mode change); over a socket of its own before any (start-up, Mode=off: no descriptor kept for them).
    func lookUp(_ lookup: TableUpkeep.Lookup) -> TableUpkeep.TableLookup {
        func exists(_ name: String) throws(Errno) -> Bool? {
            if let monitor { return try monitor.tableExists(name) }
            return try NftablesTable.exists(name: name)
        }
        do throws(Errno) {
            switch lookup {
            case .rules:
                return .tables(rules: try exists(Ruleset.table), handover: try exists(Ruleset.handoverTable))
            case .usage:
                return .usage(try exists(UsageRules.table))
            }
        } catch {
            return .failed(errno: error.code, words: "\(error)")
        }
    }

    /// Runs one load of the engine's, one at a time; `done` gets its failure and whether another process committed
    /// meanwhile.
    func run(_ plan: TableUpkeep.Run, done: @escaping (EdgeError?, Bool) -> Void) {
        let load = Load(scripts: plan.scripts, elements: plan.elements, operation: plan.operation,
                        socket: plan.elements ? elementSocket : nil, nft: nft)
        // Out of the nftables group meanwhile: the kernel builds no notification of our own changes, and the
        // generation tells whether another process committed in between.
        // What the others had finished before the generation `quiet` reads: a commit of theirs finishing in between
        // is counted as theirs (begun since), never taken for another process's.
        own.finishedAtQuiet = own.finished
        monitor?.quiet()
        if load.elements { elementSocket = nil }
        nft = nil
        worker.run({ load.execute(); return load }) { [unowned self] in done($0.failure, self.finished($0)) }
    }

    /// The load's sockets and counts taken back; whether another process committed while it ran.
    private func finished(_ load: Load) -> Bool {
        if load.elements { elementSocket = load.socket }
        nft = load.nft
        for n in load.batches { Log.debug("enforcement: \(n) commands sent as one nf_tables batch") }
        if !load.ownPortIDs.isEmpty {
            own.portIDs.formUnion(load.ownPortIDs)
            monitor?.ownPortIDs = own.portIDs
        }
        // What the others began since (or had begun and not finished then) may have committed meanwhile.
        let others = own.started &- own.finishedAtQuiet
        return monitor?.listen(ownCommits: load.commits + others) == true
    }

    /// The sockets that follow the tables, as what is in force asks.
    func follow(_ watching: TableUpkeep.Watching) {
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
                self.changed(TablesChange(usage: table == UsageRules.table, at: Clock.monotonicMicroseconds(),
                                          by: pid.map { .process(pid: $0, name: name) } ?? .unknown))
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
    func repairSoon() {
        guard repairTimer == nil else { return }
        repairTimer = try? loop.addTimer(afterMicroseconds: 0) { [unowned self] in
            self.repairTimer = nil
            self.changed(TablesChange(usage: false, at: Clock.monotonicMicroseconds(), by: .duringOwnLoad))
        }
    }
}
