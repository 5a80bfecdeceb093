// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol
import TestSupport
import XCTest

/// The engine driven as the daemon drives it, without any I/O: connections are ids that collect the lines sent
/// to them, timers fire when the test moves the clock, the decision store and the policy files are values the
/// test sets. Effects that produce inputs (persist, load the policy) feed them back in order, as the daemon does.
/// Like the transport, it takes no request from a held or closing connection: those wait until it is resumed.
final class EngineHarness: EngineEdges {
    /// What one connection has been sent, and how the engine left it.
    final class Connection {
        var lines: [String] = []
        /// Lines not yet taken by `take()`.
        var unread: [String] = []
        var held = false
        var closed = false
        var keepsOpen = false
        /// Requests the transport has framed but not handed over (the connection is held).
        var pending: [Input] = []
        /// The `seq` of the last event, to check there is no gap.
        var lastSeq: Int?
    }

    var engine: Engine { driver.engine }
    private let driver: EngineDriver
    private var effects: Effects { driver.effects }
    /// Requests of connections no longer held are being fed.
    private var releasing = false
    private(set) var connections: [ConnectionID: Connection] = [:]
    private var nextConnection: ConnectionID = 1

    /// Timers fire as `advance` passes their deadline.
    private let clock = FakeClock<TimerID>()

    /// What `Effect.persist` wrote, in order; set `storeError` to make the next writes fail.
    private(set) var persisted: [Decisions] = []
    var storeError: String?
    /// When set, `Effect.persist` waits for `completeStore()` (a slow disk), so inputs can come in between.
    var storeIsManual = false
    private(set) var pendingStores: [Decisions] = []
    /// What `Effect.loadPolicy` reads.
    var policyFiles: [(path: String, text: String)] = []
    /// When set, `Effect.loadPolicy` waits for `completePolicyLoad()`.
    var policyLoadIsManual = false
    private(set) var pendingPolicyLoads = 0
    /// Loads of the usage table answered only by `completeUsageLoad()`, as a slow one on the enforcer's thread.
    var usageLoadsAreManual = false
    private(set) var pendingUsageLoads: [Input] = []
    var accounts: AccountResolver

    private(set) var log: [(Priority, String)] = []
    private(set) var notifications: [NotifyMessage] = []
    /// Every nft script the engine handed over, and what the fake kernel answers (nil: loaded).
    private(set) var rules: [String] = []
    /// What was actually run each time: the whole ruleset, or only what changed (`Ruleset.update(from:)`).
    private(set) var scripts: [String] = []
    /// Each load's transactions, in the order they run.
    private(set) var transactionLists: [[String]] = []
    var rulesError: String?
    /// Answers for the next loads of the rules, in turn, before `rulesError`.
    var rulesAnswers: [String?] = []
    /// The usage table as the fake kernel has it (nil: none): what `Effect.readUsage` reads, or `usageReadError`.
    var usageReading: UsageReading?
    /// While true, a reading begun is left in flight (`heldUsageReads`) until `finishUsageRead(with:)` answers it
    /// with what the kernel had when it was read (a reading runs off the loop, beside the loads).
    var holdUsageReads = false
    private(set) var heldUsageReads = 0

    func finishUsageRead(with reading: UsageReading?) {
        guard heldUsageReads > 0 else { return XCTFail("no reading in flight") }
        heldUsageReads -= 1
        feed(.usageRead(reading, error: nil))
    }
    var usageReadError: String?
    /// When set, a usage table comes to exist once its rules are loaded (with this instance), as the kernel does.
    var usageTableInstance = "boot:1:1"
    /// Each usage book saved, and the next save's error.
    private(set) var usageSaves: [UsageBook] = []
    var usageSaveError: String?
    /// Each usage script the engine handed over (the removal included), and what the kernel answers.
    private(set) var usageScripts: [String] = []
    var usageRulesError: String?
    /// Every effect in order, in words ("reply 3", "event 3 prompt", "persist", "notify reloading"...), for tests of
    /// what comes before what.
    private(set) var steps: [String] = []
    /// Every effect in order, whole (the bytes of lines, the decisions and plans in a fixed order): two engines fed
    /// the same inputs must write the same transcript.
    private(set) var transcript: [String] = []

    init(policy: String = "", links: [Link] = [], agents: Bool = false, decisions: Decisions = Decisions(),
         settings: Engine.Settings = Engine.Settings(daemonUID: 0, logLevel: .debug),
         accounts: AccountResolver = FakeAccounts(), started: Bool = true, usage: UsageBook = UsageBook(),
         usageReading: UsageReading? = nil, tags: TagTable = TagTable()) {
        self.accounts = accounts
        self.usageReading = usageReading
        driver = EngineDriver(engine: Engine(settings: settings, decisions: decisions, usage: usage, tags: tags))
        driver.edges = self
        policyFiles = [("/etc/netpermd/netpermd.conf", policy)]
        feed(.policy(Config.parse(files: policyFiles, accounts: accounts)))
        setLinks(links)
        if started { feed(.started) }
        if agents { _ = connectAgent() }
    }

    // MARK: - Inputs

    func feed(_ input: Input) { driver.feed(input) }

    func carryOut(_ effects: Effects, of input: Input) {
        checkListeners()
        for e in effects.list { carryOut(e) }
    }

    /// Then, as the transport does, the requests of connections that are no longer held, one at a time.
    func drained() {
        guard !releasing else { return }
        releasing = true
        while let c = connections.sorted(by: { $0.key < $1.key }).map(\.value)
            .first(where: { !$0.held && !$0.closed && !$0.pending.isEmpty }) {
            feed(c.pending.removeFirst())
        }
        releasing = false
    }

    /// The engine counts who listens to each app instead of passing over every session: after every input the
    /// count must equal the sessions' own word.
    private func checkListeners() {
        var counted: [TrackedApp: Int] = [:]
        for s in engine.sessions.values { for app in s.listened { counted[app, default: 0] += 1 } }
        XCTAssertEqual(engine.listeners, counted, "listener counts drifted from the sessions")
    }

    /// Each `Effect.loadUnitElements`' changes, in order, and what they are answered with.
    var unitChanges: [ElementChanges] = []
    var unitsError: String?
    /// Each `Effect.nameUnits`' naming, in order.
    var namings: [UnitNaming?] = []

    /// Each `Effect.saveTags`' table, in order.
    var savedTags: [TagTable] = []

    /// Each `Effect.steer`'s plan, in order (nil: removal).
    var steering: [SteeringPlan?] = []

    /// The kernel's routes for REACH's lookups: a destination's egress (none: no route).
    var routes: [IPAddress: Egress] = [:]
    /// Each `Effect.lookUpRoute`'s question, in order.
    private(set) var routeQuestions: [RouteQuestion] = []

    private func carryOut(_ e: Effect) {
        func text(_ r: Range<Int>) -> String { String(decoding: effects[r], as: UTF8.self) }
        transcript.append(Self.render(e, effects))
        switch e {
        case let .reply(id, r):
            steps.append("reply \(id)")
            deliver(id, text(r))
        case let .event(id, head, tail):
            let line = text(head) + text(tail)
            steps.append("event \(id) \(Self.parse(String(line.dropLast()))["event"]?.stringValue ?? "?")")
            deliver(id, line)
        case let .hold(id):
            steps.append("hold \(id)")
            connections[id]?.held = true
        case let .resume(id):
            steps.append("resume \(id)")
            connections[id]?.held = false
        case let .close(id):
            steps.append("close \(id)")
            connections[id]?.closed = true
            connections[id]?.pending = []
            feed(.closed(id))
        case let .keepOpenAfterInputEnds(id):
            steps.append("keep-open \(id)")
            connections[id]?.keepsOpen = true
        case let .armTimer(id, usec):
            steps.append("arm \(id) \(usec)")
            clock.arm(id, after: usec)
        case let .cancelTimer(id):
            steps.append("cancel \(id)")
            XCTAssertTrue(clock.cancel(id), "cancelled timer \(id) was not armed")
        case let .persist(d):
            steps.append("persist")
            if storeIsManual {
                pendingStores.append(d)
            } else {
                if storeError == nil { persisted.append(d) }
                feed(.stored(error: storeError))
            }
        case .loadPolicy:
            steps.append("load-policy")
            if policyLoadIsManual {
                pendingPolicyLoads += 1
            } else {
                feed(.policy(Config.parse(files: policyFiles, accounts: accounts)))
            }
        case let .notify(n):
            steps.append("notify \(n)")
            notifications.append(n)
        case let .log(p, m, _):
            steps.append("log \(p)")
            log.append((p, m))
        case let .loadRules(changes, report, inForce, _):
            let transactions = changes.map(\.text)
            steps.append(transactions == [Ruleset.removal] ? "remove-rules" : transactions == [inForce] ? "load-rules"
                         : "update-rules")
            rules.append(inForce)
            scripts.append(transactions.joined())
            transactionLists.append(transactions)
            if report { feed(.rulesLoaded(error: rulesAnswers.isEmpty ? rulesError : rulesAnswers.removeFirst())) }
        case let .nameUnits(naming):
            steps.append("name-units-with \(naming.map { "\($0.generation)" } ?? "nothing")")
            namings.append(naming)
        case let .loadUnitElements(changes, ids):
            steps.append("name-units-again \(ids)")
            unitChanges.append(changes)
            if !ids.isEmpty { feed(.unitElementsLoaded(ids: ids, error: unitsError)) }
        case .readUsage:
            steps.append("read-usage")
            if holdUsageReads { heldUsageReads += 1 }
            else { feed(.usageRead(usageReadError == nil ? usageReading : nil, error: usageReadError)) }
        case let .saveUsage(book):
            steps.append("save-usage")
            if usageSaveError == nil { usageSaves.append(book) }
            feed(.usageSaved(error: usageSaveError))
        case let .loadUsageRules(script, report, _):
            steps.append(script == UsageRules.removal ? "remove-usage" : "load-usage")
            usageScripts.append(script)
            if usageRulesError == nil {
                if script == UsageRules.removal {
                    usageReading = nil
                } else if usageReading == nil {
                    usageReading = UsageReading(instance: usageTableInstance)
                }
                if script != UsageRules.removal, var r = usageReading {
                    // The quota objects the script leaves, as the kernel would.
                    for line in script.split(separator: "\n") {
                        let w = line.split(separator: " ")
                        if w.count >= 5, w[0] == "delete", w[1] == "quota" {
                            r.quotas[String(w[4])] = nil
                            r.quotaUsed[String(w[4])] = nil
                        }
                        // add quota inet netpermd_usage NAME { over LIMIT bytes used USED bytes }
                        if w.count >= 12, w[0] == "add", w[1] == "quota", let limit = UInt64(w[7]), let used = UInt64(w[10]) {
                            r.quotas[String(w[4])] = used >= limit
                            r.quotaUsed[String(w[4])] = used
                        }
                    }
                    usageReading = r
                }
            }
            if report {
                if usageLoadsAreManual { pendingUsageLoads.append(.usageRulesLoaded(error: usageRulesError)) }
                else { feed(.usageRulesLoaded(error: usageRulesError)) }
            }
        case let .saveTags(table):
            savedTags.append(table)
        case let .watchExit(pid):
            steps.append("watch \(pid)")
            XCTAssertFalse(watched.contains(pid), "pid \(pid) watched twice")
            watched.insert(pid)
            if exitedProcesses.contains(pid) { feed(.exited(pid: pid)) }
        case let .unwatchExit(pid):
            steps.append("unwatch \(pid)")
            XCTAssertNotNil(watched.remove(pid), "pid \(pid) was not watched")
        case let .steer(plan):
            steps.append(plan == nil ? "remove-steering" : "steer")
            steering.append(plan)
            feed(.steered(error: nil))
        case let .lookUpRoute(id, question):
            steps.append("route \(id)")
            routeQuestions.append(question)
            feed(.routed(id, routes[question.destination], error: nil))
        }
    }

    /// One effect as the transcript has it.
    static func render(_ e: Effect, _ fx: Effects) -> String {
        func text(_ r: Range<Int>) -> String { String(decoding: fx[r], as: UTF8.self) }
        switch e {
        case let .reply(id, r): return "reply \(id) " + text(r)
        case let .event(id, head, tail): return "event \(id) " + text(head) + text(tail)
        case let .persist(d):
            let once = d.once.keys.sorted().flatMap { app in
                d.once[app]!.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\(app) \($0.key.rawValue) \($0.value.rawValue)" }
            }
            return "persist " + d.encoded() + " once " + once.joined(separator: ", ")
        case let .steer(plan?):
            return "steer \(plan.allowances.map(\.mark)) uids \(plan.uidMarks.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }) "
                + "cgroups \(plan.cgroupMarks.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" })"
        // The totals as the file has them (a dictionary prints in its own order).
        case let .saveUsage(book): return "save-usage " + book.encoded()
        case let .saveTags(table): return "save-tags " + table.encoded()
        case .hold, .resume, .close, .keepOpenAfterInputEnds, .armTimer, .cancelTimer, .loadPolicy, .notify, .log, .loadRules,
             .nameUnits, .loadUnitElements, .watchExit, .unwatchExit, .lookUpRoute,
             .steer(nil), .readUsage, .loadUsageRules:
            return "\(e)"
        }
    }

    /// Every line is one JSON object and ends with a newline; an event starts with `event` and `seq`, and `seq`
    /// counts the connection's events without a gap (the first snapshot is 1; a second SUBSCRIBE's goes on).
    private func deliver(_ id: ConnectionID, _ line: String) {
        XCTAssertTrue(line.hasSuffix("\n") && !line.dropLast().contains("\n"), "not one line: \(line)")
        let l = String(line.dropLast())
        let json = Self.parse(l)
        guard case let .object(members) = json else { return XCTFail("not an object: \(l)") }
        if members.first?.0 == "event" {
            XCTAssertEqual(members.count >= 2 ? members[1].0 : nil, "seq", "seq second: \(l)")
            let seq = members.count >= 2 ? members[1].1.intValue : nil
            let expected = (connections[id]?.lastSeq ?? 0) + 1
            XCTAssertEqual(seq, expected, "seq of \(l)")
            connections[id]?.lastSeq = seq
        } else {
            XCTAssertFalse(members.contains { $0.0 == "event" }, "a reply with an event member: \(l)")
            XCTAssertEqual(members.first?.0, "ok", "a reply starts with ok: \(l)")
        }
        connections[id]?.lines.append(l)
        connections[id]?.unread.append(l)
    }

    /// The kernel's picture becomes exactly these links (their kind comes back from classification: wifi and wwan
    /// by sysfs devtype, loopback and other by link type and rtnl kind, the rest Ethernet). The kernel routes each
    /// family as `NetworkState(routedLinks:)` says, unless `egress` says otherwise (rules, route types).
    /// What the next `setLinks` reports as the kernel's resync count (bump it to play a netlink overrun).
    var kernelResyncs = 0

    /// `wifi`: what nl80211 says of the Wi-Fi links (their network), by ifindex.
    /// `managed` and `modems`: what NetworkManager and ModemManager say, by link name.
    func setLinks(_ links: [Link], egress: [AddressFamily: Egress]? = nil, wifi: [Int32: WifiFacts] = [:],
                  markedEgress: [UInt32: [AddressFamily: Egress]] = [:], managed: [String: NetworkManagerDevice] = [:],
                  modems: [String: ModemRegistration] = [:]) {
        var snap = KernelSnapshot()
        snap.wifi = wifi
        snap.managed = managed
        snap.modems = modems
        snap.markedEgress = markedEgress
        for l in links {
            let arphrd = l.kind == .loopback ? ARPHRD.loopback : ARPHRD.ether
            snap.links.append(LinkFacts(index: l.index, name: l.name, arphrd: arphrd,
                                        rtnlKind: l.kind == .other ? "veth" : nil, adminUp: l.adminUp,
                                        carrier: l.carrier, operstate: l.operstate))
            if let m = l.metric {
                snap.defaultRoutes.append(DefaultRouteFacts(index: l.index, family: l.defaultRouteV6 ? .ipv6 : .ipv4,
                                                            metric: m))
            }
            for a in l.addresses { snap.addresses.append(AddressFacts(index: l.index, family: .ipv4, text: a)) }
            snap.sysfs[l.index] = SysfsFacts(devtype: l.kind == .wifi ? "wlan" : l.kind == .wwan ? "wwan" : nil)
            if snap.wifi[l.index] == nil, l.ssid != nil || l.bssid != nil {
                snap.wifi[l.index] = WifiFacts(ssid: l.ssid, bssid: l.bssid)
            }
        }
        snap.egress = egress ?? simpleEgress(links)
        snap.resyncs = kernelResyncs
        feed(.kernel(snap))
    }

    /// The processes whose exit the engine watches (`Effect.watchExit`), and those that have exited: a watch on one
    /// of these reports it at once, as pidfd_open's ESRCH does.
    private(set) var watched: Set<Int32> = []
    private var exitedProcesses: Set<Int32> = []

    /// A process exits: the engine hears it if it watches it.
    func exit(pid: Int32) {
        exitedProcesses.insert(pid)
        guard watched.remove(pid) != nil else { return }
        feed(.exited(pid: pid))
    }

    /// Moves the clock, firing every timer that falls due, earliest first.
    func advance(byMicroseconds usec: UInt64) {
        clock.advance(by: usec) { feed(.timer($0)) }
    }

    func advance(bySeconds s: UInt64) { advance(byMicroseconds: s * 1_000_000) }

    var armedTimers: Int { clock.armedCount }

    /// The slow disk finishes the oldest pending write (successfully unless `error`).
    func completeStore(error: String? = nil) {
        guard !pendingStores.isEmpty else { return XCTFail("no store is pending") }
        let d = pendingStores.removeFirst()
        if error == nil { persisted.append(d) }
        feed(.stored(error: error))
    }

    /// The policy files are read now (as they are at this moment).
    /// The oldest usage load held (`usageLoadsAreManual`) is answered.
    func completeUsageLoad() {
        guard !pendingUsageLoads.isEmpty else { return XCTFail("no usage load is pending") }
        feed(pendingUsageLoads.removeFirst())
    }

    func completePolicyLoad() {
        guard pendingPolicyLoads > 0 else { return XCTFail("no policy load is pending") }
        pendingPolicyLoads -= 1
        feed(.policy(Config.parse(files: policyFiles, accounts: accounts)))
    }

    /// The policy files, then a reload as SIGHUP asks for it.
    func reload(policy: String) {
        policyFiles = [("/etc/netpermd/netpermd.conf", policy)]
        feed(.reload)
    }

    // MARK: - Connections

    @discardableResult
    func connect(_ identity: PeerIdentity = makePeer(uid: 0, exe: "/usr/bin/tester")) -> ConnectionID {
        let id = nextConnection
        nextConnection += 1
        connections[id] = Connection()
        feed(.opened(id, identity))
        return id
    }

    /// The connection's next request comes from another process (the transport saw another sender). Like a
    /// request, it waits while the connection is held.
    func changeIdentity(_ id: ConnectionID, to identity: PeerIdentity) {
        _ = submit(id, .identityChanged(id, identity))
    }

    func disconnect(_ id: ConnectionID) {
        connections[id]?.closed = true
        connections[id]?.pending = []
        feed(.closed(id))
    }

    /// Sends a request line; returns the lines the connection got meanwhile (its own reply, events...).
    @discardableResult
    func send(_ id: ConnectionID, _ line: String) -> [String] {
        sendBytes(id, Array(line.utf8))
    }

    /// Sends raw bytes as one line (the framer has already taken off the newline).
    @discardableResult
    func sendBytes(_ id: ConnectionID, _ bytes: [UInt8]) -> [String] {
        submit(id, .line(id, bytes))
    }

    /// The transport discarded an over-long line.
    @discardableResult
    func sendTooLong(_ id: ConnectionID) -> [String] { submit(id, .lineTooLong(id)) }

    private func submit(_ id: ConnectionID, _ input: Input) -> [String] {
        guard let c = connections[id], !c.closed else { return [] }
        if c.held || !c.pending.isEmpty {
            c.pending.append(input)
        } else {
            feed(input)
        }
        return take(id)
    }

    /// The lines the connection got since the last look.
    func take(_ id: ConnectionID) -> [String] {
        let l = connections[id]?.unread ?? []
        connections[id]?.unread = []
        return l
    }

    /// What the connection got since the last look, parsed.
    func takeParsed(_ id: ConnectionID) -> [JSON] { take(id).map(Self.parse) }

    /// Events the connection got since the last look (replies are dropped).
    func takeEvents(_ id: ConnectionID, named name: String? = nil) -> [JSON] { Self.events(take(id), named: name) }

    /// One request, one reply (events sent meanwhile are left out; the reply is the one line without "event").
    func request(_ id: ConnectionID, _ line: String, file: StaticString = #filePath, line l: UInt = #line) -> JSON {
        let got = send(id, line).map(Self.parse)
        let replies = got.filter { $0["event"] == nil }
        XCTAssertEqual(replies.count, 1, "one reply to \(line): \(got)", file: file, line: l)
        return replies.last ?? .null
    }

    /// A request that must fail with `code`; returns its message.
    @discardableResult
    func requestError(_ id: ConnectionID, _ line: String, _ code: ErrorCode,
                      file: StaticString = #filePath, line l: UInt = #line) -> String {
        let r = request(id, line, file: file, line: l)
        XCTAssertEqual(r["ok"], false, "\(line): \(r.encoded())", file: file, line: l)
        XCTAssertEqual(r["error"], .string(code.rawValue), "\(line): \(r.encoded())", file: file, line: l)
        let message = r["message"]?.stringValue
        XCTAssertNotNil(message, "\(line): no message", file: file, line: l)
        return message ?? ""
    }

    /// Subscribes and returns the acknowledgement and the snapshot.
    func subscribe(_ id: ConnectionID, _ topics: String = "", file: StaticString = #filePath,
                   line: UInt = #line) -> (ack: JSON, snapshot: JSON) {
        let got = send(id, "SUBSCRIBE \(topics)").map(Self.parse)
        XCTAssertEqual(got.count, 2, "acknowledgement and snapshot: \(got)", file: file, line: line)
        return (got.first ?? .null, got.last ?? .null)
    }

    /// A root agent: a privileged subscriber of prompts.
    func connectAgent(pid: Int32 = 99) -> ConnectionID {
        let id = connect(makePeer(uid: 0, exe: "/usr/bin/netpermctl", pid: pid))
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

    /// The STATUS= texts sent, READY=1's included, in order.
    var statusTexts: [String] {
        notifications.compactMap {
            switch $0 {
            case let .ready(s), let .status(s): return s
            case .reloading, .stopping: return nil
            }
        }
    }
}

/// Accounts that count the lookups, to show which are made and when.
final class CountingAccounts: AccountResolver {
    var base = FakeAccounts()
    private(set) var groupLookups: [String] = []
    func uid(forUser name: String) -> UInt32? { base.uid(forUser: name) }
    func gid(forGroup name: String) -> UInt32? {
        groupLookups.append(name)
        return base.gid(forGroup: name)
    }
}

extension JSON {
    /// An object's keys in order ([] for anything else).
    var keys: [String] {
        if case let .object(m) = self { return m.map(\.0) }
        return []
    }
}
