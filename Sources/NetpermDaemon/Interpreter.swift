// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermControl
import NetpermCore
import NetpermHost
import NetpermIO
import NetpermPolicy
import NetpermProtocol

/// Feeds the engine what happens and carries out what it says: the daemon's only logic is which effect is which
/// system call. Inputs that effects produce (a store's result, a policy read) are queued and handled after the
/// current effects, never inside them (`EngineDriver`).
public final class Interpreter: ControlDelegate, EngineEdges {
    public var engine: Engine { driver.engine }
    private let driver: EngineDriver
    private let loop: EventLoop
    private let store: DecisionSaving
    private let loadPolicy: @Sendable () -> ConfigParseResult
    /// Policies are read and parsed on a thread of their own: a file of many megabytes must not stop the loop.
    private let policyLoader: OffLoop<Input>?
    /// What the engine replaced on a reload is freed there too (`dropOffLoop`).
    private let dropper: OffLoop<Void>?
    /// Decisions are written on a thread of their own too: a write and two fsyncs can take long on a busy disk,
    /// and the engine holds only the requester meanwhile (it waits for `stored`).
    private let storeWriter: OffLoop<StoreOutcome>?
    /// The usage totals, written off the loop as the decisions are (on it at a stop: the process is about to go).
    private let usageStore: UsageSaving
    private let reportStore: ReportStore
    private let reportWatcher: ReportWatcher
    private var reportWriter: OffLoop<StoreOutcome>?
    private var reportWriting = false
    private var reportWaiting: (@Sendable () -> StoreOutcome)?
    private let usageWriter: OffLoop<StoreOutcome>?
    /// The connection tags, written off the loop, one write at a time: a table that comes meanwhile waits, and
    /// only the latest is written.
    private let tagStore: TagStore
    private let tagWriter: OffLoop<StoreOutcome>?
    private var tagsWriting = false
    private var tagsWaiting: TagTable?
    /// Where the usage counters are read (one reading at a time: the engine asks for the next once one is back).
    private let usageReader: OffLoop<Result<UsageReading?, Errno>>?
    private let counters: UsageCounting
    private var stopping = false
    private let sysfs: Sysfs
    /// The wall clock the engine reads (its test offset is read again before each usage reading).
    private let clock: WallClock
    private let enforcer: RuleLoading
    private let steerer: SteeringLoading
    private let notify: (NotifyMessage) -> Void
    /// Mode=steer's marks in use, for the route lookups (NetlinkWatcher.marks).
    public var steeringMarks: ([UInt32]) -> Void = { _ in }
    /// REACH's route lookups (NetlinkWatcher.egress(toward:)): the destination's egress, or why the kernel could not
    /// be asked.
    public var lookUpRoute: (RouteQuestion) -> Result<Egress?, EdgeError> = { _ in .success(nil) }
    /// Looks for new units now rather than after the scan's pause (CgroupWatcher.scanSoon).
    public var scanCgroupsSoon: () -> Void = {}
    /// Processes found by the bus names they own (Effect.checkClaim).
    public var claims = NameClaims()
    /// Which programs the exec watcher looks for (ExecWatcher.use).
    public var watchExecs: (ExecIndex) -> Void = { _ in }
    /// Makes a scope of a user's manager for a process (ScopeMaker.make): `done` gets nil, or why not, on the loop's
    /// thread, never inside this call.
    public var makeScope: (ScopeRequest, @escaping (EdgeError?) -> Void) -> Void = { request, done in
        done(EdgeError(.makeScope, "no way to reach user managers"))
    }
    /// Where units are named as they are made (UnitNamer.use).
    public var nameUnits: (UnitNaming?) -> Void = { _ in }
    /// The unit cgroups' descriptors the rules in force name, and those of the loads not yet done
    /// (CgroupWatcher.inForce): when a load starts and when it ends.
    public var handlesInForce: (Set<Int32>) -> Void = { _ in }
    /// What the rules in force name, and what each load under way does (by the order they were asked for): a
    /// script names cgroups by descriptor (/proc/self/fd/N), which must stay open until its thread is done with it.
    private var inForceHandles: Set<Int32> = []
    /// Those of the last load asked for, whatever its answer: after a refusal the engine retries that text.
    private var lastHandles: Set<Int32> = []
    private var loadHandles: [Int: Set<Int32>] = [:]
    private var loads = 0
    /// The transport, set once it exists (it needs the interpreter as its delegate).
    public var server: ControlServer?
    /// The system bus's face (BusFace), whose connections' replies and events go to it rather than the socket.
    public var bus: SecondTransport?

    private var effects: Effects { driver.effects }
    /// An input whose effects hold the loop this long is logged, with the effect that took longest (at most once
    /// per 10 s): nothing slow may run on the loop, and a stall found in a soak is otherwise a guess.
    static let slowMicroseconds: UInt64 = 250_000
    private var slowInputs = RateLimitedLog(intervalMicroseconds: 10_000_000)
    /// The bodies of the events in `effects`, by where they are in it: one event's body is written once and held
    /// once, however many subscribers it goes to.
    private var bodies: [Range<Int>: EventBody] = [:]
    private var timers: [TimerID: TimerSource] = [:]
    /// sysfs is read once per link (and again on rename or when its addresses or default routes change), not on
    /// every netlink message.
    private var sysfsCache: [Int32: (name: String, stamp: Int, facts: SysfsFacts)] = [:]
    /// The last kernel picture and the Wi-Fi networks (nl80211), joined into what the engine gets: either may
    /// change without the other.
    private var lastKernel: KernelSnapshot?
    private var wifi: [Int32: WifiFacts] = [:]
    private var managed: [String: NetworkManagerDevice] = [:]
    private var modems: [String: ModemRegistration] = [:]
    /// Each open connection: its socket, who connected, and the pid the engine has the identity of (nil until
    /// its first request: a connection that sends nothing costs no reading of /proc).
    private var connections: [ConnectionID: (fd: Int32, connector: Credentials, pid: Int32?)] = [:]
    private let identities = PeerIdentities()
    /// The processes that asked an open prompt: each pidfd becomes readable when its process exits.
    private var askers: [Int32: (fd: Int32, source: IOSource)] = [:]

    /// `rules`, `steering` and `counters` nil: the real ones (libnftables, bpf(2) and rtnetlink, netfilter netlink);
    /// `usageStore` nil: the usage file beside the decisions. The tests give fakes.
    public init(engine: Engine, loop: EventLoop, store: DecisionSaving, usageStore: UsageSaving? = nil,
                tagStore: TagStore? = nil, reportStore: ReportStore? = nil, sysfs: Sysfs, clock: WallClock = WallClock(),
                rules: RuleLoading? = nil, steering: SteeringLoading? = nil, counters: UsageCounting? = nil,
                notify: @escaping (NotifyMessage) -> Void = ServiceManager.notify,
                loadPolicy: @escaping @Sendable () -> ConfigParseResult) {
        driver = EngineDriver(engine: engine); self.loop = loop; self.store = store; self.sysfs = sysfs; self.clock = clock
        self.loadPolicy = loadPolicy
        enforcer = rules ?? Enforcer(loop: loop)
        steerer = steering ?? Steerer()
        self.usageStore = usageStore ?? UsageStore(stateDir: Files.directory(of: store.path))
        self.tagStore = tagStore ?? TagStore(stateDir: Files.directory(of: store.path))
        self.reportStore = reportStore ?? ReportStore(stateDir: Files.directory(of: store.path))
        reportWatcher = ReportWatcher(loop: loop)
        reportWriter = Self.offLoop(loop, "writing the privacy report", "it will be written on the loop")
        self.counters = counters ?? KernelUsageCounters()
        self.notify = notify
        policyLoader = Self.offLoop(loop, "reading the policy", "reloads will read it on the loop")
        dropper = Self.offLoop(loop, "freeing memory", "it will be freed on the loop")
        storeWriter = Self.offLoop(loop, "writing decisions", "they will be written on the loop")
        usageWriter = Self.offLoop(loop, "writing usage totals", "they will be written on the loop")
        tagWriter = Self.offLoop(loop, "writing connection tags", "they will be written on the loop")
        usageReader = Self.offLoop(loop, "reading usage counters", "they will be read on the loop")
        enforcer.repairFailed = { [unowned self] error in self.feed(.rulesLoaded(error: error)) }
        enforcer.blocked = { [unowned self] app, kind, uid, index, destination, incoming in
            self.feed(.blocked(app: app, kind: kind, uid: uid, ifindex: index, destination: destination, incoming: incoming))
        }
        enforcer.usageChanged = { [unowned self] in self.feed(.usageTableChanged) }
        enforcer.quotaReached = { [unowned self] quota in self.feed(.budgetReached(quota: quota)) }
        reportWatcher.sighted = { [unowned self] found, lost in self.feed(.reportSighted(found, lost: lost)) }
        driver.edges = self
    }

    /// A thread of its own for one kind of slow work, or nil (said once) when none can be had: the work is then
    /// done on the loop.
    private static func offLoop<T>(_ loop: EventLoop, _ what: String, _ otherwise: String) -> OffLoop<T>? {
        do { return try OffLoop(loop: loop) } catch {
            Log.warning("cannot set up \(what) off the loop (\(error)); \(otherwise)")
            return nil
        }
    }

    /// Drops `value` on a thread of its own, then gives the free pages back to the kernel: a reload's old policy,
    /// verdicts and rules of 10,001 apps took the loop 15 ms to free, and the trim some more. On the loop when the
    /// thread is busy with the last one or cannot be had.
    private func dropOffLoop<T>(_ value: LastReference<T>) {
        if let dropper, !dropper.busy {
            do {
                try dropper.run({
                    value.drop()
                    Heap.releaseFree()
                }) { _ in }
                return
            } catch {
                Log.warning("cannot start a thread to free memory (\(error)); freeing it on the loop")
            }
        }
        value.drop()
        Heap.releaseFree()
    }

    /// Handles `input` and everything it leads to, then lets released clients' requests through.
    public func feed(_ input: Input) {
        driver.feed(input)
        if case .desktopCatalog = input { startup.desktopRead = true }
        settledAfterStart()
    }

    /// What start-up still waits for before its code may leave the RSS (`onStartupSettled`): READY=1 sent, and the
    /// answers that come after it (the first desktop files read, the usage readings READY's input asked for).
    private struct Startup {
        var ready = false
        var desktopRead = false
        var done = false
    }
    private var startup = Startup()
    /// Whether a desktop catalog is to come (false when the desktop files cannot be read off the loop).
    public var awaitsDesktopFiles = true
    /// Called once, when start-up's work is done: the daemon releases start-up's code pages then (CodePages), so
    /// that what ran after READY=1 (reading the desktop files and the usage counters) does not stay resident.
    public var onStartupSettled: () -> Void = {}

    private func settledAfterStart() {
        guard !startup.done, startup.ready, startup.desktopRead || !awaitsDesktopFiles,
              !(usageReader?.busy ?? false), !driver.draining else { return }
        startup.done = true
        onStartupSettled()
    }

    public func carryOut(_ effects: Effects, of input: Input) {
        if case .stopping = input { stopping = true }
        let start = Clock.monotonicMicroseconds()
        var slowest: (effect: Effect?, took: UInt64) = (nil, 0)
        for effect in effects.list {
            switch effect {
            case .reply, .event:
                carryOut(effect)
            // Those that may make a system call are timed.
            case .hold, .resume, .close, .keepOpenAfterInputEnds, .armTimer, .cancelTimer, .persist, .loadPolicy,
                 .notify, .log, .loadRules, .nameUnits, .loadUnitElements, .readUsage, .saveUsage, .saveTags, .loadUsageRules, .watchExit, .unwatchExit,
                 .steer, .lookUpRoute, .watchExecs, .makeScope, .checkClaim, .scanCgroupsSoon, .saveReport, .removeReport,
                 .watchReport:
                let t = Clock.monotonicMicroseconds()
                carryOut(effect)
                let took = Clock.monotonicMicroseconds() - t
                if took > slowest.took { slowest = (effect, took) }
            }
        }
        bodies.removeAll(keepingCapacity: true)
        let held = Clock.monotonicMicroseconds() - start
        if held > Self.slowMicroseconds {
            slowInputs.emit(5, "the loop was held \(held / 1000) ms by the effects of \(input.name) (\(effects.list.count) "
                + "effects" + (slowest.effect.map { ", \($0.name) \(slowest.took / 1000) ms" } ?? "") + ")")
        }
    }

    /// A file written off the loop's thread when `writer` is there and free; on the loop otherwise.
    private func write(_ what: String, with writer: OffLoop<StoreOutcome>?, _ save: @escaping @Sendable () -> StoreOutcome,
                       then done: @escaping (StoreOutcome) -> Void) {
        if let writer, !writer.busy {
            do {
                try writer.run(save, then: done)
                return
            } catch {
                Log.warning("cannot start a thread to write \(what) (\(error)); writing them on the loop")
            }
        }
        done(save())
    }

    private func saveTags(_ table: TagTable) {
        guard !tagsWriting else { tagsWaiting = table; return }
        tagsWriting = true
        let store = tagStore
        write("the connection tags", with: stopping ? nil : tagWriter, { store.save(table) }) { [unowned self] outcome in
            tagsWriting = false
            switch outcome {
            case .stored: break
            case let .storedNotSynced(e): Log.warning("connection tags written, but not synced: \(e)")
            case let .failed(e): Log.err("cannot write the connection tags (kept in memory): \(e)")
            }
            if let next = tagsWaiting {
                tagsWaiting = nil
                saveTags(next)
            }
        }
    }

    public func drained() {
        server?.serveReleased()
        bus?.flush()
    }

    /// Another socket of the daemon's commits to the rules' table (UnitNamer): the enforcer counts it as its own.
    public func alsoCommitting(port: UInt32, commits: @escaping () -> (started: UInt32, finished: UInt32)) {
        enforcer.alsoCommitting(port: port, commits: commits)
    }

    private func carryOut(_ effect: Effect) {
        switch effect {
        case let .reply(id, range):
            if let bus, bus.owns(id) { bus.reply(id, effects[range]) } else { server?.reply(id, effects[range]) }
        case let .event(id, head, tail):
            if let bus, bus.owns(id) { return bus.event(id, head: effects[head], tail: effects[tail]) }
            guard let server else { return }
            let body = bodies[tail] ?? server.body(effects[tail])
            bodies[tail] = body
            server.event(id, head: effects[head], body: body)
        // A bus call's connection carries one request: nothing to hold or keep, and it closes with its reply.
        case let .hold(id): if bus?.owns(id) != true { server?.hold(id) }
        case let .resume(id): if bus?.owns(id) != true { server?.resume(id) }
        case let .close(id): if bus?.owns(id) != true { server?.closeAfterFlush(id) }
        case let .keepOpenAfterInputEnds(id): if bus?.owns(id) != true { server?.keepOpenAfterInputEnds(id) }
        case let .armTimer(id, usec):
            do {
                timers[id] = try loop.addTimer(afterMicroseconds: usec) { [unowned self] in
                    self.timers[id] = nil
                    self.feed(.timer(id))
                }
            } catch {
                Log.err("cannot arm a timer: \(error)")
            }
        case let .cancelTimer(id): timers.removeValue(forKey: id)?.cancel()
        case let .persist(decisions):
            // One write at a time: the engine starts the next only once this one is `stored`.
            let store = self.store
            write("the decisions", with: storeWriter, { store.save(decisions) }) { [unowned self] in self.stored($0) }
        case .loadPolicy:
            // The engine has one load in flight at a time; on the loop only if no thread can be had. The thread also
            // makes what the engine will compute with the policy (ReloadPreparation.swift).
            // The basis holds what the engine is about to replace (the policy, verdicts and rules of every app): once
            // the engine has taken the new policy it holds their last references, dropped by a thread of its own.
            let basis = LastReference(driver.engine.reloadBasis())
            let read: @Sendable () -> Input = { [loadPolicy] in
                let result = loadPolicy()
                return .policy(result, prepared: basis.value?.prepare(result))
            }
            if let policyLoader, !policyLoader.busy {
                do {
                    try policyLoader.run(read) { [unowned self] input in
                        self.feed(input)
                        // The files' text is gone, and the old policy once the new one is in force.
                        self.dropOffLoop(basis)
                    }
                    return
                } catch {
                    Log.warning("cannot start a thread to read the policy (\(error)); reading it on the loop")
                }
            }
            let result = loadPolicy()
            Heap.releaseFree()
            feed(.policy(result))
        case let .notify(n):
            if case .ready = n { startup.ready = true }
            notify(n)
        case let .log(priority, message, fields): Log.emit(priority.rawValue, message, fields: fields.pairs)
        case let .nameUnits(naming): nameUnits(naming)
        case let .loadUnitElements(changes, ids):
            enforcer.loadUnitElements(changes) { [unowned self] error in
                if !ids.isEmpty { self.feed(.unitElementsLoaded(ids: ids, error: error)) }
            }
        case let .loadRules(scripts, report, inForce, handles):
            let start = Clock.monotonicMicroseconds()
            let n = loads
            loads += 1
            // What a repair would load again, as the enforcer keeps it: its cgroups' descriptors must stay open.
            loadHandles[n] = handles
            lastHandles = handles
            keepHandles()
            enforcer.load(scripts, inForce: inForce) { [unowned self] error in
                loadHandles[n] = nil
                if error == nil { inForceHandles = handles }
                keepHandles()
                Log.debug("enforcement: nft transactions of \(scripts.reduce(0) { $0 + $1.text.utf8.count }) bytes took "
                    + "\(Clock.monotonicMicroseconds() - start) µs")
                if report {
                    feed(.rulesLoaded(error: error))
                } else if let error {
                    Log.debug("enforcement: removing a table left by an earlier run: \(error)")
                }
            }
        case .readUsage:
            clock.refresh()
            let counters = self.counters
            let done: (Result<UsageReading?, Errno>) -> Void = { [unowned self] result in
                switch result {
                case let .success(reading): feed(.usageRead(reading, error: nil))
                case let .failure(e): feed(.usageRead(nil, error: EdgeError(.readUsage, errno: e.code, "\(e)")))
                }
            }
            // At a stop, on the loop: the process ends right after.
            if let usageReader, !usageReader.busy, !stopping {
                do {
                    try usageReader.run({ counters.read() }, then: done)
                    return
                } catch {
                    Log.warning("cannot start a thread to read the usage counters (\(error)); reading them on the loop")
                }
            }
            done(counters.read())
        case let .saveUsage(book):
            // At a stop, on the loop: the process ends right after.
            let store = usageStore
            write("the usage totals", with: stopping ? nil : usageWriter, { store.save(book) }) { [unowned self] in
                self.usageSaved($0)
            }
        case let .saveTags(table): saveTags(table)
        case let .loadUsageRules(script, report, handles):
            let start = Clock.monotonicMicroseconds()
            // It may name cgroups by descriptor too (the connections' tags).
            let n = loads
            loads += 1
            loadHandles[n] = handles
            keepHandles()
            enforcer.loadUsage(script) { [unowned self] error in
                loadHandles[n] = nil
                keepHandles()
                Log.debug("usage: nft transaction of \(script.utf8.count) bytes took \((Clock.monotonicMicroseconds() - start) / 1000) ms")
                if report {
                    feed(.usageRulesLoaded(error: error))
                } else if let error {
                    Log.debug("usage: removing a table left by an earlier run: \(error)")
                }
            }
        case let .watchExit(pid):
            do {
                // Held while its prompt is open: a number no select(2) needs (LowDescriptors).
                let fd = FD.moveAbove(try Pidfd.opening(pid), LowDescriptors.selectable)
                do {
                    askers[pid] = (fd, try loop.addIO(fd: fd, events: IOEvents.readable) { [unowned self] _ in
                        self.unwatch(pid)
                        self.feed(.exited(pid: pid))
                    })
                } catch {
                    FD.close(fd)
                    Log.warning("cannot watch pid \(pid), which asked: \(error); its prompt waits for its time-out")
                }
            } catch {
                // Gone already (ESRCH); anything else leaves the prompt to its time-out.
                if error.code == ESRCH { feed(.exited(pid: pid)) } else { Log.debug("pidfd_open(\(pid)): \(error)") }
            }
        case let .unwatchExit(pid): unwatch(pid)
        case let .steer(plan):
            feed(.steered(error: steerer.apply(plan)))
            steeringMarks(plan?.allowances.map(\.mark) ?? [])
        case let .lookUpRoute(id, question):
            switch lookUpRoute(question) {
            case let .success(egress): feed(.routed(id, egress, error: nil))
            case let .failure(error): feed(.routed(id, nil, error: error))
            }
        case let .watchExecs(index):
            watchExecs(index)
        case let .makeScope(request):
            makeScope(request) { [unowned self] error in self.feed(.scopeMade(request, error: error)) }
        case let .checkClaim(claim):
            if let found = claims.check(claim) { feed(.execFound(found)) }
        case .scanCgroupsSoon:
            scanCgroupsSoon()
        case let .saveReport(book):
            let store = reportStore
            writeReport { store.save(book) }
        case .removeReport:
            let store = reportStore
            writeReport { store.remove() }
        case let .watchReport(on):
            reportWatcher.watch(on)
        }
    }

    /// One write of the report's file at a time, in order (a deletion never overtaken by a save begun before it);
    /// the latest waiting replaces any other waiting.
    private func writeReport(_ job: @escaping @Sendable () -> StoreOutcome) {
        guard !reportWriting else { reportWaiting = job; return }
        reportWriting = true
        write("the privacy report", with: stopping ? nil : reportWriter, job) { [unowned self] outcome in
            reportWriting = false
            feed(.reportSaved(error: Self.error(of: outcome, written: "report written to \(reportStore.path)")))
            if let next = reportWaiting {
                reportWaiting = nil
                writeReport(next)
            }
        }
    }

    private func unwatch(_ pid: Int32) {
        guard let a = askers.removeValue(forKey: pid) else { return }
        a.source.cancel()
        FD.close(a.fd)
    }

    /// Tells the cgroup watcher which descriptors scripts may still name: the rules in force, the last asked for,
    /// and every load under way.
    private func keepHandles() {
        handlesInForce(loadHandles.values.reduce(inForceHandles.union(lastHandles)) { $0.union($1) })
    }

    private func stored(_ outcome: StoreOutcome) {
        // Renamed into place: the decision is on disk and takes effect; only its durability is in doubt.
        feed(.stored(error: Self.error(of: outcome, written: "decisions written to \(store.path)",
                                       risk: "; a crash soon may lose the last decision")))
    }

    private func usageSaved(_ outcome: StoreOutcome) {
        feed(.usageSaved(error: Self.error(of: outcome, written: "usage totals written to \(usageStore.path)")))
    }

    /// What the engine hears of a write: a file renamed into place but not synced is written (logged).
    private static func error(of outcome: StoreOutcome, written what: String, risk: String = "") -> EdgeError? {
        switch outcome {
        case .stored: return nil
        case let .storedNotSynced(why):
            Log.warning("\(what), but syncing \(why)\(risk)")
            return nil
        case let .failed(why): return why
        }
    }

    /// The kernel's picture, with what sysfs says of each link.
    public func kernelChanged(_ snapshot: KernelSnapshot) {
        lastKernel = snapshot
        var s = snapshot
        s.wifi = wifi
        s.managed = managed
        s.modems = modems
        var seen: Set<Int32> = []
        // What the link's addresses and default routes are: a DHCP lease and a PPP unit's pid file are written
        // around the time those change, so the facts are read again then (and on rename), not per message.
        var configured: [Int32: Hasher] = [:]
        for a in s.addresses { configured[a.index, default: Hasher()].combine(a.text) }
        for r in s.defaultRoutes { configured[r.index, default: Hasher()].combine(r.family.rawValue) }
        for link in s.links {
            seen.insert(link.index)
            let stamp = configured[link.index]?.finalize() ?? 0
            if let cached = sysfsCache[link.index], cached.name == link.name, cached.stamp == stamp {
                s.sysfs[link.index] = cached.facts
            } else {
                let facts = sysfs.facts(forInterface: link.name, index: link.index)
                sysfsCache[link.index] = (link.name, stamp, facts)
                s.sysfs[link.index] = facts
            }
        }
        if sysfsCache.count != seen.count { sysfsCache = sysfsCache.filter { seen.contains($0.key) } }
        feed(.kernel(s))
        // Mode=steer's tables copy the main table's routes: any change of it is followed here.
        switch steerer.follow() {
        case .unchanged: break
        case .recovered: feed(.steered(error: nil))
        case let .failed(error): feed(.steered(error: error))
        }
    }

    /// A Wi-Fi link's network changed (associated, roamed, disconnected): the same kernel picture, new networks.
    public func wifiChanged(_ networks: [Int32: WifiFacts]) {
        wifi = networks
        if let k = lastKernel { kernelChanged(k) }
    }

    /// What NetworkManager says of its devices changed (or it came or went): the same kernel picture, new facts.
    public func managedChanged(_ devices: [String: NetworkManagerDevice]) {
        managed = devices
        if let k = lastKernel { kernelChanged(k) }
    }

    /// Where ModemManager says its modems are registered changed (or it came or went).
    public func modemsChanged(_ registrations: [String: ModemRegistration]) {
        modems = registrations
        if let k = lastKernel { kernelChanged(k) }
    }

    // MARK: - The bus's calls

    /// The process the bus daemon names as a call's sender, read from /proc.
    public func identifyBusCaller(pid: Int32, uid: UInt32) -> PeerIdentity {
        identities.identify(busCaller: pid, uid: uid, authorized: false)
    }

    /// A call on the bus as a connection of its own: opened for its caller (`authorized`: polkit allowed it
    /// everyone's privilege), then its one request.
    public func busRequest(_ id: UInt64, caller: PeerIdentity, authorized: Bool, line: String) {
        var identity = caller
        identity.via = .bus(authorized: authorized)
        feed(.opened(id, identity))
        feed(.line(id, Array(line.utf8)))
    }

    /// Its reply is out.
    public func busClosed(_ id: UInt64) { feed(.closed(id)) }

    // MARK: - ControlDelegate

    public func caughtUp(_ id: UInt64, dropped: Int) { feed(.caughtUp(id, dropped: dropped)) }

    public func opened(_ id: UInt64, fd: Int32, connector: Credentials) {
        connections[id] = (fd, connector, nil)
    }

    /// Each request is answered for the process that sent it. The engine learns who that is before the first
    /// request, and again only when a request comes from another pid than the last one did: the same sender
    /// costs a comparison.
    public func frame(_ id: UInt64, _ frame: LineFramer.Frame, sender: Credentials) {
        guard let c = connections[id] else { return }
        if c.pid != sender.pid {
            let identity = identities.identify(sender: sender, socket: c.fd, connector: c.connector)
            connections[id]?.pid = sender.pid
            feed(c.pid == nil ? .opened(id, identity) : .identityChanged(id, identity))
        }
        switch frame {
        case let .line(bytes): feed(.line(id, bytes))
        case .tooLong: feed(.lineTooLong(id))
        }
    }

    public func closed(_ id: UInt64) {
        guard let c = connections.removeValue(forKey: id), c.pid != nil else { return }
        feed(.closed(id))
    }

    public func refusalLine(_ refusal: ControlServer.Refusal) -> [UInt8] {
        switch refusal {
        case let .total(limit):
            return ProtocolError(.tooManyConnections, "netpermd serves at most \(limit) connections at once; try again later").line
        case let .perUID(uid, limit):
            return ProtocolError(.tooManyConnections, "uid \(uid) has \(limit) connections open, the most one user may have").line
        }
    }
}
