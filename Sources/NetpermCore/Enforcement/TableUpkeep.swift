// SPDX-License-Identifier: LGPL-2.1-or-later
/// What is decided about the nftables tables the daemon keeps, with no I/O (TableUpkeepTests): which load runs
/// next and how (a removal answered without running when nothing is there, a whole load through the handover's
/// table when one is in force), what the rules and the counting table in force are, whether another process's change
/// is repaired, and what follows a load's end (sockets to open or close, a repair soon, the engine told). Held by the
/// engine's enforcement machine (Engine+Tables.swift), which hands its steps out as effects: each load asked for gets
/// an id its answer is matched by; a step that depends on the kernel asks first (`Step.lookUp`, `Effect.lookUpTables`)
/// and goes on with what the kernel said (`lookedUp`). The Enforcer only asks the kernel and runs the loads.
public struct TableUpkeep {
    /// Names a load asked for, in its answer (`Job.done`; nil for a repair).
    public typealias LoadID = UInt64
    public typealias Job = LoadQueue<LoadID>.Job

    private var queue = LoadQueue<LoadID>()
    private var lastID: LoadID = 0
    /// The job whose step waits for the kernel's answer (`lookedUp`).
    public private(set) var asking: Job?
    /// The rules last loaded successfully; nil while none are (Mode=off, or after removal).
    public private(set) var rulesInForce: String?
    /// The counting table was loaded by this process and not removed since.
    public private(set) var usageInForce = false
    /// A load runs (on its thread, or on the loop between its start and its end).
    public private(set) var running = false

    public init() {}

    /// Whether a load runs or waits.
    public var busy: Bool { running || asking != nil || !queue.isEmpty }

    /// What the kernel said of the tables, when a load needs to know (`Kind`): whether each exists (nil: it would not
    /// say, no CAP_NET_ADMIN), or why it could not be asked.
    public enum TableLookup: Equatable, Sendable {
        case tables(rules: Bool?, handover: Bool?)
        case usage(Bool?)
        case failed(errno: Int32, words: String)
    }

    /// Which tables a lookup is about.
    public enum Lookup: Equatable, Sendable {
        /// The rules' table and the handover's.
        case rules
        /// The counting table.
        case usage
    }

    /// The next step: a load to run, a job answered without running (nothing to remove, or nftables would not say),
    /// or the kernel asked first (`lookedUp` goes on).
    public enum Step {
        case run(Job, Run)
        case answered(Job, EdgeError?)
        case lookUp(Lookup)
    }

    /// A load as it runs: its transactions in order, whether changes of elements alone may go as nf_tables messages,
    /// and what a failure says was being done.
    public struct Run: Equatable, Sendable {
        public var scripts: [RuleTransaction]
        public var elements: Bool
        public var operation: EdgeError.Operation
    }

    /// The engine's rules: `transactions` in order, leading to `whole`; the id its answer names.
    public mutating func rules(_ transactions: [RuleTransaction], whole: String) -> LoadID {
        lastID += 1
        queue.rules(transactions, whole: whole, done: lastID)
        return lastID
    }

    /// One script of the counting table, in turn with the rules' loads; the id its answer names.
    public mutating func usage(_ script: String) -> LoadID {
        lastID += 1
        queue.usage(script, done: lastID)
        return lastID
    }

    /// The next step, if no load runs and the kernel is not being asked; a `run` step marks one running until
    /// `finished`; a `lookUp` step waits for `lookedUp`.
    public mutating func next() -> Step? {
        guard !running, asking == nil, let job = queue.next(inForce: rulesInForce) else { return nil }
        if let lookup = lookup(for: job) {
            asking = job
            return .lookUp(lookup)
        }
        return begin(job, nil)
    }

    /// What the kernel said of the tables the last `lookUp` step asked about: the job's step (never another lookup);
    /// nil when nothing asked.
    public mutating func lookedUp(_ answer: TableLookup) -> Step? {
        guard let job = asking else { return nil }
        asking = nil
        return begin(job, answer)
    }

    /// What the step of `job` depends on in the kernel, if anything.
    private func lookup(for job: Job) -> Lookup? {
        guard job.kind != .usage else { return job.transactions[0].text == UsageRules.removal ? .usage : nil }
        if job.whole! == Ruleset.removal { return rulesInForce == nil ? .rules : nil }
        return job.loadsWhole ? .rules : nil
    }

    private mutating func begin(_ job: Job, _ answer: TableLookup?) -> Step {
        let step = job.kind == .usage ? usageStep(job, answer) : rulesStep(job, answer)
        if case .run = step { running = true }
        return step
    }

    private func rulesStep(_ job: Job, _ answer: TableLookup?) -> Step {
        let whole = job.whole!
        let removal = whole == Ruleset.removal
        var scripts = job.transactions
        if removal, rulesInForce == nil {
            // Removing with nothing loaded by this run (Mode=off at start-up): only if a table was left behind, so
            // that Mode=off never loads libnftables.
            switch answer {
            case .tables(false?, false?)?: return .answered(job, nil)
            case .tables(nil, _)?, .tables(_, nil)?, .usage?: return .answered(job, Self.notPermitted(.loadRules))
            case let .failed(errno, words)?: return .answered(job, Self.cannotAsk(.loadRules, errno, words))
            case .tables?, nil: break
            }
        } else if !removal, job.loadsWhole {
            // Unknown answers take the handover: it is right whatever is there.
            var table: Bool?, handover: Bool?
            if case let .tables(t, h)? = answer { (table, handover) = (t, h) }
            scripts = Ruleset.wholeLoad(whole, tableInForce: table ?? true, handoverLeft: handover ?? true)
                .map(RuleTransaction.init(whole:))
        }
        return .run(job, Run(scripts: scripts, elements: !job.loadsWhole, operation: .loadRules))
    }

    private mutating func usageStep(_ job: Job, _ answer: TableLookup?) -> Step {
        let script = job.transactions[0]
        if script.text == UsageRules.removal {
            // The removal runs only if the table exists, so that a daemon that never counts never loads libnftables.
            switch answer {
            case .usage(false?)?:
                usageInForce = false
                return .answered(job, nil)
            case .usage(nil)?, .tables?: return .answered(job, Self.notPermitted(.loadUsageRules))
            case let .failed(errno, words)?: return .answered(job, Self.cannotAsk(.loadUsageRules, errno, words))
            case .usage(true?)?, nil: break
            }
        }
        return .run(job, Run(scripts: [script], elements: false, operation: .loadUsageRules))
    }

    /// The kernel would not say whether a table exists (no CAP_NET_ADMIN).
    static func notPermitted(_ operation: EdgeError.Operation) -> EdgeError {
        EdgeError(operation, "not permitted to look at nftables")
    }

    static func cannotAsk(_ operation: EdgeError.Operation, _ errno: Int32, _ words: String) -> EdgeError {
        EdgeError(operation, errno: errno, "cannot ask nftables: \(words)")
    }

    /// What the sockets that follow the tables do after a load.
    public enum Watching: Equatable, Sendable {
        case unchanged
        /// Rules are in force: their NFLOG group is read and the tables watched.
        case rulesInForce
        /// The rules are gone: their NFLOG group, element socket and repair timer go; the watch too unless the
        /// counting table still needs it.
        case rulesRemoved(keepWatch: Bool)
        /// The counting table is in force: the tables are watched.
        case usageInForce
        /// The counting table is gone: the watch goes unless the rules still need it.
        case usageRemoved(keepWatch: Bool)
    }

    /// What the edge does once a load ended.
    public struct Finish: Equatable, Sendable {
        /// Another process committed during the load: the table is repaired soon.
        public var repairSoon = false
        /// Another process committed during the load while the counting table was in force: the engine hears of it.
        public var usageChanged = false
        public var watching = Watching.unchanged
        /// A repair failed: said in the log.
        public var repairFailure: EdgeError?
        /// A repair failed with no load of the engine's behind it: the engine hears of it (it retries).
        public var engineRetries: EdgeError?
    }

    /// The load of `job` ended with `failure`; `othersCommitted`: another process committed meanwhile.
    public mutating func finished(_ job: Job, failure: EdgeError?, othersCommitted: Bool) -> Finish {
        running = false
        var f = Finish()
        f.repairSoon = othersCommitted
        f.usageChanged = othersCommitted && usageInForce
        switch job.kind {
        case .usage:
            guard failure == nil else { break }
            usageInForce = job.transactions.first?.text != UsageRules.removal
            f.watching = usageInForce ? .usageInForce : .usageRemoved(keepWatch: rulesInForce != nil)
        case .rules, .repair:
            if failure == nil {
                let removed = job.whole! == Ruleset.removal
                rulesInForce = removed ? nil : job.whole!
                f.watching = removed ? .rulesRemoved(keepWatch: usageInForce) : .rulesInForce
            }
            if job.kind == .repair, let failure {
                f.repairFailure = failure
                if !queue.repairFailed() { f.engineRetries = failure }
            }
        }
        return f
    }

    /// What comes of another process's change of the tables.
    public enum Change: Equatable, Sendable {
        /// Nothing of it is the daemon's concern (no rules in force; the counting table not loaded by it).
        case ignored
        /// The counting table changed: the engine hears of it.
        case usageChanged
        /// A repair is queued: the next load starts if none runs.
        case repairQueued
        /// A repair already waits: it loads the rules in force when it starts.
        case repairWaiting
        /// More than `LoadQueue.repairsPerSecond` in the last second: not loaded again; the engine hears of it and
        /// retries, bounded.
        case tooMany(EdgeError)
    }

    /// Another process changed the counting table (`usage`) or the rules' table, at `now` (monotonic µs).
    public mutating func foreignChange(usage: Bool, at now: UInt64) -> Change {
        if usage { return usageInForce ? .usageChanged : .ignored }
        guard rulesInForce != nil else { return .ignored }
        // Never a loop with another tool that keeps changing the table (or with ourselves, were our own socket
        // ever mistaken for another's): at most 5 repairs a second, then the engine's bounded retries.
        switch queue.repair(at: now) {
        case .queued: return .repairQueued
        case .waiting: return .repairWaiting
        case .tooMany: return .tooMany(EdgeError(.loadRules, "the table keeps being changed by another process"))
        }
    }
}
