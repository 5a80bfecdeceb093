// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermControl
import NetpermCore
import NetpermHost
import NetpermIO
import NetpermPolicy
import NetpermProtocol

/// Feeds the engine what happens and routes each effect it says to the edge object that carries it out, each owning
/// its state and its system calls (docs/ARCHITECTURE.md, "The edge's machines"). Inputs that effects produce (a
/// store's result, a policy read) are queued and handled after the current effects, never inside them
/// (`EngineDriver`).
public final class Interpreter: ControlDelegate, EngineEdges {
    public var engine: Engine { driver.engine }
    private let driver: EngineDriver
    private let files: FileWrites
    private let policy: PolicyReads
    private let rules: RuleLoads
    private let usage: UsageReads
    private let steering: SteeringEdge
    private var picture: KernelPicture
    private let peers = PeerConnections()
    private let exits: ExitWatch
    private let timers: EngineTimers
    private let transports = Transports()
    private let report: ReportWatcher
    private var wired: WiredEdges
    private var startup = StartupSettling()
    /// An input whose effects hold the loop this long is logged, with the effect that took longest (at most once
    /// per 10 s): nothing slow may run on the loop, and a stall found in a soak is otherwise a guess.
    static let slowMicroseconds: UInt64 = 250_000
    private var slowInputs = RateLimitedLog(intervalMicroseconds: 10_000_000)

    private var effects: Effects { driver.effects }

    /// `rules`, `steering` and `counters` nil: the real ones (libnftables, bpf(2) and rtnetlink, netfilter netlink);
    /// `usageStore` nil: the usage file beside the decisions. The tests give fakes.
    public init(engine: Engine, loop: EventLoop, store: DecisionSaving, usageStore: UsageSaving? = nil,
                tagStore: TagStore? = nil, reportStore: ReportStore? = nil, sysfs: Sysfs, clock: WallClock = WallClock(),
                rules: RuleLoading? = nil, steering: SteeringLoading? = nil, counters: UsageCounting? = nil,
                notify: @escaping (NotifyMessage) -> Void = ServiceManager.notify,
                loadPolicy: @escaping @Sendable () -> ConfigParseResult) {
        let feed = InputFeed()
        let stateDir = Files.directory(of: store.path)
        driver = EngineDriver(engine: engine)
        files = FileWrites(loop: loop, decisions: store, usage: usageStore ?? UsageStore(stateDir: stateDir),
                           tags: tagStore ?? TagStore(stateDir: stateDir), report: reportStore ?? ReportStore(stateDir: stateDir),
                           feed: feed)
        policy = PolicyReads(loop: loop, load: loadPolicy, feed: feed)
        self.rules = RuleLoads(enforcer: rules ?? Enforcer(loop: loop), feed: feed)
        usage = UsageReads(loop: loop, counters: counters ?? KernelUsageCounters(), clock: clock, feed: feed)
        self.steering = SteeringEdge(steerer: steering ?? Steerer(), feed: feed)
        picture = KernelPicture(sysfs: sysfs)
        exits = ExitWatch(loop: loop, feed: feed)
        timers = EngineTimers(loop: loop, feed: feed)
        report = ReportWatcher(loop: loop)
        wired = WiredEdges(notify: notify)
        report.sighted = { found, lost in feed(.reportSighted(found, lost: lost)) }
        feed.into = { [unowned self] in self.feed($0) }
        driver.edges = self
    }

    // MARK: - The edges the daemon wires in

    /// The transport, set once it exists (it needs the interpreter as its delegate).
    public var server: ControlServer? {
        get { transports.server }
        set { transports.server = newValue }
    }
    /// The system bus's face (BusFace), whose connections' replies and events go to it rather than the socket.
    public var bus: SecondTransport? {
        get { transports.bus }
        set { transports.bus = newValue }
    }
    public var steeringMarks: ([UInt32]) -> Void {
        get { steering.marks }
        set { steering.marks = newValue }
    }
    public var lookUpRoute: (RouteQuestion) -> Result<Egress?, EdgeError> {
        get { wired.lookUpRoute }
        set { wired.lookUpRoute = newValue }
    }
    public var scanCgroupsSoon: () -> Void {
        get { wired.scanCgroupsSoon }
        set { wired.scanCgroupsSoon = newValue }
    }
    public var claims: NameClaims {
        get { wired.claims }
        set { wired.claims = newValue }
    }
    public var watchExecs: (ExecIndex) -> Void {
        get { wired.watchExecs }
        set { wired.watchExecs = newValue }
    }
    public var makeScope: (ScopeRequest, @escaping (EdgeError?) -> Void) -> Void {
        get { wired.makeScope }
        set { wired.makeScope = newValue }
    }
    public var nameUnits: (UnitNaming?) -> Void {
        get { wired.nameUnits }
        set { wired.nameUnits = newValue }
    }
    /// The unit cgroups' descriptors the rules in force name, and those of the loads not yet done
    /// (CgroupWatcher.inForce): when a load starts and when it ends.
    public var handlesInForce: (Set<Int32>) -> Void {
        get { rules.handlesInForce }
        set { rules.handlesInForce = newValue }
    }
    /// Whether a desktop catalog is to come (false when the desktop files cannot be read off the loop).
    public var awaitsDesktopFiles: Bool {
        get { startup.awaitsDesktopFiles }
        set { startup.awaitsDesktopFiles = newValue }
    }
    /// Called once, when start-up's work is done (StartupSettling).
    public var onStartupSettled: () -> Void {
        get { startup.onSettled }
        set { startup.onSettled = newValue }
    }

    /// Another socket of the daemon's commits to the rules' table (UnitNamer): the enforcer counts it as its own.
    public func alsoCommitting(port: UInt32, commits: @escaping () -> (started: UInt32, finished: UInt32)) {
        rules.alsoCommitting(port: port, commits: commits)
    }

    // MARK: - The engine

    /// Handles `input` and everything it leads to, then lets released clients' requests through.
    public func feed(_ input: Input) {
        driver.feed(input)
        if case .desktopCatalog = input { startup.desktopRead = true }
        startup.check(busy: usage.busy || driver.draining)
    }

    public func carryOut(_ effects: Effects, of input: Input) {
        if case .stopping = input {
            files.stopping()
            usage.stopping()
        }
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
                 .watchReport, .lookUpTables, .runLoad, .loadAnswered, .followTables, .repairTablesSoon:
                let t = Clock.monotonicMicroseconds()
                carryOut(effect)
                let took = Clock.monotonicMicroseconds() - t
                if took > slowest.took { slowest = (effect, took) }
            }
        }
        transports.carriedOut()
        let held = Clock.monotonicMicroseconds() - start
        if held > Self.slowMicroseconds {
            slowInputs.emit(5, "the loop was held \(held / 1000) ms by the effects of \(input.name) (\(effects.list.count) "
                + "effects" + (slowest.effect.map { ", \($0.name) \(slowest.took / 1000) ms" } ?? "") + ")")
        }
    }

    public func drained() { transports.drained() }

    /// Each effect to the edge that carries it out.
    private func carryOut(_ effect: Effect) {
        switch effect {
        case let .reply(id, range): transports.reply(id, effects[range])
        case let .event(id, head, tail): transports.event(id, head: effects[head], tail: tail, in: effects)
        case let .hold(id): transports.socket(id)?.hold(id)
        case let .resume(id): transports.socket(id)?.resume(id)
        case let .close(id): transports.socket(id)?.closeAfterFlush(id)
        case let .keepOpenAfterInputEnds(id): transports.socket(id)?.keepOpenAfterInputEnds(id)
        case let .armTimer(id, usec): timers.arm(id, afterMicroseconds: usec)
        case let .cancelTimer(id): timers.cancel(id)
        case let .persist(decisions): files.persist(decisions)
        case .loadPolicy: policy.read(basis: LastReference(driver.engine.reloadBasis()))
        case let .notify(n):
            if case .ready = n { startup.ready = true }
            wired.notify(n)
        case let .log(priority, message, fields): Log.emit(priority.rawValue, message, fields: fields.pairs)
        case let .nameUnits(naming): wired.nameUnits(naming)
        case let .loadUnitElements(changes, ids): rules.loadUnitElements(changes, ids: ids)
        case let .loadRules(id, scripts, report, _, handles): rules.asked(id, scripts, report: report, handles: handles)
        case let .lookUpTables(lookup): rules.lookUp(lookup)
        case let .runLoad(_, run): rules.run(run)
        case let .loadAnswered(id, error): rules.answered(id, error: error)
        case let .followTables(watching): rules.follow(watching)
        case .repairTablesSoon: rules.repairSoon()
        case .readUsage: usage.read()
        case let .saveUsage(book): files.saveUsage(book)
        case let .saveTags(table): files.saveTags(table)
        case let .loadUsageRules(id, script, report, handles): rules.askedUsage(id, script, report: report, handles: handles)
        case let .watchExit(pid): exits.watch(pid)
        case let .unwatchExit(pid): exits.unwatch(pid)
        case let .steer(step): steering.carryOut(step)
        case let .lookUpRoute(id, question):
            switch wired.lookUpRoute(question) {
            case let .success(egress): feed(.routed(id, egress, error: nil))
            case let .failure(error): feed(.routed(id, nil, error: error))
            }
        case let .watchExecs(index): wired.watchExecs(index)
        case let .makeScope(request):
            wired.makeScope(request) { [unowned self] error in self.feed(.scopeMade(request, error: error)) }
        case let .checkClaim(claim):
            if let found = wired.claims.check(claim) { feed(.execFound(found)) }
        case .scanCgroupsSoon: wired.scanCgroupsSoon()
        case let .saveReport(book): files.saveReport(book)
        case .removeReport: files.removeReport()
        case let .watchReport(on): report.watch(on)
        }
    }

    // MARK: - The kernel's picture

    /// The kernel's picture, with what sysfs says of each link.
    public func kernelChanged(_ snapshot: KernelSnapshot) {
        // Steering's tables follow it as the engine says (`Engine.followSteering`).
        feed(.kernel(picture.joined(snapshot)))
    }

    /// A Wi-Fi link's network changed (associated, roamed, disconnected): the same kernel picture, new networks.
    public func wifiChanged(_ networks: [Int32: WifiFacts]) {
        picture.wifi = networks
        if let k = picture.last { kernelChanged(k) }
    }

    /// What NetworkManager says of its devices changed (or it came or went): the same kernel picture, new facts.
    public func managedChanged(_ devices: [String: NetworkManagerDevice]) {
        picture.managed = devices
        if let k = picture.last { kernelChanged(k) }
    }

    /// Where ModemManager says its modems are registered changed (or it came or went).
    public func modemsChanged(_ registrations: [String: ModemRegistration]) {
        picture.modems = registrations
        if let k = picture.last { kernelChanged(k) }
    }

    // MARK: - The bus's calls

    /// The process the bus daemon names as a call's sender, read from /proc.
    public func identifyBusCaller(pid: Int32, uid: UInt32) -> PeerIdentity { peers.busCaller(pid: pid, uid: uid) }

    /// A call on the bus as a connection of its own: opened for its caller (`via`: `.bus(authorized:)`, whether
    /// polkit allowed it everyone's privilege, or `.busSignals` for the face's own subscriber), then its one request.
    public func busRequest(_ id: UInt64, caller: PeerIdentity, via: PeerIdentity.Transport, line: String) {
        var identity = caller
        identity.via = via
        feed(.opened(id, identity))
        feed(.line(id, Array(line.utf8)))
    }

    /// Its reply is out.
    public func busClosed(_ id: UInt64) { feed(.closed(id)) }

    // MARK: - ControlDelegate

    public func caughtUp(_ id: UInt64, dropped: Int) { feed(.caughtUp(id, dropped: dropped)) }

    public func opened(_ id: UInt64, fd: Int32, connector: Credentials) { peers.opened(id, fd: fd, connector: connector) }

    /// Each request is answered for the process that sent it (PeerConnections).
    public func frame(_ id: UInt64, _ frame: LineFramer.Frame, sender: Credentials) {
        guard let told = peers.sending(id, sender) else { return }
        if let told { feed(told) }
        switch frame {
        case let .line(bytes): feed(.line(id, bytes))
        case .tooLong: feed(.lineTooLong(id))
        }
    }

    public func closed(_ id: UInt64) {
        if peers.closed(id) { feed(.closed(id)) }
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
