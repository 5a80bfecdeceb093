// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermControl
import NetpermCore
import NetpermDaemon
import NetpermHost
import NetpermIO
import NetpermPolicy
import NetpermPolicyFiles
import NetpermProtocol
import TestSupport
import XCTest

/// The daemon's interpreter and transport on a test loop, with fake edges: a real control socket in a directory
/// of its own and real clients of it (this test process, as root), the kernel's picture given by the test, the
/// rules and steering recorded instead of loaded, the service manager's messages and the log collected.
final class DaemonBed {
    let loop = TestLoop()
    let sockets: SocketBed
    let interpreter: Interpreter
    let server: ControlServer
    let rules = FakeRules()
    let steering = FakeSteering()
    private let notes = Notes()
    /// The service manager's messages so far.
    var notifications: [NotifyMessage] { notes.all }
    private(set) var log: [String] = []

    final class Notes { var all: [NotifyMessage] = [] }

    /// Where the decisions go when the test gives no store of its own.
    var stateDir: String { sockets.directory + "/state" }
    var policyPath: String { sockets.directory + "/netpermd.conf" }

    static let policy = """
    [Defaults]
    Ethernet=ask

    [App updater]
    User=4242
    Ethernet=deny

    [App backup]
    User=4243
    """

    /// `loadPolicy`: how a reload reads the policy at its path (by default as the daemon does). `started: false`
    /// holds the engine before its `started` input, as the daemon is before its loop serves anyone.
    init(policy: String = DaemonBed.policy, links: [LinkFacts] = [DaemonBed.eth], store: DecisionSaving? = nil,
         loadPolicy: (@Sendable (String) -> ConfigParseResult)? = nil, started: Bool = true) throws {
        sockets = try SocketBed(loop: loop, prefix: "npt-daemon")
        let dir = sockets.directory
        try AtomicFile.write(dir + "/netpermd.conf", policy)
        let path = dir + "/netpermd.conf"
        let load: @Sendable (String) -> ConfigParseResult = loadPolicy ?? {
            ConfigFiles.load($0, required: true, accounts: NoAccounts())
        }
        let read: @Sendable () -> ConfigParseResult = { load(path) }
        let engine = Engine(settings: .init(daemonUID: geteuid(), logLevel: .debug))
        let notes = self.notes
        // No sysfs, /proc or /run of its own: every link's facts come from netlink alone.
        interpreter = Interpreter(engine: engine, loop: loop, store: store ?? DecisionStore(stateDir: dir + "/state"),
                                  sysfs: Sysfs(root: dir + "/none", proc: dir + "/none", run: dir + "/none"),
                                  rules: rules, steering: steering, notify: { notes.all.append($0) }, loadPolicy: read)
        server = try ControlServer(loop: loop, listenFD: try sockets.listen(), limits: ControlServer.Limits(),
                                   delegate: interpreter)
        interpreter.server = server
        Log.sink = { [unowned self] line in self.log.append(line) }
        interpreter.feed(.policy(read()))
        setLinks(links)
        if started { interpreter.feed(.started) }
    }

    func close() {
        server.closeAll()
        sockets.close()
        Log.sink = { Output.write(STDERR_FILENO, $0) }
    }

    static let eth = LinkFacts(index: 2, name: "eth0", arphrd: ARPHRD.ether, rtnlKind: nil, adminUp: true, carrier: true,
                               operstate: "up")

    /// The kernel's picture becomes these links, each routed (IPv4) by its own default route.
    func setLinks(_ links: [LinkFacts]) {
        var s = KernelSnapshot(links: links)
        s.defaultRoutes = links.map { DefaultRouteFacts(index: $0.index, family: .ipv4, metric: 100) }
        if let first = links.first { s.egress = [.ipv4: .link(first.index)] }
        interpreter.kernelChanged(s)
    }

    /// A client, accepted.
    func connect() throws -> Int32 {
        let before = server.clientCount
        let fd = try sockets.connect()
        XCTAssertTrue(loop.run(until: { server.clientCount > before }), "accepted")
        return fd
    }

    func send(_ fd: Int32, _ text: String) throws { try sockets.write(fd, text + "\n") }

    /// The next `count` lines the client gets, parsed.
    func lines(_ fd: Int32, _ count: Int = 1, timeout: Double = 5) -> [JSON] {
        sockets.readLines(fd, count: count, timeout: timeout).map { (try? JSONParser.parse($0)) ?? .string($0) }
    }

    /// One request, its one reply.
    func request(_ fd: Int32, _ line: String) throws -> JSON {
        try send(fd, line)
        return lines(fd).first ?? .null
    }

    func logged(_ text: String) -> [String] { log.filter { $0.contains(text) } }
}

/// Enforcement's edge, recording the scripts instead of running them.
final class FakeRules: RuleLoading {
    /// The rules' transactions of each load the engine asked for, in order.
    var loaded: [[String]] = []
    var answer: EdgeError?
    /// Answers for the next runs of the rules, in turn, before `answer`.
    var answers: [EdgeError?] = []
    /// Called inside each run of the rules (what else happens meanwhile: a cgroup going); what it returns, if
    /// anything, is the answer (the kernel refusing what those transactions name).
    var during: ([String]) -> EdgeError? = { _ in nil }
    var changed: (TablesChange) -> Void = { _ in }
    var blocked: (String, PolicyDimension, UInt32?, Int32?, String?, Bool) -> Void = { _, _, _, _, _, _ in }
    /// While true, runs are not answered until `finish()`: a load in flight, as a slow one is on its thread.
    var holding = false
    /// The answers of runs in flight, in order.
    private var inFlight: [() -> Void] = []
    var pending: Int { inFlight.count }
    /// Each run, as the engine handed it out (a repair's too).
    var runs: [TableUpkeep.Run] = []
    /// What follows the tables, as the engine said, in order; the repairs asked for soon.
    var watching: [TableUpkeep.Watching] = []
    var repairsSoon = 0

    func asked(_ transactions: [RuleTransaction], usage: Bool) {
        if usage { usageScripts.append(transactions.map(\.text).joined()) } else { loaded.append(transactions.map(\.text)) }
    }

    /// Every table there: every load runs.
    func lookUp(_ lookup: TableUpkeep.Lookup) -> TableUpkeep.TableLookup {
        switch lookup {
        case .rules: return .tables(rules: true, handover: false)
        case .usage: return .usage(true)
        }
    }

    func run(_ run: TableUpkeep.Run, done: @escaping (EdgeError?, Bool) -> Void) {
        runs.append(run)
        let answer: EdgeError?
        if run.operation == .loadUsageRules {
            answer = self.answer
        } else {
            answer = during(run.scripts.map(\.text)) ?? (answers.isEmpty ? self.answer : answers.removeFirst())
        }
        if holding { inFlight.append { done(answer, false) } } else { done(answer, false) }
    }

    func follow(_ watching: TableUpkeep.Watching) { self.watching.append(watching) }
    func repairSoon() { repairsSoon += 1 }

    /// Ends the oldest run in flight, as its thread would: its answer comes on the loop.
    func finish() { inFlight.removeFirst()() }
    /// The usage table's scripts.
    var usageScripts: [String] = []
    var quotaReached: (QuotaName) -> Void = { _ in }
    /// The units' element changes (UnitLane), answered at once with `unitAnswer`.
    var unitChanges: [ElementChanges] = []
    var unitAnswer: EdgeError?
    func loadUnitElements(_ changes: ElementChanges, done: @escaping (EdgeError?) -> Void) {
        unitChanges.append(changes)
        done(unitAnswer)
    }
    func alsoCommitting(port: UInt32, commits: @escaping () -> (started: UInt32, finished: UInt32)) {}
}

/// Steering's edge, recording the plans.
final class FakeSteering: SteeringLoading {
    var plans: [SteeringPlan?] = []
    /// Each step carried out, in order.
    var steps: [SteeringStep.Action] = []
    /// A plan installed or removed; syncs only in `steps`.
    func carryOut(_ action: SteeringStep.Action) -> SteeringOutcome {
        steps.append(action)
        switch action {
        case let .install(i): plans.append(i.plan)
        case .remove: plans.append(nil)
        case .sync: break
        }
        return .done(action)
    }
}

/// A pipe a job on another thread waits on (at most `bound` seconds, so a test that breaks never hangs), and the
/// test opens.
final class Gate: @unchecked Sendable {
    private let fds: [Int32]
    init() {
        var p: [Int32] = [0, 0]
        precondition(pipe(&p) == 0)
        fds = p
    }
    deinit { for fd in fds { close(fd) } }

    func open() {
        var one: UInt8 = 1
        _ = Glibc.write(fds[1], &one, 1)
    }

    /// Whether it was opened before `bound` seconds passed.
    @discardableResult
    func wait(bound: Double = 3) -> Bool {
        var p = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, Int32(bound * 1000)) == 1
    }
}
