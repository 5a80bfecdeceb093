// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol
import TestSupport
import XCTest

/// The engine driven as the daemon drives it, without any I/O, in the world the fuzz target plays too
/// (`FakeWorld`, Tests/TestSupport): connections are ids that collect the lines sent to them, timers fire when the
/// test moves the clock, the decision store and the policy files are values the test sets. Effects that produce
/// inputs (persist, load the policy) feed them back in order, as the daemon does. Like the transport, it takes no
/// request from a held or closing connection: those wait until it is resumed.
final class EngineHarness: FakeWorld<HarnessConnection> {
    private(set) var log: [(Priority, String)] = []
    private(set) var notifications: [NotifyMessage] = []
    /// Every nft script the engine handed over, and what the fake kernel answers (`rulesAnswers`, `rulesError`).
    private(set) var rules: [String] = []
    /// What was actually run each time: the whole ruleset, or only what changed (`Ruleset.update(from:)`).
    private(set) var scripts: [String] = []
    /// Each load's transactions, in the order they run.
    private(set) var transactionLists: [[String]] = []
    /// When set, a usage table comes to exist once its rules are loaded (with this instance), as the kernel does.
    var usageTableInstance = "boot:1:1"
    /// Each usage book saved (`usageSaveError` unset).
    private(set) var usageSaves: [UsageBook] = []
    /// Each usage script the engine handed over (the removal included).
    private(set) var usageScripts: [String] = []
    /// Every effect in order, in words ("reply 3", "event 3 prompt", "persist", "notify reloading"...), for tests of
    /// what comes before what.
    private(set) var steps: [String] = []
    /// Every effect in order, whole (the bytes of lines, the decisions and plans in a fixed order): two engines fed
    /// the same inputs must write the same transcript.
    private(set) var transcript: [String] = []

    init(policy: String = "", links: [Link] = [], agents: Bool = false, decisions: Decisions = Decisions(),
         settings: Engine.Settings = Engine.Settings(daemonUID: 0, logLevel: .debug),
         accounts: AccountResolver = FakeAccounts(), started: Bool = true, usage: UsageBook = UsageBook(),
         usageReading: UsageReading? = nil, tags: TagTable = TagTable(), report: ReportBook = ReportBook(),
         reportFileExists: Bool = false) {
        super.init(engine: Engine(settings: settings, decisions: decisions, usage: usage, tags: tags, report: report,
                                  reportFileExists: reportFileExists), accounts: accounts)
        self.usageReading = usageReading
        policyFiles = [("/etc/netpermd/netpermd.conf", policy)]
        feed(.policy(readPolicy()))
        setLinks(links)
        if started { feed(.started) }
        if agents { _ = connectAgent() }
    }

    override func fail(_ message: String) { XCTFail(message) }

    override func route(_ question: RouteQuestion) -> Egress? { routes[question.destination] }

    // MARK: - Inputs

    override func carryOut(_ effects: Effects, of input: Input) {
        checkListeners()
        super.carryOut(effects, of: input)
    }

    /// The engine counts who listens to each app instead of passing over every session: after every input the
    /// count must equal the sessions' own word.
    private func checkListeners() {
        var counted: [TrackedApp: Int] = [:]
        for s in engine.clients.sessions.values { for app in s.listened { counted[app, default: 0] += 1 } }
        XCTAssertEqual(engine.clients.listeners, counted, "listener counts drifted from the sessions")
    }

    /// The tables' loads asked for and each step of them, in order ("ask 1 rules", "look-up rules", "run 1 rules 3",
    /// "answered 1", "follow rulesInForce", "repair-soon").
    var tableSteps: [String] = []

    /// Each `Effect.loadUnitElements`' changes, in order (answered with `unitsError`).
    var unitChanges: [ElementChanges] = []
    /// Each `Effect.nameUnits`' naming, in order.
    var namings: [UnitNaming?] = []

    /// Each `Effect.saveTags`' table, in order.
    var savedTags: [TagTable] = []

    /// Each `Effect.steer`'s plan, in order (nil: removal).
    var steering: [SteeringPlan?] = []

    /// The kernel's routes for REACH's lookups: a destination's egress (none: no route).
    var routes: [IPAddress: Egress] = [:]
    /// The report's effects, in order (`save-report FILE`, `remove-report`, `watch-report BOOL`).
    private(set) var reportEffects: [String] = []
    /// Each `Effect.lookUpRoute`'s question, in order.
    private(set) var routeQuestions: [RouteQuestion] = []

    /// Notes the effect (steps, transcript, what was loaded and saved), then the world carries it out.
    override func carryOut(_ e: Effect) {
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
        case let .hold(id): steps.append("hold \(id)")
        case let .resume(id): steps.append("resume \(id)")
        case let .close(id): steps.append("close \(id)")
        case let .keepOpenAfterInputEnds(id): steps.append("keep-open \(id)")
        case let .armTimer(id, usec): steps.append("arm \(id) \(usec)")
        case let .cancelTimer(id): steps.append("cancel \(id)")
        case .persist: steps.append("persist")
        case .loadPolicy: steps.append("load-policy")
        case let .notify(n):
            steps.append("notify \(n)")
            notifications.append(n)
        case let .log(p, m, _):
            steps.append("log \(p)")
            log.append((p, m))
        case let .loadRules(id, changes, report, inForce, _):
            let transactions = changes.map(\.text)
            tableSteps.append("ask \(id) rules\(report ? "" : " quietly")")
            steps.append(transactions == [Ruleset.removal] ? "remove-rules" : transactions == [inForce] ? "load-rules"
                         : "update-rules")
            rules.append(inForce)
            scripts.append(transactions.joined())
            transactionLists.append(transactions)
        case let .nameUnits(naming):
            steps.append("name-units-with \(naming.map { "\($0.generation)" } ?? "nothing")")
            namings.append(naming)
        case let .loadUnitElements(changes, ids):
            steps.append("name-units-again \(ids)")
            unitChanges.append(changes)
        case .readUsage: steps.append("read-usage")
        case let .saveUsage(book):
            steps.append("save-usage")
            if usageSaveError == nil { usageSaves.append(book) }
        case let .loadUsageRules(id, script, report, _):
            tableSteps.append("ask \(id) usage\(report ? "" : " quietly")")
            steps.append(script == UsageRules.removal ? "remove-usage" : "load-usage")
            usageScripts.append(script)
            if usageRulesError == nil { loadUsageTable(script) }
        case let .saveTags(table):
            savedTags.append(table)
        case let .watchExit(pid): steps.append("watch \(pid)")
        case let .unwatchExit(pid): steps.append("unwatch \(pid)")
        // A plan handed over; the steps that follow the kernel's changes only in the transcript.
        case let .steer(step) where !step.follows:
            steps.append(step.plan == nil ? "remove-steering" : "steer")
            steering.append(step.plan)
        case .steer: break
        case let .lookUpRoute(id, question):
            steps.append("route \(id)")
            routeQuestions.append(question)
        case .watchExecs:
            steps.append("watch-execs")
        case let .makeScope(request):
            steps.append("scope \(request.unit)")
        case let .checkClaim(c):
            steps.append("claim \(c.pid) \(c.app)")
        case .scanCgroupsSoon:
            steps.append("scan-cgroups")
        // The tables' upkeep after a load was asked for: apart from `steps`.
        case let .lookUpTables(lookup): tableSteps.append("look-up \(lookup)")
        case let .runLoad(id, run):
            tableSteps.append("run \(id.map(String.init) ?? "repair") \(run.operation == .loadUsageRules ? "usage" : "rules") "
                + "\(run.scripts.count)\(run.elements ? " elements" : "")")
        case let .loadAnswered(id, error): tableSteps.append("answered \(id)" + (error.map { " \($0)" } ?? ""))
        case let .followTables(watching): tableSteps.append("follow \(watching)")
        case .repairTablesSoon: tableSteps.append("repair-soon")
        // Kept apart from `steps`: the report's effects come only where a test turns it on.
        case let .saveReport(book): reportEffects.append("save-report " + book.encoded())
        case .removeReport: reportEffects.append("remove-report")
        case let .watchReport(on): reportEffects.append("watch-report \(on)")
        }
        super.carryOut(e)
    }

    /// The usage table as the kernel has it once a usage script ran: made (with `usageTableInstance`) or removed,
    /// and the quota objects the script leaves.
    private func loadUsageTable(_ script: String) {
        if script == UsageRules.removal {
            usageReading = nil
        } else if usageReading == nil {
            usageReading = UsageReading(instance: usageTableInstance)
        }
        guard script != UsageRules.removal, var r = usageReading else { return }
        for line in script.split(separator: "\n") {
            let w = line.split(separator: " ")
            // The kernel's quotas as the edge reads them: by the QuotaName their nft names spell.
            if w.count >= 5, w[0] == "delete", w[1] == "quota", let q = QuotaName(nft: String(w[4])) {
                r.quotas[q] = nil
                r.quotaUsed[q] = nil
            }
            // add quota inet netpermd_usage NAME { over LIMIT bytes used USED bytes }
            if w.count >= 12, w[0] == "add", w[1] == "quota", let q = QuotaName(nft: String(w[4])),
               let limit = UInt64(w[7]), let used = UInt64(w[10]) {
                r.quotas[q] = used >= limit
                r.quotaUsed[q] = used
            }
        }
        usageReading = r
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
        case let .steer(step):
            guard let plan = step.plan else { return "\(e)" }
            let sync: String
            switch step.action {
            case .install, .remove: sync = ""
            case .sync: sync = "sync "
            }
            return "steer \(step.follows ? "follow " : "")\(sync)\(plan.allowances.map(\.mark)) uids \(plan.uidMarks.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }) "
                + "cgroups \(plan.cgroupMarks.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" })"
        // The totals as the file has them (a dictionary prints in its own order).
        case let .saveUsage(book): return "save-usage " + book.encoded()
        case let .saveTags(table): return "save-tags " + table.encoded()
        case .hold, .resume, .close, .keepOpenAfterInputEnds, .armTimer, .cancelTimer, .loadPolicy, .notify, .log, .loadRules,
             .nameUnits, .loadUnitElements, .watchExit, .unwatchExit, .lookUpRoute,
             .readUsage, .loadUsageRules, .watchExecs, .makeScope, .checkClaim, .scanCgroupsSoon, .removeReport,
             .watchReport, .lookUpTables, .runLoad, .loadAnswered, .followTables, .repairTablesSoon:
            return "\(e)"
        case let .saveReport(book): return "save-report " + book.encoded()
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
            if let c = connections[id] { countEvent(seq, on: c, l) } else { XCTAssertEqual(seq, 1, "seq of \(l)") }
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
                                        rtnlKind: l.kind == .other ? "veth" : nil, adminUp: l.status.adminUp,
                                        carrier: l.status.carrier, operstate: l.status.operstate))
            if let m = l.metric {
                snap.defaultRoutes.append(DefaultRouteFacts(index: l.index, family: l.defaultRoute.ipv6 ? .ipv6 : .ipv4,
                                                            metric: m))
            }
            for a in l.addresses { snap.addresses.append(AddressFacts(index: l.index, family: .ipv4, text: a)) }
            snap.sysfs[l.index] = SysfsFacts(devtype: l.kind == .wifi ? "wlan" : l.kind == .wwan ? "wwan" : nil)
            if snap.wifi[l.index] == nil, l.wifi.ssid != nil || l.wifi.bssid != nil {
                snap.wifi[l.index] = WifiFacts(ssid: l.wifi.ssid, bssid: l.wifi.bssid)
            }
        }
        snap.egress = egress ?? simpleEgress(links)
        snap.resyncs = kernelResyncs
        feed(.kernel(snap))
    }

    func advance(byMicroseconds usec: UInt64) { advance(by: usec) }

    func advance(bySeconds s: UInt64) { advance(by: s * 1_000_000) }

    var armedTimers: Int { clock.armedCount }

    /// The policy files, then a reload as SIGHUP asks for it.
    func reload(policy: String) {
        policyFiles = [("/etc/netpermd/netpermd.conf", policy)]
        feed(.reload)
    }

    // MARK: - Connections

    @discardableResult
    func connect(_ identity: PeerIdentity = makePeer(uid: 0, exe: "/usr/bin/tester")) -> ConnectionID {
        openConnection(as: identity).id
    }

    /// The connection's next request comes from another process (the transport saw another sender). Like a
    /// request, it waits while the connection is held.
    func changeIdentity(_ id: ConnectionID, to identity: PeerIdentity) {
        _ = submit(id, .identityChanged(id, identity))
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
        submit(input, on: id)
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

/// What one connection has been sent, beside how the engine left it (held, closed, kept open).
final class HarnessConnection: FakeConnection {
    var lines: [String] = []
    /// Lines not yet taken by `EngineHarness.take(_:)`.
    var unread: [String] = []
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
