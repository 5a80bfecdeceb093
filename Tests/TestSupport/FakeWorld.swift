// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import NetpermProtocol

/// A connection as the fake transport keeps it; the engine tests' harness and the fuzz target each add what they
/// note of it (the lines it got, the requests it asked).
open class FakeConnection {
    public let id: ConnectionID
    /// Between `Effect.hold` and `Effect.resume`: the transport takes no request from it.
    public var held = false
    /// Its close was asked (`Effect.close`) or the peer went (`FakeWorld.disconnect`): nothing more is taken from it.
    public var closed = false
    public var keepsOpen = false
    /// Requests the transport has framed but not handed over (it is held, or earlier ones wait), in order.
    public var pending: [Input] = []
    /// The `seq` of the last event it got (0: none yet).
    public var lastSeq = 0

    public required init(id: ConnectionID) { self.id = id }
}

/// The world around the pure engine, without any I/O, as the engine tests' harness
/// (Tests/NetpermCoreTests/EngineHarness.swift) and the engine fuzz target (Fuzz/Targets/engine.swift, which
/// compiles this file with its own) both play it: the transport (connections that are ids, requests held back while
/// a connection is held, then taken one at a time), the clock (`FakeClock`), the decision store, the policy files,
/// the processes watched for their exit, and the kernel's and the disk's answers to loads, reads and writes. Every
/// effect that produces an input feeds it back, in order, as the daemon does; a slow disk or load waits for a
/// `complete...` call when it is set to.
///
/// A subclass checks and notes each effect in `carryOut(_:)` (then calls this one's), and each input's effects as
/// a whole in `carryOut(_:of:)`; what breaks the world's own rules goes to `fail(_:)`.
open class FakeWorld<Connection: FakeConnection>: EngineEdges {
    public let driver: EngineDriver
    public var engine: Engine { driver.engine }
    /// The effects of the input being carried out.
    public var effects: Effects { driver.effects }

    /// Timers fire as `advance(by:)` passes their deadline.
    public let clock = FakeClock<TimerID>()

    /// Every connection opened, and those whose `Input.closed` the engine has not handled yet (from then on nothing
    /// may be sent to it).
    public private(set) var connections: [ConnectionID: Connection] = [:]
    public private(set) var live: [ConnectionID: Connection] = [:]
    private var nextConnection: ConnectionID = 1
    /// Requests of connections no longer held are being fed.
    private var releasing = false

    /// What `Effect.persist` wrote, in order; `storeError` makes the writes fail.
    public private(set) var persisted: [Decisions] = []
    public var storeError: EdgeError?
    /// When set, `Effect.persist` waits for `completeStore()` (a slow disk), so inputs can come in between.
    public var storeIsManual = false
    public private(set) var pendingStores: [Decisions] = []

    /// What `Effect.loadPolicy` reads, with these accounts.
    public var policyFiles: [(path: String, text: String)] = []
    public var accounts: AccountResolver
    /// When set, `Effect.loadPolicy` waits for `completePolicyLoad()`.
    public var policyLoadIsManual = false
    public var pendingPolicyLoads: Int { policyLoadBases.count }
    private var policyLoadBases: [ReloadBasis] = []
    /// Whether a policy read comes with what its basis makes of it (as the daemon's thread does), or alone (as when
    /// the daemon reads it on the loop).
    public var preparesReloads = true

    /// What the next loads of the rules are answered with, in turn, before `rulesError`.
    public var rulesAnswers: [EdgeError?] = []
    public var rulesError: EdgeError?
    /// The answer to `Effect.loadUnitElements`.
    public var unitsError: EdgeError?
    /// The answer to `Effect.steer`.
    public var steerError: EdgeError?
    /// The answer to `Effect.lookUpRoute` when the kernel cannot be asked (otherwise `route(_:)`'s).
    public var routeError: EdgeError?
    /// The answer to `Effect.makeScope` (nil: made); with `scopesAreManual` the requests wait in `pendingScopes`.
    public var scopeError: EdgeError?
    public var scopesAreManual = false
    public var pendingScopes: [ScopeRequest] = []
    /// Processes claimed by their bus names (Effect.checkClaim): the fake edge takes each as found, in `claimPlace`.
    public var claims: [ProcessClaim] = []
    public var claimPlace: SessionPlace? = .dbusActivation

    /// The usage table as the kernel has it (nil: none): what `Effect.readUsage` reads, or `usageReadError`.
    public var usageReading: UsageReading?
    public var usageReadError: EdgeError?
    /// While true, a reading begun is left in flight (`heldUsageReads`) until `finishUsageRead(with:)` answers it
    /// with what the kernel had when it was read (a reading runs off the loop, beside the loads).
    public var holdUsageReads = false
    public private(set) var heldUsageReads = 0
    public var usageSaveError: EdgeError?
    public var usageRulesError: EdgeError?
    /// Loads of the usage table answered only by `completeUsageLoad()`, as a slow one on the enforcer's thread.
    public var usageLoadsAreManual = false
    public private(set) var pendingUsageLoads: [Input] = []
    /// Loads asked for quietly (`report` false): their answers are not the fake kernel's to choose.
    private var quietLoads: Set<UInt64> = []
    /// When set, `Effect.lookUpTables` and `Effect.runLoad` wait for `answerLookup(_:)` and `finishRun(...)`.
    public var tablesAreManual = false
    public private(set) var pendingLookups: [TableUpkeep.Lookup] = []
    public private(set) var pendingRuns: [(id: UInt64?, run: TableUpkeep.Run)] = []

    /// The processes whose exit the engine watches (`Effect.watchExit`), and those that have exited: a watch on one
    /// of these reports it at once, as pidfd_open's ESRCH does.
    public private(set) var watched: Set<Int32> = []
    public private(set) var exited: Set<Int32> = []

    public init(engine: Engine, accounts: AccountResolver) {
        driver = EngineDriver(engine: engine)
        self.accounts = accounts
        driver.edges = self
    }

    /// What breaks the world's rules (a timer cancelled that was not armed, a process watched twice, a completion
    /// with nothing pending): an XCTest failure for the harness, an invariant's crash for the fuzz target.
    open func fail(_ message: String) { preconditionFailure(message) }

    /// Where the kernel routes a REACH's destination (none: no route).
    open func route(_ question: RouteQuestion) -> Egress? { nil }

    public func feed(_ input: Input) { driver.feed(input) }

    /// The policy files, as `Effect.loadPolicy` reads them now.
    public func readPolicy() -> ConfigParseResult { Config.parse(files: policyFiles, accounts: accounts) }

    // MARK: - Effects

    open func carryOut(_ effects: Effects, of input: Input) {
        if case let .closed(id) = input { live[id] = nil }
        // An exit reported (also at once, for a process gone before its watch) ends that watch, as ExitWatch's does.
        if case let .exited(pid) = input { watched.remove(pid) }
        for e in effects.list { carryOut(e) }
    }

    /// One effect: the connection's state, the timers, and the input it leads to, if any. Lines sent (replies and
    /// events), notifications, log lines, unit naming and saved tags change nothing here: the subclass notes them.
    open func carryOut(_ e: Effect) {
        switch e {
        case .reply, .event, .notify, .log, .nameUnits, .saveTags:
            break
        case let .hold(id):
            // A flag, as in the transport: holding a held connection again changes nothing.
            connections[id]?.held = true
        case let .resume(id):
            connections[id]?.held = false
        case let .close(id):
            connections[id]?.closed = true
            connections[id]?.pending = []
            feed(.closed(id))
        case let .keepOpenAfterInputEnds(id):
            connections[id]?.keepsOpen = true
        case let .armTimer(id, usec):
            clock.arm(id, after: usec)
        case let .cancelTimer(id):
            if !clock.cancel(id) { fail("cancelled timer \(id) was not armed") }
        case let .persist(d):
            if storeIsManual {
                pendingStores.append(d)
            } else {
                if storeError == nil { persisted.append(d) }
                feed(.stored(error: storeError))
            }
        case .loadPolicy:
            let basis = engine.reloadBasis()
            if policyLoadIsManual { policyLoadBases.append(basis) } else { feed(policyRead(basis)) }
        case let .loadRules(id, _, report, _, _):
            if !report { quietLoads.insert(id) }
        case let .lookUpTables(lookup) where tablesAreManual:
            pendingLookups.append(lookup)
        case let .runLoad(id, run) where tablesAreManual:
            pendingRuns.append((id, run))
        case let .lookUpTables(lookup):
            // Every table there: every load runs, and is answered as asked.
            switch lookup {
            case .rules: feed(.tablesLookedUp(.tables(rules: true, handover: false)))
            case .usage: feed(.tablesLookedUp(.usage(true)))
            }
        case let .runLoad(id, run):
            ranLoad(id, run)
        case .loadAnswered, .followTables:
            break
        case .repairTablesSoon:
            feed(.tablesChanged(TablesChange(usage: false, at: clock.now, by: .duringOwnLoad)))
        case let .loadUnitElements(_, ids):
            if !ids.isEmpty { feed(.unitElementsLoaded(ids: ids, error: unitsError)) }
        case .readUsage:
            if holdUsageReads {
                heldUsageReads += 1
            } else {
                feed(.usageRead(usageReadError == nil ? usageReading : nil, error: usageReadError))
            }
        case .saveUsage:
            feed(.usageSaved(error: usageSaveError))
        case .saveReport, .removeReport:
            feed(.reportSaved(error: nil))
        case .watchReport:
            break
        case let .loadUsageRules(id, _, report, _):
            if !report { quietLoads.insert(id) }
        case let .watchExit(pid):
            if !watched.insert(pid).inserted { fail("pid \(pid) watched twice") }
            if exited.contains(pid) { feed(.exited(pid: pid)) }
        case let .unwatchExit(pid):
            if watched.remove(pid) == nil { fail("pid \(pid) unwatched but not watched") }
        case let .steer(step):
            feed(.steered(id: step.id, steerError.map { SteeringOutcome(error: $0) } ?? .done(step.action)))
        case let .lookUpRoute(id, question):
            feed(.routed(id, route(question), error: routeError))
        case .watchExecs:
            break
        case let .makeScope(request):
            if scopesAreManual { pendingScopes.append(request) } else { feed(.scopeMade(request, error: scopeError)) }
        case .scanCgroupsSoon:
            break
        case let .checkClaim(claim):
            claims.append(claim)
            if let claimPlace {
                feed(.execFound(ExecFound(pid: claim.pid, uid: claim.uid, app: claim.app, place: claimPlace, executable: nil)))
            }
        }
    }

    /// A load the engine runs, answered as it was asked for: a quiet one (its answer unheard) succeeds without taking
    /// an answer; a manual usage load waits for `completeUsageLoad()`, and the loads behind it with it, as on the
    /// enforcer's thread.
    private func ranLoad(_ id: UInt64?, _ run: TableUpkeep.Run) {
        let quiet = id.map { quietLoads.remove($0) != nil } ?? false
        if run.operation == .loadUsageRules {
            let ran = Input.loadRan(failure: quiet ? nil : usageRulesError, othersCommitted: false)
            if usageLoadsAreManual, !quiet { pendingUsageLoads.append(ran) } else { feed(ran) }
        } else {
            let failure = quiet ? nil : rulesAnswers.isEmpty ? rulesError : rulesAnswers.removeFirst()
            feed(.loadRan(failure: failure, othersCommitted: false))
        }
    }

    /// An event (or SUBSCRIBE's snapshot) of `seq` reached the connection: events count without a gap, the first
    /// snapshot being 1 (a second SUBSCRIBE's goes on).
    public func countEvent(_ seq: Int?, on c: Connection, _ line: String) {
        if seq != c.lastSeq + 1 { fail("seq \(seq.map(String.init) ?? "none") after \(c.lastSeq): \(line)") }
        c.lastSeq += 1
    }

    // MARK: - The transport

    /// A new connection of `identity`.
    @discardableResult
    public func openConnection(as identity: PeerIdentity) -> Connection {
        let c = Connection(id: nextConnection)
        nextConnection += 1
        connections[c.id] = c
        live[c.id] = c
        feed(.opened(c.id, identity))
        return c
    }

    /// The peer went: what it sent and was not taken is dropped.
    public func disconnect(_ id: ConnectionID) {
        connections[id]?.closed = true
        connections[id]?.pending = []
        feed(.closed(id))
    }

    /// An input from the connection (a request, another sender), taken as the transport would: now, or once the
    /// connection is no longer held and what came before it is taken. Nothing is taken from a closed connection.
    public func submit(_ input: Input, on id: ConnectionID) {
        guard let c = connections[id], !c.closed else { return }
        if c.held || !c.pending.isEmpty { c.pending.append(input) } else { handOver(input, from: c) }
    }

    /// The transport hands the connection's input to the engine.
    open func handOver(_ input: Input, from c: Connection) { feed(input) }

    /// Then, as the transport does, the requests of connections that are no longer held, one at a time, lowest
    /// connection first.
    open func drained() {
        guard !releasing else { return }
        releasing = true
        while let c = live.values.filter({ !$0.held && !$0.closed && !$0.pending.isEmpty }).min(by: { $0.id < $1.id }) {
            handOver(c.pending.removeFirst(), from: c)
        }
        releasing = false
    }

    // MARK: - The clock, the disk, the kernel

    /// Moves the clock, firing every timer that falls due, earliest first.
    public func advance(by microseconds: UInt64) {
        clock.advance(by: microseconds) { feed(.timer($0)) }
    }

    /// A process exits: the engine hears it if it watches it.
    public func exit(pid: Int32) {
        exited.insert(pid)
        guard watched.remove(pid) != nil else { return }
        feed(.exited(pid: pid))
    }

    /// The slow disk finishes the oldest pending write (successfully unless `error`).
    public func completeStore(error: EdgeError? = nil) {
        guard !pendingStores.isEmpty else { return fail("no store is pending") }
        let d = pendingStores.removeFirst()
        if error == nil { persisted.append(d) }
        feed(.stored(error: error))
    }

    /// One waiting policy load reads the files (as they are at this moment).
    public func completePolicyLoad() {
        guard !policyLoadBases.isEmpty else { return fail("no policy load is pending") }
        feed(policyRead(policyLoadBases.removeFirst()))
    }

    private func policyRead(_ basis: ReloadBasis) -> Input {
        let result = readPolicy()
        return .policy(result, prepared: preparesReloads ? basis.prepare(result) : nil)
    }

    /// The oldest usage load held (`usageLoadsAreManual`) is answered.
    public func completeUsageLoad() {
        guard !pendingUsageLoads.isEmpty else { return fail("no usage load is pending") }
        feed(pendingUsageLoads.removeFirst())
    }

    /// The kernel answers the oldest lookup held (`tablesAreManual`).
    public func answerLookup(_ answer: TableUpkeep.TableLookup) {
        guard !pendingLookups.isEmpty else { return fail("no lookup is pending") }
        pendingLookups.removeFirst()
        feed(.tablesLookedUp(answer))
    }

    /// The oldest run held (`tablesAreManual`) ends.
    public func finishRun(failure: EdgeError? = nil, othersCommitted: Bool = false) {
        guard !pendingRuns.isEmpty else { return fail("no run is pending") }
        pendingRuns.removeFirst()
        feed(.loadRan(failure: failure, othersCommitted: othersCommitted))
    }

    /// A reading held (`holdUsageReads`) is answered with `reading`.
    public func finishUsageRead(with reading: UsageReading?) {
        guard heldUsageReads > 0 else { return fail("no reading in flight") }
        heldUsageReads -= 1
        feed(.usageRead(reading, error: nil))
    }
}
