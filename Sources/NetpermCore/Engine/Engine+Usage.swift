// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// Where the usage table stands in the kernel, for STATUS.
public enum UsageTableState: Equatable, Sendable {
    case off
    /// Rules handed to the kernel, or the first reading asked for; no answer yet.
    case applying
    case counting
    case failed(EdgeError, attempts: Int)

    public static let names = ["off", "applying", "counting", "failed"]

    public var name: String {
        switch self {
        case .off: return "off"
        case .applying: return "applying"
        case .counting: return "counting"
        case .failed: return "failed"
        }
    }
}

/// What the engine keeps of usage counting (docs/USAGE.md): the totals, the readings of the kernel's counters, the
/// requests waiting for one, the saves, and the usage table's rules.
/// Its fields change only in this file (fileprivate(set)): usage's state is usage's own.
struct UsageKeeper {
    fileprivate(set) var book: UsageBook
    /// Readings asked of the edge: one in flight, one more after it. Its waiters are USAGE requests (a connection and
    /// the app asked about): the reading in flight answers its own; those that came during it wait for the next (it
    /// may have started before what they want counted).
    fileprivate(set) var reads = InFlight<(ConnectionID, String?)>()
    /// Whether this run knows the kernel's counters and quota objects; changed only by `Engine.setCounters`.
    fileprivate(set) var counters = CounterSync(known: false, lastFailed: false)
    /// A budget's limit changed, or a budget was added: the quota is made again from a reading made after that (the
    /// last one may be a whole SaveIntervalSec= old); asked for, then taken. Changed only by `Engine.setBudgetReading`.
    fileprivate(set) var budgetReading = BudgetReading.none
    fileprivate(set) var resetRequests = ResetRequests()
    fileprivate(set) var saving = Saving()
    fileprivate(set) var ticking = Ticking()
    fileprivate(set) var table = TableRules()
    fileprivate(set) var quotas = Quotas()
    fileprivate(set) var coolDown = CoolDown()
    fileprivate(set) var tagged = Tagged()
    fileprivate(set) var clock = ClockNotes()

    /// Changed only by `Engine.setUsageState`.
    private(set) var state = UsageTableState.off

    /// The one setter of the table's state: logs old -> new.
    mutating func set(_ new: UsageTableState, log: (String) -> Void) {
        guard new != state else { return }
        if new.name != state.name { log("usage: table \(state.name) -> \(new.name)") }
        state = new
    }

    /// Whether a reading of this run came in (until then the kernel's counters and quota objects are unknown), and
    /// whether the last one failed (the next is then at the tick).
    struct CounterSync: Equatable, CustomStringConvertible {
        var known: Bool
        var lastFailed: Bool
        var description: String { (known ? "known" : "unknown") + (lastFailed ? ", the last reading failed" : "") }
    }

    /// The reading a budget's new quota is made from: none needed, asked for, taken (until the quota's load).
    enum BudgetReading: String, Equatable {
        case none, asked, taken
    }

    /// RESET-USAGE requests the next reading applies (counts up to it are dropped), then answered once saved, and
    /// those saved, answered once the quotas they made again are in the kernel.
    struct ResetRequests {
        var resets: [(requester: ConnectionID?, app: String?)] = []
        var resetsSaving: [(requester: ConnectionID?, app: String?, at: Int)] = []
        var resetsLoading: [(requester: ConnectionID?, app: String?, at: Int)] = []
        /// Resets of each app in this run: part of its quotas' epoch.
        var resetCount: [String: Int] = [:]
    }

    /// Saves of the totals: one at a time, and one more if they changed meanwhile.
    struct Saving {
        var saves = InFlight<Never>()
        var lastSaved: Int?
        /// The totals moved since the last save.
        var dirty = false
        var stopping = false
    }

    struct Ticking {
        var tick: TimerID?
        /// The `SaveIntervalSec=` the tick was armed with: a reload that changes it arms the tick again.
        var tickInterval = 0
    }

    /// The usage table's rules.
    struct TableRules {
        /// The last build and what it was built from; the rules in force (nil: not known, the next load is whole).
        var key: RulesKey?
        var built: UsageRules?
        var inForce: UsageRules?
        /// Handed to the edge, not answered yet.
        var loading: UsageRules?
        /// The usage rules' loads as jobs (a lowered or new budget's reading, then its load): the one away, and
        /// whether the state asks for rules not yet handed over. Its waiters are the replies that promise the rules in
        /// force (RELOAD, READY=1 after a reload), held until the load that carries their change ends, as
        /// enforcement's are (`EnforcementBook.loads`): a RELOAD that lowered a budget was answered in 1 ms, and an
        /// app that sent at once moved 2 MB more under the old quota.
        var loads = InFlight<(id: ConnectionID?, reply: () -> Void)>()
        var attempts = 0
        var retry: TimerID?
        /// The table may be in the kernel: Count=yes loaded it, or a start with Count=no has not looked yet.
        var tableMayExist = true
        /// Count=no after counting: the last reading before the table goes was asked for.
        var finalRead = false
    }

    /// The kernel's quota objects.
    struct Quotas {
        /// The quota objects the kernel holds, as the last reading or load left them.
        var kernelQuotas: Set<QuotaName> = []
        /// Tags whose budget quota (and 80% quota) the kernel reported used up since it was made.
        var depleted: Set<UInt32> = []
        var warned: Set<UInt32> = []
        /// What each budget's quota counted at the last reading (or was made with since): past the budget when the
        /// packet that crossed it was refused, which no counter saw.
        var quotaUsed: [UInt32: UInt64] = [:]
        /// What each quota made again by the load in flight starts from.
        var remadeFrom: [UInt32: UInt64] = [:]
        /// Budgets whose quotas a load made again while a reading was in flight: that reading may have seen the
        /// quota before (a raised budget's old quota, used up), so its word on them is not taken; the load's is.
        var remadeDuringReading: Set<UInt32> = []
        /// Quotas the kernel said ran out since the last reading began (`budgetReached`).
        var noticed: Set<QuotaName> = []
    }

    /// Unprivileged uids whose USAGE forced a reading lately, and their USAGE requests waiting for the next one.
    struct CoolDown {
        var cooling: [UInt32: TimerID] = [:]
        var cooled: [UInt32: [(ConnectionID, String?)]] = [:]
    }

    /// The policy's tags (ConnectionTags) and tagging, per generation and cgroups.
    struct Tagged {
        var tags: [String: UInt32] = [:]
        var owners: [UInt32: String] = [:]
        var unitOwners: [UInt64: UserApp] = [:]
        var tagging: Ruleset.Tagging?
        var taggingKey: (generation: Int, cgroups: UnitCgroups)?
    }

    /// The wall and boot clocks at this process's last reading, and the last note on the period not moving.
    struct ClockNotes {
        var clockSeen: (epoch: Int, boot: Double, steadySince: Double)?
        var periodNote: String?
    }
    /// `mine` subscribers follow their apps' bytes: changed only in Engine+UsageFollow.swift.
    var follow = UsageFollow()

    /// What the usage rules depend on.
    struct RulesKey: Equatable {
        var links: [String]
        var generation: Int
        var cgroups: UnitCgroups
        var budgets: [UsageRules.Budget]
        var enforce: Bool
        var report: Bool
    }

    static let maxAttempts = 5

    init(book: UsageBook = UsageBook()) { self.book = book }
}

extension Engine {
    /// The one setter of the usage table's state (UsageKeeper.set).
    func setUsageState(_ new: UsageTableState) {
        usage.set(new) { log(.debug, $0) }
    }

    /// The one setter of whether the counters are known: logs old -> new.
    func setCounters(_ new: UsageKeeper.CounterSync) {
        guard new != usage.counters else { return }
        log(.debug, "usage: counters \(usage.counters) -> \(new)")
        usage.counters = new
    }

    /// The one setter of a budget's reading: logs old -> new.
    func setBudgetReading(_ new: UsageKeeper.BudgetReading) {
        guard new != usage.budgetReading else { return }
        log(.debug, "usage: budget reading \(usage.budgetReading.rawValue) -> \(new.rawValue)")
        usage.budgetReading = new
    }

    // MARK: - Counting, reading, saving

    /// Called by every input's settle() (and by a policy load, before its reply): counting on or off, the first
    /// reading, the table's rules, the tick; then the replies that waited for the rules now in force.
    func settleUsage() {
        settleCounting()
        settleUsageLoads()
        settleUsageFollow()
    }

    /// Whether the usage rules' change is away (a budget's reading, then its load): a job of `usage.table.loads` runs while
    /// it is, and its replies go once it is not.
    private func settleUsageLoads() {
        let busy = usage.table.loading != nil || (usage.budgetReading == .asked && usage.reads.running)
        if busy {
            if !usage.table.loads.running { _ = usage.table.loads.logged("usage rule loads", log: debugLog) { $0.start() } }
            return
        }
        // After almost every input (each QUERY): nothing to answer, and no array made and appended to find that out.
        guard !usage.table.loads.idle else { return }
        var done = usage.table.loads.running ? usage.table.loads.logged("usage rule loads", log: debugLog) { $0.finish().waiters } : []
        done += usage.table.loads.drain()
        releaseUsageReplies(done)
    }

    /// Runs `action` once the usage rules the state asks for now are in force (or failed to load), or at once if no
    /// change of them is away; for `id`, while its connection lasts.
    func onceUsageInForce(_ id: ConnectionID?, _ action: @escaping () -> Void) {
        guard usage.table.loads.running else {
            action()
            return
        }
        usage.table.loads.wait((id, action))
    }

    /// A connection closed: the replies it waited for the usage rules for are not sent.
    func forgetUsageReplies(of id: ConnectionID) { usage.table.loads.removeWaiters { $0.id == id } }

    private func releaseUsageReplies(_ held: [(id: ConnectionID?, reply: () -> Void)]) {
        for h in held where h.id.map({ clients.sessions[$0] != nil }) ?? true { h.reply() }
    }

    private func settleCounting() {
        guard state.ready else { return }
        let settings = state.config.usage
        guard settings.count else {
            if let t = usage.ticking.tick { cancelTimer(t); usage.ticking.tick = nil }
            guard usage.table.tableMayExist, !usage.reads.running, usage.table.loading == nil else { return }
            // Counting was on: what it counted since the last reading is read and saved before the table goes.
            if usage.table.inForce != nil, !usage.table.finalRead {
                usage.table.finalRead = true
                requestUsageRead()
                return
            }
            if usage.saving.dirty || usage.saving.saves.running {
                if !usage.saving.saves.running { saveUsage() }
                return
            }
            if usage.table.inForce != nil { log(.notice, "usage: [Usage] Count=no, removing the counting rules") }
            usage.table.finalRead = false
            usage.table.tableMayExist = false
            usage.table.inForce = nil
            usage.table.built = nil
            usage.table.key = nil
            setUsageState(.off)
            // A start with Count=no removes a table left by an earlier run, quietly: a daemon that never counts may lack
            // the privilege even to look.
            askUsageLoad(UsageRules.removal, report: false, handles: [])
            return
        }
        if let t = usage.ticking.tick, usage.ticking.tickInterval != settings.saveIntervalSec {
            // A reload changed the interval: the next tick is the new interval from now, not the old one's end.
            cancelTimer(t)
            usage.ticking.tick = nil
        }
        if usage.ticking.tick == nil { armUsageTick() }
        guard usage.counters.known else {
            if usage.state == .off { setUsageState(.applying) }
            // A failed reading is tried again at the next tick, not at every input.
            if !usage.counters.lastFailed { requestUsageRead() }
            return
        }
        settleUsageRules()
    }

    /// Asks the edge for the counters; a reading in flight is followed by one more.
    func requestUsageRead() {
        if usage.reads.logged("usage readings", log: debugLog, { $0.start() }) { out.append(.readUsage) }
    }

    /// The kernel's counters (nil: no usage table), or why they could not be read.
    func usageRead(_ reading: UsageReading?, error: EdgeError?) {
        let (askers, again) = usage.reads.logged("usage readings", log: debugLog) { $0.finish() }
        if usage.budgetReading == .asked, error == nil { setBudgetReading(.taken) }
        let now = wallTime
        let noticed = usage.quotas.noticed
        usage.quotas.noticed = []
        defer { usage.quotas.remadeDuringReading = [] }
        if let error {
            if usage.state != .failed(error, attempts: usage.table.attempts) { log(.err, "usage: cannot read the counters: \(error)") }
            setUsageState(.failed(error, attempts: usage.table.attempts))
            setCounters(.init(known: usage.counters.known, lastFailed: true))
            // The kernel's word stands without the reading.
            for q in noticed {
                if q.warning { usage.quotas.warned.insert(q.tag) } else { usage.quotas.depleted.insert(q.tag) }
            }
        } else {
            if reading == nil, usage.table.inForce != nil {
                log(.notice, "usage: the counting table is gone (another process removed it); loading it again")
                usage.table.inForce = nil
            }
            setCounters(.init(known: true, lastFailed: false))
            usage.table.tableMayExist = reading != nil || usage.table.tableMayExist
            if let r = reading {
                // The tags name the policy's apps from the first reading on: counts made while no daemon ran (a
                // restart, a crash) are the apps', not other processes'.
                refreshTagging()
                let (moved, movedUsers) = absorb(r)
                tellCounted(moved, movedUsers)
                usage.quotas.kernelQuotas = Set(r.quotas.keys)
                // A quota made again during this reading keeps what its load said (usageRulesLoaded).
                let stale = usage.quotas.remadeDuringReading
                let loadSaid = usage.quotas.quotaUsed, depleted = usage.quotas.depleted, warned = usage.quotas.warned
                usage.quotas.quotaUsed = Dictionary(r.quotaUsed.compactMap { q, used in
                    q.warning ? nil : (q.tag, stale.contains(q.tag) ? loadSaid[q.tag] ?? used : used)
                }, uniquingKeysWith: { a, _ in a })
                // Used up, by the reading's word, or the load's for a quota it made again meanwhile.
                func usedUp(_ q: QuotaName, _ reading: Bool) -> Bool {
                    stale.contains(q.tag) ? (q.warning ? warned : depleted).contains(q.tag) : reading
                }
                usage.quotas.depleted = Set(r.quotas.compactMap { q, o in !q.warning && usedUp(q, o) ? q.tag : nil })
                usage.quotas.warned = Set(r.quotas.compactMap { q, o in q.warning && usedUp(q, o) ? q.tag : nil })
                if !moved.isEmpty, moved.contains(where: { state.config.meteredBudget(for: state.config.app(named: $0)) != nil }) {
                    invalidateReplies()
                }
            } else {
                usage.quotas.kernelQuotas = []
            }
        }
        followPeriod(now)
        let resets = usage.resetRequests.resets
        usage.resetRequests.resets = []
        for r in resets {
            usage.book.reset(r.app, at: now.epoch)
            for app in r.app.map({ [$0] }) ?? state.config.apps.map(\.id) { usage.resetRequests.resetCount[app, default: 0] += 1 }
            log(.notice, "usage: " + (r.app.map { "\($0)'s counts reset" } ?? "every app's counts reset"), app: r.app)
            if let app = r.app {
                usage.tagged.tags[app].map { _ = usage.quotas.depleted.remove($0); _ = usage.quotas.warned.remove($0); usage.quotas.quotaUsed[$0] = nil }
            } else {
                usage.quotas.depleted = []
                usage.quotas.warned = []
                usage.quotas.quotaUsed = [:]
            }
            usage.saving.dirty = true
            usage.resetRequests.resetsSaving.append((r.requester, r.app, now.epoch))
            invalidateReplies()
        }
        settleBudgets()
        for (id, app) in askers where clients.sessions[id] != nil {
            replyUsage(id, app)
            out.append(.resume(id))
        }
        let interval = state.config.usage.saveIntervalSec
        if usage.saving.dirty, usage.saving.stopping || !resets.isEmpty || usage.saving.lastSaved.map({ now.epoch - $0 >= interval }) ?? true {
            saveUsage()
        }
        if again || !usage.reads.waiters.isEmpty || !usage.resetRequests.resets.isEmpty { requestUsageRead() }
    }

    /// A reading's growth into the totals, by the tags and the users' units in force; the totals are to be saved
    /// when they moved. Returns the apps whose counts moved.
    private func absorb(_ r: UsageReading) -> (apps: Set<String>, users: Set<UserApp>) {
        let owners = usage.tagged.owners, unitOwners = usage.tagged.unitOwners
        let users = usage.book.userApps
        let moved = usage.book.absorb(r, owner: { owners[$0] }, unitOwner: { unitOwners[$0] })
        let movedUsers = usage.book.userApps == users ? [] : Set(usage.book.userApps.compactMap { users[$0.key] == $0.value ? nil : $0.key })
        if !moved.isEmpty || !usage.book.other.current.isEmpty || !movedUsers.isEmpty { usage.saving.dirty = true }
        return (moved, movedUsers)
    }

    /// Writes the totals, once at a time (a change meanwhile is written next).
    func saveUsage() {
        guard usage.saving.saves.logged("usage saves", log: debugLog, { $0.start() }) else { return }
        usage.saving.dirty = false
        out.append(.saveUsage(usage.book))
    }

    func usageSaved(error: EdgeError?) {
        let (_, again) = usage.saving.saves.logged("usage saves", log: debugLog) { $0.finish() }
        if let error {
            log(.err, "usage: cannot save the totals: \(error)")
            usage.saving.dirty = true
        } else {
            usage.saving.lastSaved = wallTime.epoch
        }
        let done = usage.resetRequests.resetsSaving
        usage.resetRequests.resetsSaving = []
        for r in done {
            if let error {
                answerReset(r, error: "the counts were reset but could not be saved: \(error)")
            } else if usage.table.loading != nil || usage.table.built != usage.table.inForce {
                // Answered once the quotas it made again are in the kernel: `reset && retry` must find them.
                usage.resetRequests.resetsLoading.append(r)
            } else {
                answerReset(r, error: nil)
            }
        }
        if again, usage.saving.dirty { saveUsage() }
    }

    private func answerReset(_ r: (requester: ConnectionID?, app: String?, at: Int), error: String?) {
        guard let id = r.requester, clients.sessions[id] != nil else { return }
        if let error {
            replyError(id, ProtocolError(.internalError, error))
        } else {
            reply(id) { w in
                w.field("ok", true)
                w.field("reset", r.app)
                w.field("at", r.at)
            }
        }
        out.append(.resume(id))
    }

    /// The resets whose quotas the load just answered made again (or failed to).
    private func answerResetsLoaded(error: EdgeError?) {
        let waiting = usage.resetRequests.resetsLoading
        usage.resetRequests.resetsLoading = []
        for r in waiting {
            answerReset(r, error: error.map { "the counts were reset but the kernel's quotas could not be made again: \($0)" })
        }
    }

    /// The usage tick: the counters are read (and the totals saved if they moved), and the period checked.
    func usageTicked() {
        usage.ticking.tick = nil
        guard state.config.usage.count else { return }
        armUsageTick()
        requestUsageRead()
    }

    private func armUsageTick() {
        usage.ticking.tickInterval = state.config.usage.saveIntervalSec
        usage.ticking.tick = armTimer(.usageTick, microseconds: UInt64(usage.ticking.tickInterval) * 1_000_000)
    }

    /// A quota object of the usage table ran out (the kernel said so on its own): a budget, or its 80%.
    /// The kernel said a quota ran out: the counters are read at once, and the verdict and the 80%/100% events follow
    /// that reading (which has the quota's word too), so that they carry the bytes used, not the last tick's.
    func budgetReached(_ quota: QuotaName) {
        log(.debug, "usage: quota \(quota) used up")
        usage.quotas.noticed.insert(quota)
        requestUsageRead()
    }

    /// SIGTERM: the last counts are read and saved before the process goes (the table stays, and goes on counting
    /// for the next one).
    func stopUsage() {
        guard state.config.usage.count, usage.counters.known else { return }
        usage.saving.stopping = true
        requestUsageRead()
    }

    // MARK: - Budgets

    /// Each budgeted app's state: used up (its metered bytes this period reached the budget, or the kernel's quota
    /// says so), and the 80% and 100% announcements, once each per period.
    func settleBudgets() {
        var exhausted: Set<String> = []
        for app in state.config.apps {
            guard let fact = budgetFact(for: app.id) else { continue }
            if fact.exhausted { exhausted.insert(app.id) }
            let warned = fact.exhausted || fact.used >= UsageRules.Budget.warningLimit(fact.limit)
                || usage.tagged.tags[app.id].map { usage.quotas.warned.contains($0) } ?? false
            // Each threshold crossed is told, in order, even when one reading or the kernel's notices cross both.
            for percent in [80, 100] where percent > usage.book[app.id].announced && (percent == 100 ? fact.exhausted : warned) {
                usage.book.apps[app.id, default: AppUsage()].announced = percent
                usage.saving.dirty = true
                log(percent == 100 ? .notice : .info, "usage: \(app.id) has used \(percent)% of its metered budget "
                    + "(\(ByteSize.text(fact.used)) of \(ByteSize.text(fact.limit)) counted)"
                    + (percent == 100 ? (fact.enforced ? "; refused on metered links" : "; advice only, nothing refuses it")
                        + " until the next period or a reset" : ""))
                work.events.append(.usage(BudgetNotice(app: app.id, percent: percent, budget: fact)))
            }
        }
        setExhausted(exhausted)
    }

    /// What a verdict says of an app's budget; nil when it has none.
    func budgetFact(for app: String) -> BudgetFact? {
        // Field by field: `policyApp(named:)` copied the whole `[App]` (~260 instructions a QUERY) to read one field.
        guard let i = state.config.appIndex[app],
              let limit = AppPolicy.meteredBudget(state.config.apps[i].meteredBudget, over: state.config.meteredBudget)
        else { return nil }
        let used = usage.book[app].current.meteredBytes
        let depleted = usage.tagged.tags[app].map { usage.quotas.depleted.contains($0) } ?? false
        let tagged = usage.tagged.tagging?.taggedApps.contains(app) ?? false
        let enforced = state.config.enforcement != .off && usage.state == .counting && tagged
            && usage.table.inForce?.budgets.contains { $0.tag == usage.tagged.tags[app] } == true
        let start = usage.book.period
        return BudgetFact(limit: limit, used: used, exhausted: used >= limit || depleted, enforced: enforced,
                          periodStart: start,
                          periodEnd: start.map { UsagePeriod.next(after: $0, startDay: state.config.usage.periodStart) })
    }

    // MARK: - The usage table

    /// Builds the counting rules when what they depend on changed, and loads what differs from those in force.
    func settleUsageRules() {
        refreshTagging()
        let links = state.network.links.compactMap { l in UsageClass(link: l).map { l.name + " " + $0.name } }
        let key = UsageKeeper.RulesKey(links: links, generation: state.policyGeneration, cgroups: enforcement.cgroups,
                                       budgets: kernelBudgets(), enforce: state.config.enforcement != .off,
                                       report: state.config.report.enabled)
        if key != usage.table.key || usage.table.built == nil {
            usage.table.key = key
            let r = UsageRules.build(links: state.network.links, tagging: usage.tagged.tagging!, budgets: key.budgets,
                                     enforce: key.enforce, report: key.report)
            if r.skipped != usage.table.built?.skipped, !r.skipped.isEmpty {
                log(.warning, "usage: not counted on links whose names nft cannot be given: "
                    + r.skipped.prefix(10).joined(separator: ", "))
            }
            usage.table.built = r
        }
        if let loading = usage.table.loading { usage.table.loads.want(usage.table.built != loading) }
        guard let r = usage.table.built, r != usage.table.inForce, usage.table.loading == nil, usage.table.retry == nil else { return }
        // A quota made again for a new limit (or a new budget) starts from what was used: read now, not at the last
        // tick (4M lowered to 1M after 2 MB not yet read made a quota of 1M with nothing used).
        if let old = usage.table.inForce {
            let was = Dictionary(old.budgets.map { ($0.tag, $0) }, uniquingKeysWith: { a, _ in a })
            // (A new epoch, a reset or a period, comes from a reading itself.)
            let fresh = r.budgets.contains { b in was[b.tag].map { $0.limit != b.limit && $0.epoch == b.epoch } ?? true }
            if fresh, usage.budgetReading != .taken {
                if usage.budgetReading == .none {
                    setBudgetReading(.asked)
                    requestUsageRead()
                }
                return
            }
        }
        loadUsageRules(r)
    }

    /// The bytes a budget's quota made again starts from: what was counted, or what its quota counted if more (the
    /// packet that crossed it, refused); a quota the kernel said used up counted at least its old limit.
    private func budgetUsed(_ tag: UInt32, oldLimit: UInt64?) -> UInt64 {
        let counted = usage.tagged.owners[tag].map { usage.book[$0].current.meteredBytes } ?? 0
        let quota = usage.quotas.quotaUsed[tag] ?? (usage.quotas.depleted.contains(tag) ? oldLimit ?? 0 : 0)
        return max(counted, quota)
    }

    private func loadUsageRules(_ r: UsageRules) {
        let old = usage.table.inForce
        // Taken by this load (one still asked for stays so: its answer is taken for the next).
        if usage.budgetReading == .taken { setBudgetReading(.none) }
        let oldLimits = Dictionary((old?.budgets ?? []).map { ($0.tag, $0.limit) }, uniquingKeysWith: { a, _ in a })
        var remade: [UInt32: UInt64] = [:]
        let script = r.script(from: old, kernelQuotas: usage.quotas.kernelQuotas, used: { tag in
            guard self.usage.tagged.owners[tag] != nil else { return 0 }
            let used = self.budgetUsed(tag, oldLimit: oldLimits[tag])
            remade[tag] = used
            return used
        })
        usage.quotas.remadeFrom = remade
        usage.table.loading = r
        usage.table.tableMayExist = true
        if usage.state != .counting { setUsageState(.applying) }
        log(.debug, "usage: loading the counting rules (\(old == nil ? "whole" : "changes only"), \(r.budgets.count) budgets)")
        askUsageLoad(script, report: true, handles: r.handles)
    }

    func usageRulesLoaded(error: EdgeError?) {
        guard let r = usage.table.loading else { return }
        usage.table.loading = nil
        // Its replies go after what the answer changes below; those of the next load wait for it (settleUsageLoads).
        let done = usage.table.loads.running ? usage.table.loads.logged("usage rule loads", log: debugLog) { $0.finish().waiters } : []
        defer { releaseUsageReplies(done) }
        guard let error else {
            let old = usage.table.inForce
            let oldBudgets = Dictionary((old?.budgets ?? []).map { ($0.tag, $0) }, uniquingKeysWith: { a, _ in a })
            // A quota made again is used up if what it started from is past its limit (a restart while the budget
            // was used up, a lower limit), and open again if not (a higher limit, a reset).
            for b in r.budgets where old == nil || oldBudgets[b.tag] != b {
                guard let used = usage.quotas.remadeFrom[b.tag] else { continue }
                usage.quotas.quotaUsed[b.tag] = min(used, b.limit)
                if used < b.limit { usage.quotas.depleted.remove(b.tag) } else { usage.quotas.depleted.insert(b.tag) }
                if used < b.warningLimit { usage.quotas.warned.remove(b.tag) } else { usage.quotas.warned.insert(b.tag) }
                if usage.reads.running { usage.quotas.remadeDuringReading.insert(b.tag) }
            }
            usage.quotas.remadeFrom = [:]
            usage.table.inForce = r
            usage.quotas.kernelQuotas = r.quotaNames
            usage.table.attempts = 0
            if usage.state != .counting {
                log(.notice, "usage: counting in force (\(r.budgets.count) budgets, "
                    + (state.config.enforcement == .off ? "advice only: [Enforcement] Mode=off" : "enforced") + ")")
            }
            setUsageState(.counting)
            invalidateReplies()
            settleBudgets()
            // Resets made after this load was asked for wait for the next one.
            if usage.table.built == usage.table.inForce { answerResetsLoaded(error: nil) }
            return
        }
        answerResetsLoaded(error: error)
        // The table is not what the change was made against (another tool touched it): read it, then load it whole.
        usage.table.inForce = nil
        setCounters(.init(known: false, lastFailed: usage.counters.lastFailed))
        usage.table.attempts += 1
        let n = usage.table.attempts
        setUsageState(.failed(error, attempts: n))
        usage.table.retry = retryLater("usage: loading the counting rules", attempt: n, of: UsageKeeper.maxAttempts, error: error,
                                 timer: .usageRulesRetry)
    }

    func retryUsageRules() {
        usage.table.retry = nil
        usage.table.key = nil
        settleUsage()
    }

    /// The kernel changed the usage table behind the daemon's back (or removed it): read what it still has, then
    /// load it whole.
    func usageTableChanged() {
        guard state.config.usage.count, usage.table.inForce != nil else { return }
        log(.notice, "usage: another process changed the counting table; reading it and loading it again")
        usage.table.inForce = nil
        setCounters(.init(known: false, lastFailed: usage.counters.lastFailed))
        settleUsage()
    }

    /// The tags and tagging of the policy and cgroups in force.
    func refreshTagging() {
        if let k = usage.tagged.taggingKey, k.generation == state.policyGeneration, k.cgroups == enforcement.cgroups,
           usage.tagged.tagging != nil { return }
        let t = prepared(\.tagging, for: TaggingInputs(apps: state.config.apps, cgroups: enforcement.cgroups, tags: appBooks.tags,
                                                          installed: state.config.installedDesktopApps)) {
            $0.tagging()
        }
        usage.tagged.tags = t.tags
        usage.tagged.owners = t.owners
        usage.tagged.unitOwners = t.unitOwners
        usage.tagged.tagging = t.tagging
        usage.tagged.taggingKey = (state.policyGeneration, enforcement.cgroups)
    }

    /// The budgets the kernel holds: apps with a budget whose connections are tagged, each with the epoch of its
    /// quota objects (the period and the app's last reset: either starts it again).
    private func kernelBudgets() -> [UsageRules.Budget] {
        guard let tagging = usage.tagged.tagging else { return [] }
        return state.config.apps.compactMap { app in
            guard let limit = state.config.meteredBudget(for: app), tagging.taggedApps.contains(app.id),
                  let tag = usage.tagged.tags[app.id] else { return nil }
            // Resets counted too: two in one second are two epochs (the second's quota was not made again, and the
            // app stayed cut off after its answer).
            let epoch = (usage.book.period?.description ?? "-") + "/" + String(usage.book[app.id].resetAt ?? 0)
                + "/" + String(usage.resetRequests.resetCount[app.id] ?? 0)
            return UsageRules.Budget(tag: tag, limit: limit, epoch: epoch)
        }
    }

    // MARK: - USAGE and RESET-USAGE

    /// The apps a caller may see the usage of: any, when privileged; else the apps whose every counted byte is its
    /// uid's: `User=` that uid alone, and no system unit (whose sockets may be anyone's). Being taken for an app (a
    /// unit named like it, a copy of its executable) shows nothing of what others moved as it.
    func usageApps(for caller: Caller) -> [AppPolicy] {
        state.config.apps.filter { mayReadUsage(of: $0, caller) }
    }

    func mayReadUsage(of app: AppPolicy, _ caller: Caller) -> Bool {
        caller.privileged || (!app.uids.isEmpty && app.uids.allSatisfy { $0 == caller.identity.uid } && app.units.isEmpty)
    }

    /// A user's own app's usage is its uid's to see (and root's and the admin group's).
    func mayReadUsage(of user: UserApp, _ caller: Caller) -> Bool { caller.privileged || user.uid == caller.identity.uid }

    /// A verdict as `caller` may read it: a budget's bytes only where its usage is the caller's to see.
    func forCaller(_ v: Verdict, _ caller: Caller) -> Verdict {
        var v = v
        fitForCaller(&v, caller)
        return v
    }

    /// `forCaller` in place, for a verdict made for one reply (no copy of it).
    func fitForCaller(_ v: inout Verdict, _ caller: Caller) {
        guard v.budget != nil, let app = policyApp(named: v.app), !mayReadUsage(of: app, caller) else { return }
        v.budget?.usedShown = false
    }

    func usageRequest(_ named: String?, session: Session) {
        let caller = session.caller
        if let name = named {
            // One answer whether the app exists or is another's: QUERY tells no more. A user's own app (of their
            // units) is theirs to see, whoever else it is.
            let own = usage.book.userApps.keys.contains { $0.app == name && mayReadUsage(of: $0, caller) }
            guard own || state.config.app(named: name).map({ mayReadUsage(of: $0, caller) }) == true else {
                replyError(session.id, ProtocolError(.notFound, "no [App \(name)] whose usage you may see (root or members "
                    + "of group \(ConfigError.quote(state.config.adminGroup)) see every app's; leave APP out for your own)"))
                return
            }
        }
        // Counting turned off by a reload: its last reading is taken before the table goes, and a USAGE waits for a
        // reading as while counting (it showed 0 B 6 ms after such a reload, the right total 50 ms later).
        guard state.ready, state.config.usage.count || (usage.table.inForce != nil && usage.table.tableMayExist) else {
            replyUsage(session.id, named)
            return
        }
        // Answered from a reading made after the request: what the caller just sent is counted.
        out.append(.hold(session.id))
        // A user forces at most one reading every `usageReadSpacingSec`: 8 users asking in a loop held a good client's
        // QUERY at 393 ms (median) with 10,001 apps. Within it, the request waits for the next one (after it, still).
        if !caller.privileged {
            let uid = caller.identity.uid
            if usage.coolDown.cooling[uid] != nil {
                usage.coolDown.cooled[uid, default: []].append((session.id, named))
                return
            }
            usage.coolDown.cooling[uid] = armTimer(.usageCooldown(uid: uid), microseconds: Self.usageReadSpacingSec * 1_000_000)
        }
        askUsage(session.id, named)
    }

    /// A user's forced readings are this far apart at least.
    static let usageReadSpacingSec: UInt64 = 1

    private func askUsage(_ id: ConnectionID, _ app: String?) {
        if usage.reads.logged("usage readings", log: debugLog, { $0.request((id, app)) }) { out.append(.readUsage) }
    }

    /// A uid's spacing ran out: what it asked meanwhile is answered from a reading made now.
    func usageCooledDown(_ uid: UInt32) {
        usage.coolDown.cooling[uid] = nil
        let waiting = (usage.coolDown.cooled.removeValue(forKey: uid) ?? []).filter { clients.sessions[$0.0] != nil }
        guard !waiting.isEmpty else { return }
        usage.coolDown.cooling[uid] = armTimer(.usageCooldown(uid: uid), microseconds: Self.usageReadSpacingSec * 1_000_000)
        for (id, app) in waiting { askUsage(id, app) }
    }

    func resetUsageRequest(_ named: String?, session: Session) {
        if let name = named, state.config.app(named: name) == nil {
            replyError(session.id, ProtocolError(.notFound, "no [App \(name)] in the policy"))
            return
        }
        out.append(.hold(session.id))
        usage.resetRequests.resets.append((session.id, named))
        if state.config.usage.count, state.ready {
            requestUsageRead()
        } else {
            // Nothing counts: the stored totals are reset and saved at once.
            usageRead(nil, error: nil)
        }
    }

    func replyUsage(_ id: ConnectionID, _ app: String?) {
        let caller = clients.sessions[id]?.caller
        var apps = app.map { state.config.app(named: $0).map { [$0] } ?? [] } ?? caller.map(usageApps) ?? []
        if let caller { apps = apps.filter { mayReadUsage(of: $0, caller) } }
        // Users' own apps: the caller's own uid's (root and the admin group: everyone's), or APP's.
        let users = usage.book.userApps.keys.filter { u in
            (app == nil || u.app == app) && caller.map { mayReadUsage(of: u, $0) } == true
        }.sorted()
        // Desktop apps that counted this period are listed whether or not they run now (counts are the app's,
        // every user's together: only for those who see every app's).
        if app == nil, caller?.privileged == true, state.config.desktopApps {
            apps += usage.book.apps.keys.filter { state.config.app(named: $0) == nil && state.config.isDesktopID($0, uid: nil) }.sorted()
                .map { AppPolicy(discovered: $0) }
        }
        let period = usage.book.period ?? UsagePeriod.start(containing: wallTime.date, startDay: state.config.usage.periodStart)
        let startDay = state.config.usage.periodStart
        reply(id) { w in
            w.field("ok", true)
            w.field("counting", state.config.usage.count)
            w.field("state", usage.state.name)
            w.object("period") {
                $0.field("start", period.description)
                $0.field("end", UsagePeriod.next(after: period, startDay: startDay).description)
                $0.field("previous_start", period.months(-1, day: startDay).description)
                $0.field("provisional", usage.book.provisional)
            }
            w.objects("apps", apps) { w, a in writeUsage(of: a.id, for: caller, to: &w) }
            w.objects("user_apps", users) { w, u in writeUsage(of: u, to: &w) }
            // Other processes' counts are no one app's: shown with every app's, to those who may see them all.
            if app == nil, caller?.privileged == true { w.object("other") { writeTotals(usage.book.other, to: &$0) } }
        }
    }

    /// An app's entry of USAGE's `apps` (and of a `counted` event's), as `caller` may read it.
    func writeUsage(of app: String, for caller: Caller?, to w: inout JSONWriter) {
        w.field("app", app)
        writeName(of: app, uid: caller?.privileged == false ? caller?.identity.uid : nil, to: &w)
        writeTotals(usage.book[app], to: &w)
        if let b = budgetFact(for: app) { w.object("budget") { b.write(to: &$0) } }
    }

    /// A user's own app's entry of USAGE's `user_apps` (and of a `counted` event's).
    func writeUsage(of u: UserApp, to w: inout JSONWriter) {
        w.field("uid", Int(u.uid))
        w.field("app", u.app)
        writeName(of: u.app, uid: u.uid, to: &w)
        writeTotals(usage.book[u], to: &w)
    }

    private func writeTotals(_ u: AppUsage, to w: inout JSONWriter) {
        w.object("current") { u.current.write(to: &$0) }
        w.object("previous") { u.previous.write(to: &$0) }
        w.object("since_reset") { u.sinceReset.write(to: &$0) }
        w.field("reset_at", u.resetAt)
    }

    /// STATUS's `usage` member.
    func writeUsageStatus(to w: inout JSONWriter, privileged: Bool) {
        w.field("counting", state.config.usage.count)
        w.field("state", usage.state.name)
        if case let .failed(error, attempts) = usage.state {
            w.field("error", error.description)
            w.field("attempts", attempts)
        }
        w.field("period_start", usage.book.period?.description)
        let budgets = state.config.apps.reduce(0) { $0 + (state.config.meteredBudget(for: $1) != nil ? 1 : 0) }
        w.field("budgets", budgets)
        // Whose budgets ran out is the usage of apps a user may not see.
        if privileged { w.field("exhausted", state.exhausted.count) }
    }

    /// The wall clock, as seconds and as the local day.
    var wallTime: WallTime {
        let epoch = Int(settings.wallClock())
        return WallTime(epoch: epoch, date: settings.localDate(epoch))
    }

    /// How long a clock no time service synchronizes must advance steadily before a period starts by it.
    static let steadyClockSeconds: Double = 900

    /// The period at a reading (PeriodMove): a new one rolls the totals, a clock behind or not to be believed
    /// leaves them where they are (said once), a relabel keeps them current.
    private func followPeriod(_ wall: WallTime) {
        // What the machine says of the clock, and the boot clock: asked here alone (a stat and an adjtimex), once a
        // reading.
        var now = wall
        now.trust = settings.clockTrust()
        now.boot = settings.bootClock()
        let startDay = state.config.usage.periodStart
        // Steady: the wall clock has moved as the boot clock did (NTP slews by at most 0.05%; a step is a jump) for
        // the last quarter of an hour this process looked, time enough for a time service to set a clock that booted
        // wrong.
        if let seen = usage.clock.clockSeen, abs(Double(now.epoch - seen.epoch) - (now.boot - seen.boot)) <= 60 {
            usage.clock.clockSeen = (now.epoch, now.boot, seen.steadySince)
        } else {
            usage.clock.clockSeen = (now.epoch, now.boot, now.boot)
        }
        let steady = now.boot - usage.clock.clockSeen!.steadySince >= Engine.steadyClockSeconds
        let move = PeriodMove.decide(period: usage.book.period, provisional: usage.book.provisional, now: now,
                                     startDay: startDay, steady: steady)
        func note(_ text: String) {
            guard usage.clock.periodNote != text else { return }
            usage.clock.periodNote = text
            log(.notice, "usage: " + text)
        }
        switch move {
        case .stay:
            usage.clock.periodNote = nil
        case let .first(start, provisional):
            usage.book.period = start
            usage.book.provisional = provisional
            if provisional { note("the clock is not synchronized (\(now.trust.rawValue)): counting into the period of \(start) until it is") }
        case let .roll(start):
            let was = usage.book.period!
            usage.book.roll(to: start, startDay: startDay)
            usage.clock.periodNote = nil
            log(.notice, "usage: a new period starts on \(start) (the last one started on \(was))")
            usage.book.drop(except: Set(state.config.apps.map(\.id)))
            usage.quotas.depleted = []
            usage.quotas.warned = []
            usage.quotas.quotaUsed = [:]
            usage.saving.dirty = true
            invalidateReplies()
        case let .relabel(start, why):
            let was = usage.book.period!
            usage.book.period = start
            if why == .synchronized { usage.book.provisional = false }
            usage.clock.periodNote = nil
            log(.notice, "usage: \(why.rawValue): this period's totals are the period of \(start)'s (it was \(was)'s)")
            usage.saving.dirty = true
            invalidateReplies()
        case let .behind(start):
            note("the clock (\(now.date)) is before this period's start (\(usage.book.period!)): counting into it, never "
                 + "into the period of \(start)")
        case let .untrusted(start):
            note("the clock says the period of \(start) began, but it is "
                 + (now.trust == .waiting ? "not synchronized yet" : "not steady (it jumped)") + ": not moving to it yet")
        }
    }
}

extension UsageRules.Budget {
    static func warningLimit(_ limit: UInt64) -> UInt64 { UsageRules.Budget(tag: 0, limit: limit, epoch: "").warningLimit }
}
