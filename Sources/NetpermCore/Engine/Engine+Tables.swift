// SPDX-License-Identifier: LGPL-2.1-or-later

/// The nftables tables as the engine keeps them (TableUpkeep): the loads it asked for, run one at a time in the
/// order they came, repairs after another process's change queued behind them. Changed only in this file.
struct TableMachine {
    /// What runs next, what is in force, whether another process's change is repaired.
    fileprivate(set) var upkeep = TableUpkeep()
    /// The job whose load the edge runs (`Effect.runLoad`) until `Input.loadRan`.
    fileprivate(set) var running: TableUpkeep.Job?
    /// Loads asked for whose answers the engine does not act on (a table an earlier run left, removed quietly).
    fileprivate(set) var quiet: Set<TableUpkeep.LoadID> = []
    /// Steps are being handed out: a load asked for meanwhile waits for the loop that hands them out.
    fileprivate(set) var driving = false
}

extension Engine {
    /// Asks for the rules' transactions to be loaded, in turn (`Effect.loadRules`, the notice the edge keeps the
    /// cgroups' descriptors open by); `report`: the engine acts on the answer (`rulesLoaded`).
    func askRulesLoad(_ transactions: [RuleTransaction], report: Bool, inForce text: String, handles: Set<Int32>) {
        let id = enforcement.tables.upkeep.rules(transactions, whole: text)
        if !report { enforcement.tables.quiet.insert(id) }
        out.append(.loadRules(id: id, transactions, report: report, inForce: text, handles: handles))
        driveTables()
    }

    /// Asks for one script of the counting table, in turn with the rules' loads (`Effect.loadUsageRules`); `report`:
    /// the engine acts on the answer (`usageRulesLoaded`).
    func askUsageLoad(_ script: String, report: Bool, handles: Set<Int32>) {
        let id = enforcement.tables.upkeep.usage(script)
        if !report { enforcement.tables.quiet.insert(id) }
        out.append(.loadUsageRules(id: id, script, report: report, handles: handles))
        driveTables()
    }

    /// Hands out the next steps: until a load runs or the kernel is asked (their answers go on), or nothing waits.
    func driveTables() {
        guard !enforcement.tables.driving else { return }
        enforcement.tables.driving = true
        defer { enforcement.tables.driving = false }
        while let step = enforcement.tables.upkeep.next() {
            guard carryOut(step) else { return }
        }
    }

    /// One step of the tables' upkeep as effects; true when the next may follow at once (a job answered).
    private func carryOut(_ step: TableUpkeep.Step) -> Bool {
        switch step {
        case let .lookUp(lookup):
            out.append(.lookUpTables(lookup))
            return false
        case let .answered(job, error):
            answer(job, error)
            return true
        case let .run(job, run):
            enforcement.tables.running = job
            out.append(.runLoad(id: job.done, run))
            return false
        }
    }

    /// What the kernel said of the tables the last `Effect.lookUpTables` asked about (`Input.tablesLookedUp`).
    func tablesLookedUp(_ answer: TableUpkeep.TableLookup) {
        guard let step = enforcement.tables.upkeep.lookedUp(answer) else { return }
        enforcement.tables.driving = true
        let goOn = carryOut(step)
        enforcement.tables.driving = false
        if goOn { driveTables() }
    }

    /// The load the edge ran ended (`Input.loadRan`); `othersCommitted`: another process committed meanwhile. What
    /// follows the tables is told, a repair asked for, the engine's own machines hear the answer, the next load runs.
    func loadRan(failure: EdgeError?, othersCommitted: Bool) {
        guard let job = enforcement.tables.running else { return }
        enforcement.tables.running = nil
        enforcement.tables.driving = true
        let f = enforcement.tables.upkeep.finished(job, failure: failure, othersCommitted: othersCommitted)
        // Repaired once this load is accounted for.
        if f.repairSoon { out.append(.repairTablesSoon) }
        if f.watching != .unchanged { out.append(.followTables(f.watching)) }
        if let failure = f.repairFailure { log(.err, "enforcement: loading the rules again failed: \(failure)") }
        if f.usageChanged { usageTableChanged() }
        // A repair failed with no load of the engine's behind it: the engine retries, bounded.
        if let failure = f.engineRetries { rulesLoaded(error: failure) }
        answer(job, failure)
        enforcement.tables.driving = false
        driveTables()
    }

    /// Another process changed a table (`Input.tablesChanged`): the counting table is read and loaded again, the
    /// rules' table repaired, at most `LoadQueue.repairsPerSecond` times a second (then the engine's bounded retries).
    func tablesChanged(_ change: TablesChange) {
        switch enforcement.tables.upkeep.foreignChange(usage: change.usage, at: change.at) {
        case .ignored:
            break
        case .usageChanged:
            usageTableChanged()
        case let .tooMany(error):
            log(.err, "enforcement: table \(Ruleset.family) \(Ruleset.table) keeps being changed by others; not loading it again")
            rulesLoaded(error: error)
        case .repairQueued, .repairWaiting:
            log(.notice, "enforcement: \(change.who) changed table \(Ruleset.family) \(Ruleset.table); loading the rules again")
            // A repair that waits already starts after the load that runs.
            driveTables()
        }
    }

    /// The edge is told the load `job` asked for ended (it lets its descriptors go); the machine that asked hears how
    /// it went, unless it asked quietly. A repair's answer goes to no one.
    private func answer(_ job: TableUpkeep.Job, _ error: EdgeError?) {
        guard let id = job.done else { return }
        out.append(.loadAnswered(id: id, error: error))
        guard enforcement.tables.quiet.remove(id) == nil else { return }
        switch job.kind {
        case .usage: usageRulesLoaded(error: error)
        case .rules, .repair: rulesLoaded(error: error)
        }
    }
}
