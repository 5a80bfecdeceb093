// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// What happens to the engine: everything the daemon learns from the kernel, the files, its clients and its timers.
public enum Input: Sendable {
    /// A new picture of the kernel's links, addresses and default routes (with sysfs facts).
    case kernel(KernelSnapshot)
    /// The policy files were read and parsed (at start-up, and after `Effect.loadPolicy`), and what its basis made of
    /// them away from the loop (ReloadPreparation.swift; nil: none).
    case policy(ConfigParseResult, prepared: PreparedReload? = nil)
    /// SIGHUP, or the policy files changed on disk: reload them.
    case reload
    /// The first picture and the policy are in: answer for real from now on.
    case started
    /// A connection's first request is coming, from this process.
    case opened(ConnectionID, PeerIdentity)
    /// The connection's next request comes from another process than the last one (a child that inherited the
    /// socket, a process it was passed to): what follows is answered for this one.
    case identityChanged(ConnectionID, PeerIdentity)
    case closed(ConnectionID)
    /// One request line (newline excluded).
    case line(ConnectionID, [UInt8])
    /// A request line longer than `Request.maxLine`, discarded by the transport.
    case lineTooLong(ConnectionID)
    case timer(TimerID)
    /// The outcome of the last `Effect.persist`: nil, or what went wrong.
    case stored(error: EdgeError?)
    /// SIGTERM: tell the subscribers.
    case stopping
    /// A subscriber that fell behind has read its queue empty; `dropped` events were not sent to it.
    case caughtUp(ConnectionID, dropped: Int)
    /// The system units' cgroups that exist now (at start-up, and whenever one appears or goes).
    case cgroups(UnitCgroups)
    /// Units whose cgroups the edge saw made and named to the kernel with the `UnitNaming` of `generation`
    /// (Engine+FreshUnits.swift); nil `error`: the kernel took them.
    case unitsNamed([NamedUnit], generation: Int, error: EdgeError?)
    /// Units of `unitsMade` (by cgroup id) that a scan begun after them did not find: gone.
    case unitsGone([UInt64])
    /// The outcome of an `Effect.loadUnitElements` (its `ids`): nil, or the kernel's error.
    case unitElementsLoaded(ids: [UInt64], error: EdgeError?)
    /// The desktop files read (at start-up, and whenever one changes): desktop apps' names and icons.
    case desktopCatalog(DesktopCatalog)
    /// A process of a person's session with no app unit of its own runs an installed app's program (ExecWatcher).
    case execFound(ExecFound)
    /// What the exec watcher counted so far (at most twice a second, while execs come).
    case execsCounted(ExecCounts)
    /// The scope asked for by `Effect.makeScope` was made, or why not.
    case scopeMade(ScopeRequest, error: EdgeError?)
    /// What the kernel said of the tables `Effect.lookUpTables` asked about.
    case tablesLookedUp(TableUpkeep.TableLookup)
    /// The load of the last `Effect.runLoad` ended: nil or the kernel's or nft's error, and whether another process
    /// committed to nftables meanwhile.
    case loadRan(failure: EdgeError?, othersCommitted: Bool)
    /// Another process changed or removed one of the daemon's tables.
    case tablesChanged(TablesChange)
    /// The kernel rejected (and logged) a packet of an app whose kind is pending (`ask`, undecided): the owner of
    /// its socket and the link it was to leave by, when the log said.
    /// `incoming`: the packet answered a connection from elsewhere (a server's SYN-ACK), which asks nobody.
    case blocked(app: String, kind: PolicyDimension, uid: UInt32?, ifindex: Int32?, destination: String? = nil,
                 incoming: Bool = false)
    /// A process that `Effect.watchExit` named has exited (or was gone already).
    case exited(pid: Int32)
    /// How far the `Effect.steer` of step `id` went, and what stopped it.
    case steered(id: UInt64, SteeringOutcome)
    /// The usage table's counters (nil: there is no usage table), or why they could not be read (`Effect.readUsage`).
    case usageRead(UsageReading?, error: EdgeError?)
    /// The outcome of the last `Effect.saveUsage`.
    case usageSaved(error: EdgeError?)
    /// The kernel said a quota object of the usage table ran out (a budget, or its 80%).
    case budgetReached(quota: QuotaName)
    /// Where the kernel sends a REACH's destination (`Effect.lookUpRoute`): a link, a blocking route, or nil for no
    /// route; `error`: the kernel could not be asked.
    case routed(ConnectionID, Egress?, error: EdgeError?)
    /// What the report's readers heard in one pass (tagged connections, their ends, DNS answers), and how many
    /// events the kernel dropped since the last.
    case reportSighted([ReportSighting], lost: Int)
    /// The outcome of the last `Effect.saveReport` or `Effect.removeReport`.
    case reportSaved(error: EdgeError?)
}

extension Input {
    /// Which input it is, for a log line (never its contents).
    public var name: String {
        switch self {
        case .kernel: return "a kernel picture"
        case .policy: return "a policy read"
        case .reload: return "a reload"
        case .started: return "the start"
        case .opened: return "a connection's first request"
        case .identityChanged: return "a request of another process"
        case .closed: return "a connection closed"
        case .line: return "a request"
        case .lineTooLong: return "a request too long"
        case .timer: return "a timer"
        case .stored: return "the decisions stored"
        case .stopping: return "the stop"
        case .caughtUp: return "a subscriber caught up"
        case .cgroups: return "the unit cgroups"
        case .unitsNamed: return "units named"
        case .unitsGone: return "units gone"
        case .unitElementsLoaded: return "units named again"
        case .desktopCatalog: return "the desktop files"
        case .execFound: return "an app found by what it runs"
        case .execsCounted: return "the execs counted"
        case .scopeMade: return "an app's scope made"
        case .tablesLookedUp: return "the tables looked up"
        case .loadRan: return "a load ran"
        case .tablesChanged: return "the tables changed"
        case .blocked: return "a blocked packet"
        case .exited: return "an asker's exit"
        case .steered: return "steering applied"
        case .usageRead: return "the usage counters read"
        case .usageSaved: return "the usage totals saved"
        case .budgetReached: return "a quota used up"
        case .routed: return "a route lookup's answer"
        case .reportSighted: return "connections seen"
        case .reportSaved: return "the report saved"
        }
    }
}

/// The daemon's whole state machine: sessions, subscriptions, waiters, prompts, decisions, verdicts and the reply
/// cache. Pure and deterministic: `handle(input)` changes the state and returns the effects for the daemon to carry
/// out (reply, push an event, hold or close a connection, persist, arm a timer, notify, log). Every change of what
/// verdicts depend on goes through one setter, and every input ends in `settle()`, which turns the changes into
/// events, answers waiters and asks agents: no mutation can forget its events.
public final class Engine {
    public struct Settings: Sendable {
        /// Peers with this uid are privileged (the service's own ExecReload=, under DynamicUser=).
        public var daemonUID: UInt32
        /// Lines above this priority are not even formatted.
        public var logLevel: Priority
        /// Seconds since the epoch, read only for the timestamps METRICS reports (tests give a fixed one).
        public var wallClock: @Sendable () -> Double
        /// The local calendar day at a time (seconds since the epoch): usage periods start at local midnight.
        public var localDate: @Sendable (Int) -> CivilDate
        /// What the machine says of the wall clock, and the boot clock in seconds: whether a usage period may start
        /// by it (PeriodMove).
        public var clockTrust: @Sendable () -> ClockTrust
        public var bootClock: @Sendable () -> Double
        /// Permutes prompt ids (PromptIDs): the daemon draws it at random; `none`, the tests' default, leaves them 1, 2, ...
        public var promptIDKey: PromptIDKey
        /// The daemon's network namespace (the inode of /proc/self/ns/net), told to subscribers: a process in
        /// another (PrivateNetwork=yes, bwrap --unshare-net) knows the verdicts are not about its links.
        public var netns: UInt64?
        public init(daemonUID: UInt32 = 0, logLevel: Priority = .info, wallClock: @escaping @Sendable () -> Double = { 0 },
                    localDate: @escaping @Sendable (Int) -> CivilDate = Settings.utcDate,
                    clockTrust: @escaping @Sendable () -> ClockTrust = { .synchronized },
                    bootClock: @escaping @Sendable () -> Double = { 0 }, promptIDKey: PromptIDKey = .none, netns: UInt64? = nil) {
            self.daemonUID = daemonUID; self.logLevel = logLevel; self.wallClock = wallClock; self.localDate = localDate
            self.clockTrust = clockTrust; self.bootClock = bootClock; self.promptIDKey = promptIDKey; self.netns = netns
        }

        /// The day in UTC: what tests and a machine without a time zone use.
        public static let utcDate: @Sendable (Int) -> CivilDate = { epoch in
            // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
            let z = (epoch >= 0 ? epoch : epoch - 86399) / 86400 + 719_468
            let era = (z >= 0 ? z : z - 146_096) / 146_097
            let doe = z - era * 146_097
            let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
            let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
            let mp = (5 * doy + 2) / 153
            let d = doy - (153 * mp + 2) / 5 + 1
            let m = mp < 10 ? mp + 3 : mp - 9
            return CivilDate(year: yoe + era * 400 + (m <= 2 ? 1 : 0), month: m, day: d)
        }
    }

    let settings: Settings

    /// What verdicts depend on. Every change goes through a setter below, which marks what settle() must redo.
    public private(set) var state = DaemonState() { didSet { caches.invalidate() } }
    /// The links as the kernel, sysfs and the network sources have them, classified (LinkClassifier.swift).
    private var links = LinkClassifier()
    /// Every app someone may hear about, with its verdict.
    var tracker = VerdictTracker()
    /// The connections (EngineClients.swift).
    var clients = EngineClients()
    /// The input being handled: its effects, its events and what settle() must redo (InputWork.swift).
    var work = InputWork()
    /// The effects of the input being handled.
    var out: Effects { work.effects }

    enum TimerPurpose {
        case waitTimeout(ConnectionID), reachTimeout(ConnectionID), promptExpiry(promptID: Int), rulesRetry
        /// Usage: read the counters (and save the totals if they moved); load the counting rules again.
        case usageTick, usageRulesRetry
        /// A `mine` subscriber follows its apps' bytes: read the counters again.
        case usageFollow
        /// The report changed: write it.
        case reportSave
        /// A uid's USAGE forced a reading less than `usageReadSpacingSec` ago: its next ones wait for this.
        case usageCooldown(uid: UInt32)
        /// A prompt for this "app scope" expired: rejected packets raise it again only once this fires.
        case blockedQuiet(String)
        /// A scope asked of a user's `netpermctl scopes` (Engine+Exec.swift) was not answered in time.
        case scopeTimeout(Int)
    }
    /// The armed timers and what each is for (TimerBook.swift).
    private(set) var timers = TimerBook()
    /// Policy loads, and what the one being taken brought (PolicyReloading.swift).
    private(set) var reloading = PolicyReloading()
    /// What persons' answers go through: prompts and decisions being written (Answering.swift).
    var answering = Answering()
    /// The apps one user may decide for, for their own processes.
    static let maxOwnApps = 256
    static let blockedQuietSec: UInt64 = 60

    /// Enforcement in the kernel (Engine+Enforcement.swift). Replies say whether an app is enforced, so a change
    /// here is a new version, as one of `state` is: a cached reply must not keep saying `cgroup-pending`.
    var enforcement = EnforcementBook() { didSet { caches.invalidate() } }
    /// The version replies are good for, the steered verdicts of one version (kept apart from `enforcement`, as
    /// filling them is no change) and what STATUS= last said (ReplyCaches.swift).
    var caches = ReplyCaches()
    /// Bumped by every change of `state` or `enforcement`: a cached reply is good while it has not moved.
    var version: Int { caches.version }

    /// What METRICS counts as it happens (Engine+Metrics.swift).
    var counters = MetricCounters()
    /// Usage counting and budgets (Engine+Usage.swift). Its totals change without a new version: USAGE is never
    /// answered from the cache, and a budget's bytes in a verdict move the version when they do.
    var usage = UsageKeeper()
    /// The privacy report (Engine+Report.swift).
    var report = ReportKeeper()

    /// How many parts of the policy loads taken were prepared away from the loop, and how many not (what they read
    /// had changed): METRICS' `netpermd_policy_reload_work_total`.
    var preparations: (taken: Int, missed: Int) { (counters.reloadWorkPrepared, counters.reloadWorkRedone) }

    /// Names of users and groups are resolved when the policy is read (`Config.parse`), never here.
    public init(settings: Settings = Settings(), decisions: Decisions = Decisions(), usage book: UsageBook = UsageBook(),
                tags: TagTable = TagTable(), report kept: ReportBook = ReportBook(), reportFileExists: Bool = false) {
        self.settings = settings
        state.prompts = PromptBook(idKey: settings.promptIDKey)
        state.decisions = decisions
        usage = UsageKeeper(book: book)
        appBooks.tags = tags
        report = ReportKeeper(book: kept, fileExists: reportFileExists)
    }

    /// What the engine knows of apps beside the policy: tags, desktop apps, apps by what they run (AppBooks.swift).
    var appBooks = AppBooks()

    /// Handles one input; its effects are appended to `effects` (which the caller resets between inputs).
    public func handle(_ input: Input, into effects: Effects) {
        work.effects = effects
        // Inputs that change nothing derived: no settling after them.
        if case .started = input, state.ready { return }
        if case let .blocked(app, kind, _, _, _, true) = input { return refusedIncoming(app: app, kind: kind) }
        dispatch(input)
        if input.mayChangeListing { work.listingStale = true }
        settle()
        // After the plan the new picture gives, if any: the edge's steps run in this order.
        if case .kernel = input { followSteering() }
        reloading.prepared = nil
        if case .started = input {
            // Once the first rules are in force (or their load failed): units ordered after the daemon start
            // under its rules, as they did while loads ran on the loop.
            onceInForce(nil) { [unowned self] in
                out.append(.notify(.ready(status: statusText)))
                log(.notice, "ready: \(statusText)")
            }
        }
    }

    /// The input to the machine it is for.
    private func dispatch(_ input: Input) {
        switch input {
        case let .kernel(snapshot):
            if snapshot.resyncs != links.kernel.resyncs { work.resyncAll = true }
            setNetwork(classify(snapshot))
        case let .policy(result, prepared):
            let (requesters, again) = reloading.loads.logged("policy loads", log: debugLog) { $0.finish() }
            reloading.prepared = prepared
            applyPolicy(result, requesters: requesters)
            if again, reloading.loads.logged("policy loads", log: debugLog, { $0.start() }) { startLoad() }
        case .reload: requestReload(by: nil)
        case .started:
            state.ready = true
            counters.startedAt = settings.wallClock()
            work.network = true
            // READY=1 carries the first STATUS=, below.
            caches.status = (statusSummary, version)
        case let .opened(id, identity): opened(id, identity)
        case let .identityChanged(id, identity):
            guard let session = clients.sessions[id] else { break }
            if let p = identity.problem { log(.debug, "peer pid \(identity.pid): \(p)") }
            log(.debug, "connection \(id): requests now come from pid \(identity.pid), not \(session.identity.pid)")
            changeIdentity(session, to: identity)
        case let .closed(id): closed(id)
        case let .line(id, bytes):
            guard let session = clients.sessions[id] else { break }
            request(bytes, from: session)
        case let .lineTooLong(id): if clients.sessions[id] != nil { replyError(id, RequestParser.tooLong) }
        case let .timer(id): fired(id)
        case let .stored(error): stored(error: error)
        case .stopping: beginStopping()
        case let .caughtUp(id, dropped):
            guard let session = clients.sessions[id], session.subscription != nil else { break }
            log(.info, "subscriber \(id) caught up after \(dropped) events were dropped: resync")
            resync(session, .fellBehind, dropped: dropped)
        case let .cgroups(c): if setUnitCgroups(c) { desktopUnitsChanged(c) }
        case let .unitsNamed(units, generation, error): unitsNamed(units, generation: generation, error: error)
        case let .unitsGone(ids): unitsGone(ids)
        case let .unitElementsLoaded(ids, error): unitElementsLoaded(ids, error: error)
        case let .desktopCatalog(c): desktopCatalogRead(c)
        case let .execFound(found): execFound(found)
        case let .execsCounted(counts): appBooks.execs.counted = counts
        case let .scopeMade(request, error): scopeMade(request, error: error)
        case let .tablesLookedUp(answer): tablesLookedUp(answer)
        case let .loadRan(failure, others): loadRan(failure: failure, othersCommitted: others)
        case let .tablesChanged(change): tablesChanged(change)
        case let .blocked(app, kind, uid, ifindex, destination, incoming):
            // An incoming one never comes here (handle).
            assert(!incoming)
            reportRefused(app: app, uid: uid, ifindex: ifindex, destination: destination)
            blocked(app: app, kind: kind, uid: uid, ifindex: ifindex, destination: destination)
        case let .exited(pid): askerExited(pid)
        case let .steered(id, outcome): steered(id, outcome)
        case let .usageRead(reading, error): usageRead(reading, error: error)
        case let .usageSaved(error): usageSaved(error: error)
        case let .budgetReached(quota): budgetReached(quota)
        case let .routed(id, route, error): routed(id, route, error: error)
        case let .reportSighted(sightings, lost): reportSighted(sightings, lost: lost)
        case let .reportSaved(error): reportSaved(error: error)
    }
    }

    private func opened(_ id: ConnectionID, _ identity: PeerIdentity) {
        if let p = identity.problem { log(.debug, "peer pid \(identity.pid): \(p)") }
        counters.connections += 1
        clients.sessions[id] = Session(id: id, identity: identity, caller: makeCaller(identity))
    }

    private func beginStopping() {
        work.events.append(.stopping)
        out.append(.notify(.stopping))
        stopEnforcing()
        stopUsage()
        stopReport()
    }

    // MARK: - Derived state, in one place

    /// Turns what changed into events, answers waiters, asks agents, and keeps STATUS= current.
    func settle() {
        settleEnforcementOnce(permissionsChanged: work.permissions.any, networkChanged: work.network)
        settleUsage()
        settleReport()
        let appEvents = work.events.count
        if case let .apps(moved) = work.permissions, !work.network {
            // Decisions alone: only their apps' verdicts move (10,001 apps' verdicts made again took a DECIDE
            // a fifth of its time on the loop).
            work.events += tracker.update(moved, state: state)
        } else if work.permissions.any {
            let extras = extraMatches()
            var reset = prepared(\.tracker, for: TrackerInputs(state: state, extras: extras, tracker: tracker.changes)) { _ in
                var t = tracker
                let events = t.reset(state: state, extra: extras)
                return TrackerReset(tracker: t, events: events)
            }
            tracker = reset.tracker
            // Moved rather than copied: 10,001 events, each holding a verdict's dozen references.
            var events = reset.events
            reset.events = []
            events.insert(contentsOf: work.events, at: 0)
            work.events = events
        } else if work.network {
            work.events += tracker.refresh(state: state)
        }
        let changed = work.permissions.any || work.network
        if changed || enforcement.steering.moved { work.events += steeredVerdictEvents() }
        // One change's app events in the order of their apps' names, not of the tracker's dictionaries (a reload's
        // prepared ones come sorted: not moved again).
        if !Event.sorted(work.events[appEvents...]) { work.events[appEvents...].sort(by: Event.byApp) }
        work.permissions = .none
        work.network = false
        if changed || !work.events.isEmpty {
            answerWaiters()
            answerReachers()
        }
        while !work.events.isEmpty {
            // What the rules make of each verdict is told to those who hear the events (subscribers, and the waiters
            // for their own app who ask below): with none, the events are only counted. One pass over the sessions.
            var told = false, asking = false
            for s in clients.sessions.values {
                if s.waiting?.own == true { (told, asking) = (true, true); break }
                if s.subscription != nil { told = true }
            }
            let events = !told ? work.events : work.events.map { e -> Event in
                if case let .app(v) = e { return .app(withEnforcement(v, .name)) }
                return e
            }
            work.events = []
            counters.count(events)
            push(events)
            tellOwnAppMoved()
            // An app waiting for itself keeps asking: a verdict that now needs a decision raises prompts, with the
            // identity of the process that has waited longest (the earliest connection waiting for its own app).
            guard asking else { continue }
            for case let .app(v) in events where v.wantsAsking {
                for s in orderedSessions(where: { $0.waiting?.own == true && $0.waiting?.match.id == v.app && $0.waiting?.uid == v.uid }) {
                    raisePrompts(v, identity: s.identity)
                }
            }
        }
        if work.listingStale {
            work.listingStale = false
            relist()
        }
        if work.resyncAll {
            work.resyncAll = false
            for s in orderedSessions(where: { $0.subscription != nil }) { resync(s, .netlinkOverrun, dropped: nil) }
        }
        if state.ready, caches.status?.version != version {
            let summary = statusSummary
            if summary != caches.status?.summary { out.append(.notify(.status(statusText))) }
            caches.status = (summary, version)
        }
    }

    /// Apps outside the policy, and apps as one uid has them, that someone listens to or waits for, in the order
    /// the connections came.
    func extraMatches() -> [(AppMatch, UInt32?)] {
        orderedSessions { _ in true }.flatMap { s -> [(AppMatch, UInt32?)] in
            var m: [(AppMatch, UInt32?)] = []
            func add(_ match: AppMatch, _ uid: UInt32?) {
                m.append((match, nil))
                if let uid { m.append((match, uid)) }
            }
            if s.subscription != nil { add(s.caller.match, s.caller.ownUID) }
            if let w = s.waiting { add(w.match, w.uid) }
            if let sub = s.subscription, sub.topics.contains(.mine) { m += s.listedApps.map { (current($0), sub.listedUID) } }
            return m
        }
    }

    /// The verdict an app has now: the tracker's when it is tracked (every app someone may hear about),
    /// otherwise computed.
    /// `uid`: as that uid's processes have it (`Caller.ownUID`), nil for everyone's.
    func verdict(for match: AppMatch, uid: UInt32? = nil) -> Verdict {
        // One copy, changed in place: a Verdict holds a dozen references, each copy retains them all. The tracker's
        // dictionaries are read field by field here (a method called on the tracker ran on a copy of it), not through
        // a function returning the verdict (~470 instructions a QUERY less). A computed verdict has the match's id and
        // how it matched.
        var v: Verdict
        if let uid {
            v = tracker.own.verdicts[TrackedApp(match.id, uid: uid)] ?? state.verdict(for: match, uid: uid)
        } else {
            v = tracker.everyone.verdicts[match.id] ?? state.verdict(for: match, uid: nil)
        }
        v.app = match.id
        v.matchedBy = match.matchedBy
        v.enforcement = enforcementFact(for: AppMatch(id: v.app, matchedBy: match.matchedBy, app: nil))
        steer(&v)
        if match.matchedBy != .defaults { v.budget = budgetFact(for: v.app) }
        named(&v)
        return v
    }

    /// The policy's `[App]` of this id: `state.config.app(named:)` read field by field. That method, called on the
    /// Config this class holds, ran on a copy of the whole policy (~1,000 instructions of retains and releases, three
    /// times an uncached QUERY), inlined or not.
    func policyApp(named id: String) -> AppPolicy? {
        guard let i = state.config.appIndex[id] else { return nil }
        return state.config.apps[i]
    }

    // MARK: - The setters

    /// The one setter for the network picture; logs what changed, old -> new, and queues link events.
    private func setNetwork(_ new: NetworkState) {
        let old = state.network
        guard old != new else { return }
        if settings.logLevel >= .notice { logNetworkChange(from: old, to: new) }
        state.network = new
        work.events += Event.linkChanges(from: old, to: new)
        work.network = true
    }

    /// What settle() must redo after a change of what permissions depend on outside decisions and agents (a budget
    /// used up or opened again).
    func markPermissionsChanged() { work.permissions = .all }

    /// A reply's facts moved without a change of `state` (a budget's bytes, the usage table's state): cached replies
    /// are no good any more.
    func invalidateReplies() { caches.invalidate() }

    /// The one setter for the apps whose budget is used up.
    func setExhausted(_ new: Set<String>) {
        let old = state.exhausted
        guard new != old else { return }
        for app in new.subtracting(old).sorted() { log(.info, "usage: \(app): metered links denied, its budget is used up", app: app) }
        for app in old.subtracting(new).sorted() { log(.info, "usage: \(app): its budget opens metered links again", app: app) }
        state.exhausted = new
        markPermissionsChanged()
    }

    /// The policy in force, as its one setter (`setApps`, Engine+Desktop.swift: the policy's apps and the desktop's)
    /// makes it.
    func setConfig(_ config: Config) { state.config = config }

    /// The open prompts' one way in (Engine+Prompts.swift): changed on a copy, then put back, so that `change` may
    /// read `state` meanwhile.
    func changePrompts<T>(_ change: (inout PromptBook) -> T) -> T {
        var book = state.prompts
        defer { state.prompts = book }
        return change(&book)
    }

    /// The one setter for decisions.
    func setDecisions(_ d: Decisions) {
        guard d != state.decisions else { return }
        let moved = d.apps(differingFrom: state.decisions)
        state.decisions = d
        work.permissions.add(moved)
    }

    /// The one setter for the agents: privileged ones (for everyone) and users' own (for their uid). The first
    /// agent arriving or the last leaving changes every undecided `ask` (prompted, or denied for want of someone to
    /// ask), for everyone or for that uid.
    func setAgents(_ n: (agents: Int, users: [UInt32: Int])) {
        let old = (agents: state.agents, users: state.userAgents)
        guard n.agents != old.agents || n.users != old.users else { return }
        state.agents = n.agents
        state.userAgents = n.users
        if (old.agents == 0) != (n.agents == 0) {
            log(.info, n.agents > 0 ? "an agent listens for prompts: undecided 'ask' now prompts"
                                    : "no agent listens for prompts: undecided 'ask' is denied until one does")
        }
        for uid in Set(old.users.keys).symmetricDifference(n.users.keys).sorted() {
            log(.info, n.users[uid] != nil ? "an agent of uid \(uid) listens for its own prompts"
                                           : "no agent of uid \(uid) listens for its own prompts any more")
        }
        guard (old.agents == 0) != (n.agents == 0) || Set(old.users.keys) != Set(n.users.keys) else { return }
        if n.agents > 0 || n.users.count > old.users.count { answering.prompting.unaskedLogged = [] }
        work.permissions = .all
    }

    /// The agents the sessions are now: privileged ones, and users' own by uid.
    func countAgents() -> (agents: Int, users: [UInt32: Int]) {
        var n = (agents: 0, users: [UInt32: Int]())
        for s in clients.sessions.values where s.isAgent { Self.count(s.subscription!, into: &n, by: 1) }
        return n
    }

    /// Counts an agent's subscription in (`by` 1) or out (-1).
    static func count(_ sub: Subscription, into n: inout (agents: Int, users: [UInt32: Int]), by d: Int) {
        guard !sub.privileged, let uid = sub.ownUID else { n.agents += d; return }
        n.users[uid, default: 0] += d
        if n.users[uid] == 0 { n.users[uid] = nil }
    }

    /// The sessions `include` picks, oldest connection first: the one order the engine visits sessions in, so that
    /// its effects never come in a dictionary's order.
    func orderedSessions(where include: (Session) -> Bool) -> [Session] {
        clients.sessions.values.filter(include).sorted { $0.id < $1.id }
    }

    /// A new policy, or why the files could not be used; the last good policy stays in force then.
    /// `requesters`: the RELOADs this load answers.
    private func applyPolicy(_ result: ConfigParseResult, requesters: [ConnectionID]) {
        for p in result.problems {
            log(p.severity == .warning ? .warning : .err, p.description)
        }
        let unlisted = result.errorCount + result.warningCount - result.problems.count
        if unlisted > 0, let path = result.problems.last?.path { log(.warning, "\(path): \(unlisted) more problems not listed") }
        guard let parsed = result.config else {
            let message = result.failure ?? "invalid policy"
            if state.policyGeneration > 0 {
                log(.err, "policy reload failed, keeping generation \(state.policyGeneration): \(message)")
            }
            state.policyError = message
            work.events.append(.policy(generation: state.policyGeneration, apps: state.config.apps.count,
                                         error: message))
            finishReload(error: message, requesters: requesters)
            return
        }
        let changed = prepared(\.change, for: PolicyChange(policy: parsed, config: state.config)) { $0.changed }
        setApps(AppsInputs(policy: parsed, running: appBooks.desktop.running, installed: appBooks.desktop.installed, config: state.config,
                           tags: appBooks.tags))
        let config = state.config
        if config.adminGID == nil {
            log(.info, "group \(ConfigError.quote(config.adminGroup)) does not exist; only root may ask about other apps")
        }
        links.forgetClassifications()
        state.policyGeneration += 1
        state.policyError = nil
        state.policyWarnings = result.warnings
        state.policyWarningCount = result.warningCount
        // A --once decision holds until the policy changes: a reload of the same files (a SIGHUP, a touch, a package's
        // reload) changes nothing, and ended every once (issue 36, point 12).
        if changed {
            state.decisions.dropOnce()
            forgetLookups()
        }
        let warnings = result.warningCount == 0 ? "" : ", \(result.warningCount) warning\(result.warningCount == 1 ? "" : "s")"
        log(.info, "policy generation \(state.policyGeneration): \(config.apps.count) apps\(warnings)")
        for s in orderedSessions(where: { _ in true }) {
            let userAgent = s.isAgent && !s.caller.privileged
            let ownApp = s.subscription?.appID
            remakeCaller(s)
            if let sub = s.subscription, sub.appID != ownApp, sub.topics.contains(.own) { clients.ownAppMoved.append(s.id) }
            if userAgent && !s.isAgent && s.subscription?.topics.contains(.prompts) == true { unsubscribePrompts(s) }
            if let w = s.waiting, w.match.matchedBy == .name, config.app(named: w.match.id) == nil {
                // The app it waits for by name has left the policy: answered as a QUERY of it would be.
                finishWait(s, failed: ProtocolError(.notFound, "no [App \(w.match.id)] in the policy any more"))
            }
        }
        work.events.append(.policy(generation: state.policyGeneration, apps: config.apps.count, error: nil))
        // Privileges may have changed with the policy, and with them who counts as an agent.
        setAgents(countAgents())
        setNetwork(classify(links.kernel))
        work.permissions = .all
        // The rules follow the new policy before RELOAD is answered, as a DECIDE's reply follows its rules: the
        // enforcement table's and the usage table's (a budget's quota) alike.
        settleEnforcementEarly()
        settleUsage()
        finishReload(error: nil, requesters: requesters)
    }

    /// The network picture of `snapshot` under the policy's overrides.
    private func classify(_ snapshot: KernelSnapshot) -> NetworkState {
        links.picture(of: snapshot, interfaces: state.config.interfaces, networks: state.config.networks) { log(.notice, $0, interface: $1) }
    }

    private func closed(_ id: ConnectionID) {
        guard let session = clients.sessions.removeValue(forKey: id) else { return }
        if let t = session.waiting?.timer { cancelTimer(t) }
        if let t = session.reaching?.timer {
            cancelTimer(t)
            clients.reachesHeld -= 1
        }
        reloading.loads.removeWaiters { $0 == id }
        answering.commits.forget(id) { log(.debug, $0) }
        forgetHeldReplies(of: id)
        forgetUsageReplies(of: id)
        forgetScopesAsked(of: id)
        let listened = session.listened
        let wasAgent = session.isAgent
        changeSession(session) { session.subscription = nil; session.waiting = nil }
        untrackIfUnwanted(listened)
        if wasAgent { setAgents(countAgents()) }
    }

    /// The one setter of a session's role: runs `body`, which may change what it listens to, waits for or reaches,
    /// logs its role old -> new, and keeps `listeners` counted: with 10,000 subscribers, finding out whether anyone
    /// else still listens must not cost a pass over them all.
    func changeSession(_ session: Session, _ body: () -> Void) {
        let was = session.role
        clients.count(session.listened, by: -1)
        body()
        clients.count(session.listened, by: 1)
        if session.role != was { log(.debug, "connection \(session.id): \(was.name) -> \(session.role.name)") }
    }

    /// Tracks an app someone listens to or waits for: everyone's verdict, and `uid`'s own.
    func trackOwn(_ match: AppMatch, uid: UInt32?) {
        tracker.track(match, state: state)
        if let uid { tracker.track(match, uid: uid, state: state) }
    }

    /// An app outside the policy, or as one uid has it, is tracked only while someone listens to it or waits for it.
    func untrackIfUnwanted(_ apps: [TrackedApp]) {
        for key in apps where clients.listeners[key] == nil { tracker.untrack(key.id, uid: key.uid, state: state) }
    }

    // MARK: - Callers

    func makeCaller(_ identity: PeerIdentity) -> Caller {
        Caller(identity: identity, config: state.config, daemonUID: settings.daemonUID, adminGID: { [gid = state.config.adminGID] in gid })
    }

    /// The session's app and privilege from its identity under the policy in force; what it listens to and
    /// waits for follows (its own app, and whether it may hear about others and answer prompts).
    /// A user's agent whose uid may no longer answer (`UserDecisions=no`): told so, in an event of its own, and its
    /// prompts topic is taken off, rather than left subscribed and useless.
    private func unsubscribePrompts(_ s: Session) {
        changeSession(s) { _ = s.subscription!.topics.remove(.prompts) }
        let range = out.write { b in
            s.subscription!.writeHead(.unsubscribed, into: b)
            var w = JSONWriter(continuing: b)
            w.field("topics", strings: [Topic.prompts.rawValue])
            w.field("error", ErrorCode.permissionDenied.rawValue)
            w.field("message", "users no longer answer for their own apps ([Defaults] UserDecisions=no): only root or "
                + "members of group \(ConfigError.quote(state.config.adminGroup)) answer prompts")
            w.close()
            b.append(0x0A)
        }
        out.append(.event(s.id, head: range, tail: range.upperBound..<range.upperBound))
    }

    private func remakeCaller(_ s: Session) {
        changeSession(s) {
            s.caller = makeCaller(s.identity)
            s.subscription?.privileged = s.caller.privileged
            s.subscription?.appID = s.caller.match.id
            s.subscription?.ownUID = s.caller.ownUID
            guard let w = s.waiting else { return }
            if w.own { s.waiting?.uid = s.caller.ownUID }
            if w.match.matchedBy != .name {
                s.waiting?.match = s.caller.match
            } else if let app = state.config.app(named: w.match.id) {
                s.waiting?.match = AppMatch(id: app.id, matchedBy: .name, app: app)
            }
        }
    }

    /// What is installed changed (desktop files read): a process in a unit named for an ID that is not reverse-DNS
    /// may be that app now, or no more. Its connection's app follows, as after a reload.
    func rematchCallers() {
        for s in orderedSessions(where: { $0.identity.userUnit }) {
            let old = s.caller.match
            guard state.config.match(s.identity) != old else { continue }
            let listened = s.listened
            remakeCaller(s)
            if let sub = s.subscription {
                trackOwn(s.caller.match, uid: s.caller.ownUID)
                if sub.topics.contains(.own) { clients.ownAppMoved.append(s.id) }
            }
            untrackIfUnwanted(listened)
        }
    }

    /// Another process speaks on the connection. Its requests are answered for it, and its own app and privilege
    /// become the connection's: a subscriber hears about the new app from its next event (SUBSCRIBE again for a
    /// snapshot), and stops or starts being an agent with its privilege. A held WAIT cannot be affected: no
    /// request is taken from a held connection, so no other process can be seen on it until the WAIT is answered.
    private func changeIdentity(_ s: Session, to identity: PeerIdentity) {
        let listened = s.listened
        s.identity = identity
        // The cached reply was the other process's.
        s.cache.drop()
        remakeCaller(s)
        if s.subscription != nil { trackOwn(s.caller.match, uid: s.caller.ownUID) }
        untrackIfUnwanted(listened)
        setAgents(countAgents())
    }

    // MARK: - Timers and the service manager

    func armTimer(_ purpose: TimerPurpose, microseconds: UInt64) -> TimerID {
        let id = timers.add(purpose)
        out.append(.armTimer(id, microseconds: microseconds))
        return id
    }

    func cancelTimer(_ id: TimerID) {
        guard timers.remove(id) != nil else { return }
        out.append(.cancelTimer(id))
    }

    private func fired(_ id: TimerID) {
        guard let purpose = timers.remove(id) else { return }
        switch purpose {
        case let .waitTimeout(conn):
            guard let session = clients.sessions[conn], let w = session.waiting else { return }
            finishWait(session, timedOut: verdict(for: w.match, uid: w.uid))
        case let .reachTimeout(conn):
            guard let session = clients.sessions[conn], session.reaching?.timer != nil else { return }
            session.reaching?.timer = nil
            clients.reachesHeld -= 1
            finishReach(session)
        case let .promptExpiry(promptID):
            promptExpired(promptID)
        case let .blockedQuiet(key):
            answering.prompting.quietBlocked.remove(key)
        case .rulesRetry:
            retryRules()
        case .usageTick:
            usageTicked()
        case .usageRulesRetry:
            retryUsageRules()
        case .usageFollow:
            usageFollowFired()
        case .reportSave:
            reportSaveFired()
        case let .usageCooldown(uid):
            usageCooledDown(uid)
        case let .scopeTimeout(id):
            scopeAnswered(id, error: EdgeError(.makeScope, "the user's netpermctl scopes did not answer within "
                                                   + "\(Self.scopeAnswerSec) s"))
        }
    }

    /// A reload asked for by a connection's RELOAD (answered once the policy is read) or by a signal or a change
    /// on disk (nil). Starts a load, or queues one after the load in flight.
    func requestReload(by requester: ConnectionID?) {
        if reloading.loads.logged("policy loads", log: debugLog, { $0.request(requester) }) { startLoad() }
    }

    /// RELOADING=1, then read the files; the answer comes back as `Input.policy`.
    private func startLoad() {
        out.append(.notify(.reloading))
        out.append(.loadPolicy)
    }

    /// What a policy load's thread prepares the reload from (ReloadPreparation.swift): taken by the edge as it
    /// starts the load, once the input that asked for it has settled.
    public func reloadBasis() -> ReloadBasis {
        ReloadBasis(state: state, running: appBooks.desktop.running, installed: appBooks.desktop.installed, tags: appBooks.tags, tracker: tracker, extras: extraMatches(),
                    cgroups: enforcement.cgroups, lookedUp: enforcement.lookedUp, handedOver: enforcement.handedOver)
    }

    /// `make(inputs)`, or what a reload's preparation made of equal inputs (ReloadPreparation.swift).
    /// A part is taken once: the engine then holds the only reference to it.
    func prepared<I, O>(_ part: ReferenceWritableKeyPath<PreparedReload, Prepared<I, O>?>, for inputs: I,
                        _ make: (I) -> O) -> O {
        if let p = reloading.prepared?[keyPath: part] {
            reloading.prepared?[keyPath: part] = nil
            if let o = p.output(for: inputs) {
                counters.reloadWorkPrepared += 1
                return o
            }
            counters.reloadWorkRedone += 1
            let name = "\(part)".split(separator: ".").last ?? ""
            log(.debug, "reload: the prepared \(name) made again on the loop: what it was made from changed meanwhile")
        }
        return make(inputs)
    }

    private func finishReload(error: String?, requesters: [ConnectionID]) {
        // The start-up load is not a reload: READY=1 comes with `started`.
        // A reload is done (`systemctl reload` returns) once its rules are in force.
        if state.ready { onceRulesInForce(nil) { [unowned self] in out.append(.notify(.ready(status: statusText))) } }
        caches.status = (statusSummary, version)
        for id in requesters {
            if let error {
                replyError(id, ProtocolError(.policyInvalid, error))
                out.append(.resume(id))
            } else {
                // What it says is written when it goes: the policy as it is then. (The connection is held since its
                // RELOAD came.)
                onceRulesInForce(id) { [unowned self] in
                    reply(id) { w in
                        w.field("ok", true)
                        w.field("generation", state.policyGeneration)
                        w.field("apps", state.config.apps.count)
                        writeWarnings(to: &w)
                    }
                    out.append(.resume(id))
                }
            }
        }
    }

    // MARK: - Logging

    /// Link and app names, paths and policy errors are other people's text: escaped, each line stays one line and
    /// writes nothing to a terminal that shows the log.
    /// `app`, `interface`, `uid`: what the line is about, as journal fields.
    func log(_ priority: Priority, _ message: @autoclosure () -> String, app: String? = nil, interface: String? = nil,
             uid: UInt32? = nil) {
        guard priority <= settings.logLevel else { return }
        out.append(.log(priority, SafeText.escape(message()), LogFields(app: app, interface: interface, uid: uid)))
    }

    /// A debug line, for the machines' setters (`log: debugLog`).
    func debugLog(_ line: String) { log(.debug, line) }

    private func logNetworkChange(from old: NetworkState, to new: NetworkState) {
        var oldByIndex: [Int32: Link] = [:]
        for l in old.links { oldByIndex[l.index] = l }
        for l in new.links {
            guard let o = oldByIndex.removeValue(forKey: l.index) else {
                log(.info, "\(l.name): appeared, kind \(l.kind.rawValue) (\(l.classifiedBy))\(l.usable ? ", usable" : "")", interface: l.name)
                continue
            }
            if o.usable != l.usable {
                log(.info, "\(l.name): usable \(o.usable) -> \(l.usable) (admin \(l.status.adminUp ? "up" : "down"), "
                    + "carrier \(l.status.carrier ? "on" : "off"), default route \(l.metric != nil ? "yes" : "no"))", interface: l.name)
            } else if o.kind != l.kind || o.over != l.over || (o.metered != l.metered && o.wifi.ssid == l.wifi.ssid) {
                log(.info, "\(l.name): kind \(o.kind.rawValue) -> \(l.kind.rawValue) (\(l.classifiedBy))"
                    + (o.over != l.over ? ", over \(o.over ?? "-") -> \(l.over ?? "-")" : "")
                    + (o.kind == l.kind && o.metered != l.metered ? ", metered \(o.metered) -> \(l.metered)" : ""), interface: l.name)
            } else if o.wifi.ssid != l.wifi.ssid || o.wifi.bssid != l.wifi.bssid {
                func network(_ x: Link) -> String {
                    x.ssidText.map { "'\($0)'" + (x.wifi.bssid.map { " (\($0))" } ?? "") } ?? "none"
                }
                log(.info, "\(l.name): Wi-Fi network \(network(o)) -> \(network(l))\(o.metered != l.metered ? ", metered \(l.metered)" : "")", interface: l.name)
            } else if o.roaming != l.roaming {
                func text(_ x: Link) -> String { x.roaming.map { "\($0)" } ?? "unknown" }
                log(.info, "\(l.name): roaming \(text(o)) -> \(text(l))" + (l.roamingBy.map { " (\($0.rawValue))" } ?? ""),
                    interface: l.name)
            } else if o != l {
                log(.debug, "\(l.name): changed (operstate \(o.status.operstate) -> \(l.status.operstate))", interface: l.name)
            }
        }
        for o in oldByIndex.values.sorted(by: { $0.index < $1.index }) { log(.info, "\(o.name): removed", interface: o.name) }
        // The egress link losing its carrier while another link is usable changes neither which link it is nor
        // whether a link is usable, but traffic now goes nowhere: that is news too.
        if old.primary?.index != new.primary?.index || old.primary?.usable != new.primary?.usable
            || old.available != new.available || old.primary?.over != new.primary?.over
            || old.primary?.kind != new.primary?.kind {
            let via = new.primary.map { "\($0.nameOver) (\($0.kind.rawValue))" }
            let dead = new.primary?.usable == false ? ", which is not usable" : ""
            log(.notice, "network: " + (new.available ? via.map { "via " + $0 + dead } ?? "usable links, but no route"
                                                       : "unavailable" + (via.map { ", traffic still routed via " + $0 } ?? "")))
        }
    }

    // MARK: - STATUS=

    /// What the STATUS= line says, compared before the line is formatted: events come far more often than the
    /// line changes.
    struct StatusSummary: Equatable {
        var links: Int, primary: String?, primaryKind: LinkKind?, primaryUsable: Bool, apps: Int, generation: Int
        var policyError: String?
        var enforcement: String?
    }

    var statusSummary: StatusSummary {
        let p = state.network.primary
        return StatusSummary(links: state.network.links.count, primary: p?.nameOver, primaryKind: p?.kind,
                             primaryUsable: p?.usable ?? false, apps: state.config.apps.count, generation: state.policyGeneration,
                             policyError: state.policyError, enforcement: enforcementStatus)
    }

    /// The STATUS= line: `systemctl status` shows it, so a failed reload names its error there too.
    public var statusText: String {
        let s = statusSummary
        var via = "no network"
        if let name = s.primary, let kind = s.primaryKind {
            via = "via \(name) (\(kind.rawValue)\(s.primaryUsable ? "" : ", not usable"))"
        }
        var line = "\(s.links) links, \(via), \(s.apps) apps, policy gen \(s.generation)"
        if let e = s.enforcement { line += ", " + e }
        if let e = s.policyError {
            let short = e.utf8.count > 300 ? String(decoding: e.utf8.prefix(300), as: UTF8.self) + "..." : e
            line += "; reload failed: " + short.map { $0 == "\n" ? " " : String($0) }.joined()
        }
        return line
    }
}
