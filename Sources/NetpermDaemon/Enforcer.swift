import NetpermCore
import NetpermIO
import NetpermNftables

/// Carries out `Effect.loadRules` through libnftables, and keeps the rules in force: another process changing
/// or removing the table (`nft flush ruleset`) is seen on the nftables event socket and the last rules are loaded
/// again at once. The context and the sockets are made only when first needed, so Mode=off costs nothing. While
/// rules are in force, the packets they log (a pending app's first rejected ones) are read from their NFLOG group.
/// The usage table (`Effect.loadUsageRules`) goes through the same context and event socket: another process's
/// change to it, and the kernel's notice of a quota used up, are handed to the engine.
final class Enforcer {
    private let loop: EventLoop
    private var nft: Nftables?
    /// Where changes of elements alone go (`NftablesElements`).
    private var elementSocket: NetlinkSocket?
    private var monitor: NftablesMonitor?
    private var nflog: NflogReader?
    /// Binding the NFLOG group failed and the log said so: not said again at every load.
    private var nflogFailed = false
    /// The rules last loaded successfully; nil while none are (Mode=off, or after removal).
    private var inForce: String?
    /// This process's netfilter sockets, libnftables' among them: changes they make are the daemon's own.
    private var ownPortIDs: Set<UInt32> = []
    /// A repair asked for by a commit of another process during the daemon's own transaction.
    private var repairTimer: TimerSource?
    /// When the last repairs were made (monotonic µs).
    private var repairs: [UInt64] = []
    /// Called when loading the rules again after a foreign change fails: the engine retries.
    var repairFailed: (String) -> Void = { _ in }
    /// The kernel rejected and logged a packet of this app and pending kind.
    var blocked: (String, PolicyDimension, UInt32?, Int32?) -> Void = { _, _, _, _ in }
    /// Another process changed the usage table; a quota object of it ran out.
    var usageChanged: () -> Void = {}
    var quotaReached: (String) -> Void = { _ in }
    /// The usage table was loaded by this process and not removed since.
    private var usageInForce = false

    init(loop: EventLoop) { self.loop = loop }

    /// Runs the transactions in order, stopping at the first that fails; nil, or why it failed. `whole`: the whole
    /// ruleset they lead to, loaded again should another process change the table (they may change only part of
    /// it). A whole ruleset is handed over from the table in force, if there is one (`Ruleset.wholeLoad`).
    func load(_ transactions: [String], inForce whole: String) -> String? {
        let removal = whole == Ruleset.removal
        var scripts = transactions
        if removal, nft == nil {
            // Removing with nothing loaded by this run (Mode=off at start-up): only if a table was left behind, so
            // that Mode=off never loads libnftables.
            switch Result(catching: { () throws(Errno) in try Self.tables() }) {
            case .success((false?, false?)): return nil
            case .success((nil, _)), .success((_, nil)): return "not permitted to look at nftables"
            case let .failure(e): return "cannot ask nftables: \(e)"
            case .success: break
            }
        } else if !removal, transactions == [whole] {
            // Unknown answers take the handover: it is right whatever is there.
            let (table, handover) = (try? Self.tables()) ?? (nil, nil)
            scripts = Ruleset.wholeLoad(whole, tableInForce: table ?? true, handoverLeft: handover ?? true)
        }
        // Out of the nftables group meanwhile: the kernel builds no notification of our own changes, and the
        // generation tells whether another process committed in between.
        monitor?.quiet()
        var failure: String?
        var commits: UInt32 = 0
        do {
            for script in scripts {
                // Only elements change (and chains go): sent as nf_tables messages, without libnftables' reading
                // of the whole table first.
                if transactions != [whole], let changes = ElementChanges.parse(script) {
                    if elementSocket == nil { elementSocket = try NftablesElements.socket() }
                    if case let .some(refused) = NftablesElements.run(changes, on: elementSocket!) {
                        if let refused { failure = refused; break }
                        commits += 1
                        Log.debug("enforcement: \(changes.commands.count) commands sent as one nf_tables batch")
                        continue
                    }
                }
                if nft == nil { nft = try Nftables() }
                try nft!.run(script)
                commits += 1
            }
            // Looked up once libnftables' socket surely exists (after its first transaction).
            if ownPortIDs.isEmpty, nft != nil {
                ownPortIDs = NftablesMonitor.ownPortIDs()
                monitor?.ownPortIDs = ownPortIDs
            }
        } catch {
            failure = "\(error)"
        }
        if monitor?.listen(ownCommits: commits) == true {
            // Repaired on the next pass of the loop, once this load is accounted for.
            repairSoon()
        }
        // libnftables keeps what it last loaded as its cache until the next run: for a whole table of 10,000 apps
        // about 40 MB. The context goes with it (a new one costs a millisecond), and the heap is given back.
        if transactions == [whole] {
            nft = nil
            ownPortIDs = []
            Heap.releaseFree()
        }
        if let failure { return failure }
        if removal {
            inForce = nil
            repairTimer?.cancel()
            repairTimer = nil
            if !usageInForce { monitor = nil }
            nflog = nil
            elementSocket = nil
            return nil
        }
        inForce = whole
        if nflog == nil {
            do {
                nflog = try NflogReader(loop: loop, group: Ruleset.logGroup)
                nflog?.logged = { [unowned self] packet in
                    guard let (app, kind) = Ruleset.parseLogPrefix(packet.prefix) else { return }
                    self.blocked(app, kind, packet.uid, packet.outIndex)
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
        return nil
    }

    private func ensureMonitor() {
        guard monitor == nil else { return }
        do {
            monitor = try NftablesMonitor(loop: loop, tables: [Ruleset.table, UsageRules.table])
            monitor?.ownPortIDs = ownPortIDs
            monitor?.changed = { [unowned self] table, pid, name in
                if table == UsageRules.table {
                    if self.usageInForce { self.usageChanged() }
                } else {
                    self.foreignChange(pid: pid, name: name)
                }
            }
            monitor?.objectNotified = { [unowned self] table, object in
                if table == UsageRules.table { self.quotaReached(object) }
            }
        } catch {
            Log.warning("enforcement: cannot watch nftables for changes by others (\(error)); "
                + "a flushed ruleset stays flushed until the next change")
        }
    }

    /// Runs one script of the usage table (UsageRules) as one transaction; nil, or why it failed. The removal runs
    /// only if the table exists, so that a daemon that never counts never loads libnftables.
    func loadUsage(_ script: String) -> String? {
        let removal = script == UsageRules.removal
        if removal {
            switch Result(catching: { () throws(Errno) in try NftablesTable.exists(name: UsageRules.table) }) {
            case .success(false?): usageInForce = false; return nil
            case .success(nil): return "not permitted to look at nftables"
            case let .failure(e): return "cannot ask nftables: \(e)"
            case .success(true?): break
            }
        }
        monitor?.quiet()
        var failure: String?
        var commits: UInt32 = 0
        do {
            if nft == nil { nft = try Nftables() }
            try nft!.run(script)
            commits = 1
            if ownPortIDs.isEmpty {
                ownPortIDs = NftablesMonitor.ownPortIDs()
                monitor?.ownPortIDs = ownPortIDs
            }
        } catch {
            failure = "\(error)"
        }
        if monitor?.listen(ownCommits: commits) == true {
            repairSoon()
            if usageInForce { usageChanged() }
        }
        if let failure { return failure }
        usageInForce = !removal
        if usageInForce { ensureMonitor() } else if inForce == nil { monitor = nil }
        return nil
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
        guard let rules = inForce else { return }
        // Never a loop with another tool that keeps changing the table (or with ourselves, were our own socket
        // ever mistaken for another's): at most 5 repairs a second, then the engine's bounded retries.
        let now = Clock.monotonicMicroseconds()
        repairs = repairs.filter { now - $0 < 1_000_000 } + [now]
        guard repairs.count <= 5 else {
            Log.err("enforcement: table \(Ruleset.family) \(Ruleset.table) keeps being changed by others; not loading it again")
            repairFailed("the table keeps being changed by another process")
            return
        }
        let who = pid.map { "pid \($0)" + (name.map { " (\($0))" } ?? "") }
            ?? (during ? "another process (it committed during the daemon's own load)" : "another process (events were lost)")
        Log.notice("enforcement: \(who) changed table \(Ruleset.family) \(Ruleset.table); loading the rules again")
        if let error = load([rules], inForce: rules) {
            Log.err("enforcement: loading the rules again failed: \(error)")
            repairFailed(error)
        }
    }
}
