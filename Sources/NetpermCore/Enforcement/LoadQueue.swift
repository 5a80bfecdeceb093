// SPDX-License-Identifier: LGPL-2.1-or-later
/// The order in which the kernel gets the daemon's nft loads (the engine's rules, the counting table's scripts, and
/// repairs after another process touched the table), and when a repair is worth one: at most
/// `repairsPerSecond` in any second (never a loop with another tool that keeps changing the table), one waiting at a
/// time (it loads the rules in force when it starts), none while a whole load waits behind it. Pure, so that this
/// policy is tested without a kernel (LoadQueueTests); held in `TableUpkeep` by the engine, whose jobs the Enforcer
/// runs one at a time.
public struct LoadQueue<Done> {
    public enum Kind: Equatable, Sendable {
        case rules, repair, usage
    }

    public struct Job {
        public var kind: Kind
        public var transactions: [RuleTransaction]
        /// Rules: the whole ruleset they lead to (what a repair loads again later); a repair: the rules in force when
        /// it starts; nil for the counting table.
        public var whole: String?
        /// Who hears the answer; nil for a repair (the engine hears of one only when it fails with nothing behind it).
        public var done: Done?

        /// It loads the whole ruleset it leads to (not only what differs): a repair, a retry, or a change too large.
        public var loadsWhole: Bool { whole.map { transactions == [RuleTransaction(whole: $0)] } == true }
        /// A load of the engine's whole ruleset.
        var wholeRules: Bool { kind == .rules && loadsWhole }
    }

    /// What came of another process's change.
    public enum Repair: Equatable, Sendable {
        /// A repair is queued.
        case queued
        /// One already waits: it loads the rules in force when it starts.
        case waiting
        /// More than `repairsPerSecond` in the last second: not loaded again (the engine's bounded retries take over).
        case tooMany
    }

    public static var repairsPerSecond: Int { 5 }

    private var jobs: [Job] = []
    /// A repair failed while a load of the engine's waited behind it: that load takes the whole table, as the engine
    /// would after its refusal (it hears only its own loads' answers while one is in flight).
    private var wholeNext = false
    /// When the last repairs were asked for (monotonic µs).
    private var repairs: [UInt64] = []

    public init() {}

    /// Nothing waits.
    public var isEmpty: Bool { jobs.isEmpty }

    /// The engine's rules: `transactions` in order, leading to `whole`.
    public mutating func rules(_ transactions: [RuleTransaction], whole: String, done: Done) {
        jobs.append(Job(kind: .rules, transactions: transactions, whole: whole, done: done))
    }

    /// One script of the counting table, in turn with the rules' loads.
    public mutating func usage(_ script: String, done: Done) {
        jobs.append(Job(kind: .usage, transactions: [RuleTransaction(whole: script)], whole: nil, done: done))
    }

    /// Another process changed the table, at `now` (monotonic µs).
    public mutating func repair(at now: UInt64) -> Repair {
        repairs = repairs.filter { now &- $0 < 1_000_000 } + [now]
        guard repairs.count <= Self.repairsPerSecond else { return .tooMany }
        guard !jobs.contains(where: { $0.kind == .repair }) else { return .waiting }
        jobs.append(Job(kind: .repair, transactions: [], whole: nil, done: nil))
        return .queued
    }

    /// The next job, as it is to run: a repair loads `inForce` (and is dropped when none are, or when a whole load
    /// waits behind it: that load makes it needless); the engine's load after a failed repair takes the whole table.
    public mutating func next(inForce: String?) -> Job? {
        while !jobs.isEmpty {
            var job = jobs.removeFirst()
            switch job.kind {
            case .usage:
                return job
            case .repair:
                guard let rules = inForce, !jobs.contains(where: \.wholeRules) else { continue }
                job.transactions = [RuleTransaction(whole: rules)]
                job.whole = rules
                return job
            case .rules:
                if wholeNext, let whole = job.whole {
                    wholeNext = false
                    job.transactions = [RuleTransaction(whole: whole)]
                }
                return job
            }
        }
        return nil
    }

    /// A repair failed. True when a load of the engine's waits (it will take the whole table); false when nothing
    /// does, and the engine must hear of it (it retries).
    public mutating func repairFailed() -> Bool {
        guard jobs.contains(where: { $0.kind == .rules }) else { return false }
        wholeNext = true
        return true
    }
}
