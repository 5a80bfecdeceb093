import NetpermCore
import XCTest

/// The engine driven as the daemon drives it, without any I/O: connections are ids that collect the lines sent
/// to them, timers fire when the test moves the clock, the decision store and the policy files are values the
/// test sets. Effects that produce inputs (persist, load the policy) feed them back in order, as the daemon does.
final class EngineHarness {
    /// What one connection has been sent, and how the engine left it.
    final class Connection {
        var lines: [String] = []
        /// Lines not yet taken by `take()`.
        var unread: [String] = []
        var held = false
        var closed = false
        var keepsOpen = false
    }

    let engine: Engine
    private let effects = Effects()
    private var queue: [Input] = []
    private var draining = false
    private(set) var connections: [ConnectionID: Connection] = [:]
    private var nextConnection: ConnectionID = 1

    /// Microseconds since the harness started; timers fire as `advance` passes their deadline.
    private(set) var now: UInt64 = 0
    private var timers: [TimerID: UInt64] = [:]

    /// What `Effect.persist` wrote, in order; set `storeError` to make the next writes fail.
    private(set) var persisted: [Decisions] = []
    var storeError: String?
    /// What `Effect.loadPolicy` reads.
    var policyFiles: [(path: String, text: String)] = []
    var accounts: AccountResolver

    private(set) var log: [(Priority, String)] = []
    private(set) var notifications: [NotifyMessage] = []

    init(policy: String = "", links: [Link] = [], agents: Bool = false, decisions: Decisions = Decisions(),
         settings: Engine.Settings = Engine.Settings(daemonUID: 0, logLevel: .debug),
         accounts: AccountResolver = FakeAccounts()) {
        self.accounts = accounts
        engine = Engine(settings: settings, accounts: accounts, decisions: decisions)
        policyFiles = [("/etc/netpermd/netpermd.conf", policy)]
        feed(.policy(Config.parse(files: policyFiles, accounts: accounts)))
        setLinks(links)
        feed(.started)
        if agents { _ = connectAgent() }
    }

    // MARK: - Inputs

    func feed(_ input: Input) {
        queue.append(input)
        guard !draining else { return }
        draining = true
        while !queue.isEmpty {
            let next = queue.removeFirst()
            effects.reset()
            engine.handle(next, into: effects)
            for e in effects.list { carryOut(e) }
        }
        draining = false
    }

    private func carryOut(_ e: Effect) {
        func text(_ r: Range<Int>) -> String { String(decoding: effects[r], as: UTF8.self) }
        switch e {
        case let .reply(id, r): deliver(id, text(r))
        case let .event(id, head, tail): deliver(id, text(head) + text(tail))
        case let .hold(id): connections[id]?.held = true
        case let .resume(id): connections[id]?.held = false
        case let .close(id):
            connections[id]?.closed = true
            queue.append(.closed(id))
        case let .keepOpenAfterInputEnds(id): connections[id]?.keepsOpen = true
        case let .armTimer(id, usec): timers[id] = now + usec
        case let .cancelTimer(id): timers[id] = nil
        case let .persist(d):
            if storeError == nil { persisted.append(d) }
            queue.append(.stored(error: storeError))
        case .loadPolicy: queue.append(.policy(Config.parse(files: policyFiles, accounts: accounts)))
        case let .notify(n): notifications.append(n)
        case let .log(p, m): log.append((p, m))
        }
    }

    /// Every line is one object and ends with a newline.
    private func deliver(_ id: ConnectionID, _ line: String) {
        XCTAssertTrue(line.hasSuffix("\n") && !line.dropLast().contains("\n"), "not one line: \(line)")
        let l = String(line.dropLast())
        connections[id]?.lines.append(l)
        connections[id]?.unread.append(l)
    }

    /// The kernel's picture becomes exactly these links.
    func setLinks(_ links: [Link]) {
        var snap = KernelSnapshot()
        for l in links {
            snap.links.append(LinkFacts(index: l.index, name: l.name, arphrd: 1, rtnlKind: nil, adminUp: l.adminUp,
                                        carrier: l.carrier, operstate: l.operstate))
            if let m = l.metric {
                snap.defaultRoutes.append(DefaultRouteFacts(index: l.index, family: l.defaultRouteV6 ? .ipv6 : .ipv4,
                                                            metric: m))
            }
            for a in l.addresses { snap.addresses.append(AddressFacts(index: l.index, family: .ipv4, text: a)) }
            snap.sysfs[l.index] = SysfsFacts(devtype: l.kind == .wifi ? "wlan" : l.kind == .wwan ? "wwan" : nil)
        }
        feed(.kernel(snap))
    }

    /// Moves the clock, firing every timer that falls due, earliest first.
    func advance(byMicroseconds usec: UInt64) {
        let until = now + usec
        while let (id, at) = timers.filter({ $0.value <= until }).min(by: { ($0.value, $0.key) < ($1.value, $1.key) }) {
            now = at
            timers[id] = nil
            feed(.timer(id))
        }
        now = until
    }

    var armedTimers: Int { timers.count }

    // MARK: - Connections

    @discardableResult
    func connect(_ identity: PeerIdentity = makePeer(uid: 0, exe: "/usr/bin/tester")) -> ConnectionID {
        let id = nextConnection
        nextConnection += 1
        connections[id] = Connection()
        feed(.opened(id, identity))
        return id
    }

    func disconnect(_ id: ConnectionID) {
        connections[id]?.closed = true
        feed(.closed(id))
    }

    /// Sends a request line; returns the lines the connection got meanwhile (its own reply, events...).
    @discardableResult
    func send(_ id: ConnectionID, _ line: String) -> [String] {
        feed(.line(id, Array(line.utf8)))
        return take(id)
    }

    /// The lines the connection got since the last look.
    func take(_ id: ConnectionID) -> [String] {
        let l = connections[id]?.unread ?? []
        connections[id]?.unread = []
        return l
    }

    /// One request, one reply (events sent meanwhile are left out; the reply is the one line without "event").
    func request(_ id: ConnectionID, _ line: String, file: StaticString = #filePath, line l: UInt = #line) -> JSON {
        let got = send(id, line).map(Self.parse)
        let replies = got.filter { $0["event"] == nil }
        XCTAssertEqual(replies.count, 1, "one reply to \(line): \(got)", file: file, line: l)
        return replies.last ?? .null
    }

    /// Subscribes and returns the acknowledgement and the snapshot.
    func subscribe(_ id: ConnectionID, _ topics: String = "") -> (ack: JSON, snapshot: JSON) {
        let got = send(id, "SUBSCRIBE \(topics)").map(Self.parse)
        XCTAssertEqual(got.count, 2, "acknowledgement and snapshot: \(got)")
        return (got.first ?? .null, got.last ?? .null)
    }

    /// A root agent: a privileged subscriber of prompts.
    func connectAgent() -> ConnectionID {
        let id = connect(makePeer(uid: 0, exe: "/usr/bin/netpermctl", pid: 99))
        _ = subscribe(id, "prompts")
        return id
    }

    /// Events among lines, parsed.
    static func events(_ lines: [String], named name: String? = nil) -> [JSON] {
        lines.map(parse).filter { $0["event"] != nil && (name == nil || $0["event"]?.stringValue == name) }
    }

    static func parse(_ line: String) -> JSON {
        do { return try JSONParser.parse(line) } catch {
            XCTFail("not JSON: \(line): \(error)")
            return .null
        }
    }

    func logged(containing text: String) -> [String] { log.map(\.1).filter { $0.contains(text) } }
}
