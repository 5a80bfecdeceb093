// SPDX-License-Identifier: LGPL-2.1-or-later
// The request parser with the engine behind it. The input is a script, one line per step: a line that starts
// with a connection digit 0-3 sends the rest of the line (one space after the digit dropped) as a request on that
// connection; a line starting with a letter below is a step of the world around the engine; any other line is a
// request on connection 0. The harness plays the transport (no request is taken from a held or closed
// connection), the clock, the decision store and the policy files, with the engine tests' harness (FakeWorld in
// Tests/TestSupport), and checks every effect as it comes.
//
//   o<slot><peer>   reopen a slot as a new connection of peer 0-6       c<slot>   close it
//   i<slot><peer>   the slot's next requests come from peer 0-6 (a child that inherited the socket)
//   t<seconds>      move the clock (timers fire in order)               L<slot>   a line too long for the framer
//   k<n> / K<n>     the kernel's picture n (K: after a netlink overrun) r<n>      the policy files become n; SIGHUP
//   R<text>         the policy file becomes text, with '|' for a newline; SIGHUP
//   m               policy loads wait for p (toggle)                    p         one waiting policy load completes
//   s               decision writes wait for d / e (toggle)             d / e     the oldest write succeeds / fails
//   E               automatic writes fail (toggle)                      x         SIGTERM
//   u<slot><n>      the slot's subscriber caught up after n dropped events
//   b<app><kind><uid>  the kernel rejected a packet of app 0-5 (firefox, updater, bob, sync, curl, an unknown name)
//                   out of a link of kind 0-4 (wifi, wwan, ethernet, other, metered), its socket's uid 0-3 (root,
//                   1000, 1001, none): the NFLOG-raised prompt
//   w<peer>         peer 0-6's process exits (a prompt it alone asked is withdrawn)
//   n<app><what><bytes>  the report's readers heard of app 0-5's connection (by its tag): what 0 a new one over
//                   metered wwan, 1 its end (with 1 event lost), 2 a DNS answer whose name is the rest's bytes
//                   (escaped as the report takes them), 3 a packet the rules refused (the reason by the byte after
//                   the address's, out of the kernel's link of that byte's index); the address is 192.0.2.<the next
//                   byte>. Policy 4 counts usage and keeps the report (curl's is uid 1001's, peer 2).
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol

/// Who may connect: root, an admin-group member, ordinary users matched by executable, unit and user, a peer
/// whose /proc could not be read, and the daemon's own uid.
let peers: [PeerIdentity] = [
    PeerIdentity(pid: 100, uid: 0, gids: [0], executable: "/usr/bin/netpermctl", unit: "session-1.scope"),
    PeerIdentity(pid: 101, uid: 1000, gids: [1000, 990], executable: "/usr/bin/firefox", unit: "app-firefox.scope"),
    PeerIdentity(pid: 102, uid: 1001, gids: [1001], executable: "/usr/bin/curl", unit: "updater.service"),
    PeerIdentity(pid: 103, uid: 1001, gids: [1001], executable: "/opt/tool/bin/x y", unit: nil),
    PeerIdentity(pid: 104, uid: 1002, gids: [], executable: nil, unit: nil, problem: "cannot read /proc/104/exe: gone"),
    PeerIdentity(pid: 105, uid: 64000, gids: [64000], executable: "/usr/sbin/netpermd", unit: "netpermd.service"),
    // A user's own unit named like the system's: matches UserUnit=, never Unit=.
    PeerIdentity(pid: 106, uid: 1000, gids: [1000], executable: "/usr/bin/wget", unit: "updater.service", userUnit: true),
]

let policies: [String] = [
    """
    [Defaults]
    WiFi=allow
    WWAN=ask
    Ethernet=allow
    Other=ask
    PromptTimeoutSec=30

    [App firefox]
    Executable=/usr/bin/firefox
    WiFi=ask
    WWAN=ask
    Ethernet=ask

    [App updater]
    Unit=updater.service
    WWAN=deny

    [App bob]
    User=bob
    WiFi=deny

    [App sync]
    UserUnit=updater.service
    WiFi=ask

    [Interface usb*]
    Kind=wwan
    """,
    """
    [Defaults]
    WiFi=ask
    WWAN=ask
    Ethernet=ask
    Other=ask
    AdminGroup=wheel
    PromptTimeoutSec=5

    [App curl]
    Executable=/usr/bin/c*
    WiFi=allow
    """,
    "[App broken\nWiFi=maybe\n",
    "",
    // Usage counted (every app tagged), budgets, and the report kept: machine-owned apps and one person's (curl, uid
    // 1001's: recorded only once that person turns it on).
    """
    [Usage]
    Count=yes

    [Report]
    Enabled=yes
    Days=2

    [Defaults]
    WiFi=allow
    WWAN=ask
    Ethernet=allow
    Other=ask
    MeteredBudget=1M

    [App firefox]
    Executable=/usr/bin/firefox
    WWAN=ask

    [App updater]
    Unit=updater.service
    WWAN=deny

    [App bob]
    User=bob
    WiFi=deny

    [App curl]
    User=1001
    MeteredBudget=2K

    [Interface usb*]
    Kind=wwan
    """,
]

func link(_ index: Int32, _ name: String, arphrd: UInt32 = ARPHRD.ether, kind: String? = nil, up: Bool = true,
          carrier: Bool = true) -> LinkFacts {
    LinkFacts(index: index, name: name, arphrd: arphrd, rtnlKind: kind, adminUp: up, carrier: carrier,
              operstate: up && carrier ? "up" : "down")
}

/// Kernel pictures: Wi-Fi and Ethernet, cellular alone, nothing, a blackhole, a flapping carrier, a veth.
func snapshot(_ n: Int, resyncs: Int) -> KernelSnapshot {
    var s = KernelSnapshot()
    let lo = link(1, "lo", arphrd: ARPHRD.loopback)
    switch n % 6 {
    case 0:
        s.links = [lo, link(2, "eth0"), link(3, "wlan0")]
        s.sysfs[3] = SysfsFacts(devtype: "wlan", hasPhy80211: true)
        s.defaultRoutes = [DefaultRouteFacts(index: 2, family: .ipv4, metric: 100),
                           DefaultRouteFacts(index: 3, family: .ipv4, metric: 600),
                           DefaultRouteFacts(index: 3, family: .ipv6, metric: 600)]
        s.addresses = [AddressFacts(index: 2, family: .ipv4, text: "192.0.2.2/24"),
                       AddressFacts(index: 3, family: .ipv6, text: "2001:db8::3/64")]
        s.egress = [.ipv4: .link(2), .ipv6: .link(3)]
    case 1:
        s.links = [lo, link(4, "wwan0", arphrd: ARPHRD.none), link(5, "usb0")]
        s.defaultRoutes = [DefaultRouteFacts(index: 4, family: .ipv4, metric: 700)]
        s.egress = [.ipv4: .link(4)]
    case 2:
        s.links = [lo]
    case 3:
        s.links = [lo, link(2, "eth0")]
        s.defaultRoutes = [DefaultRouteFacts(index: 2, family: .ipv4, metric: 100)]
        s.egress = [.ipv4: .blocked(.blackhole), .ipv6: .blocked(.unreachable)]
    case 4:
        s.links = [lo, link(2, "eth0", carrier: false), link(3, "wlan0", up: false)]
        s.sysfs[3] = SysfsFacts(devtype: "wlan")
        s.defaultRoutes = [DefaultRouteFacts(index: 2, family: .ipv4, metric: 100)]
        s.egress = [.ipv4: .link(2)]
    default:
        s.links = [lo, link(7, "veth-x", kind: "veth"), link(8, "ppp0", arphrd: ARPHRD.ppp)]
        s.defaultRoutes = [DefaultRouteFacts(index: 7, family: .ipv4, metric: 10),
                           DefaultRouteFacts(index: 8, family: .ipv4, metric: 20)]
        s.egress = [.ipv4: .link(7)]
    }
    s.resyncs = resyncs
    return s
}

let errorCodes = Set(ErrorCode.allCases.map(\.rawValue))

/// The apps of `policies` (and one no policy has) a rejected packet can name.
let blockedApps = ["firefox", "updater", "bob", "sync", "curl", "nosuch"]

/// What the fuzz target notes of a connection, beside how the engine left it.
final class Connection: FakeConnection {
    /// Requests the engine was given that call for a reply, and the replies it sent.
    var asked = 0
    var answered = 0
    /// SUBSCRIBE's reply is followed by its snapshot, which is a second reply line.
    var snapshotsExpected = 0
}

final class World: FakeWorld<Connection> {
    /// The open prompts before the input being carried out.
    var promptsBefore: [Prompt] = []
    /// The same engine fed the same inputs, except that a connection's request lines alternate with and without a
    /// trailing space: the same requests, but never the bytes of the one before, so it never answers from its
    /// reply cache. Its effects must be the same as the first engine's, byte for byte: a cached reply is what a
    /// fresh one would have been.
    let uncached = Engine(settings: Engine.Settings(daemonUID: 64000, logLevel: .debug))
    let uncachedEffects = Effects()
    var padNext: Set<ConnectionID> = []
    var slots: [ConnectionID?] = [nil, nil, nil, nil]
    var now: UInt64 { clock.now }
    var resyncs = 0
    /// Set by E: every write, load, read and lookup fails.
    var failing = false
    /// When each app and kind's last prompt expired unanswered: packets may not raise it again for
    /// `Engine.blockedQuietSec` after that.
    var expiredAt: [String: UInt64] = [:]

    init() {
        super.init(engine: Engine(settings: Engine.Settings(daemonUID: 64000, logLevel: .debug)), accounts: Accounts())
        setPolicy(policies[0])
    }

    override func fail(_ message: String) { require(false, message) }

    /// The kernel sends every destination by the first link (loopback, where there is one).
    override func route(_ question: RouteQuestion) -> Egress? {
        engine.state.network.links.first.map { Egress.link($0.index) }
    }

    func setPolicy(_ text: String) { policyFiles = [("/etc/netpermd/netpermd.conf", text)] }

    /// E: the disk, nft, bpf and netlink fail from now on (or no longer).
    func toggleFailing() {
        failing.toggle()
        storeError = failing ? EdgeError(.storeDecisions, "disk full") : nil
        rulesError = failing ? EdgeError(.loadRules, "nft: no such file") : nil
        steerError = failing ? EdgeError(.steer, "bpf: Operation not permitted") : nil
        // No usage table in the fuzzer's kernel: counting (if a policy asks for it) reads nothing.
        usageReadError = failing ? EdgeError(.readUsage, "Operation not permitted") : nil
        usageSaveError = failing ? EdgeError(.saveUsage, "disk full") : nil
        usageRulesError = failing ? EdgeError(.loadUsageRules, "nft: no such file") : nil
        routeError = failing ? EdgeError(.lookUpRoute, "netlink: Operation not permitted") : nil
    }

    override func carryOut(_ effects: Effects, of input: Input) {
        checkPrompts(after: input, before: promptsBefore)
        promptsBefore = engine.state.prompts.open
        uncachedEffects.reset()
        uncached.handle(padded(input), into: uncachedEffects)
        let a = render(effects), b = render(uncachedEffects)
        require(a == b, "a cached reply differs from a fresh one after \(input):\n\(a.joined(separator: "\n"))\n-- fresh:\n"
            + b.joined(separator: "\n"))
        // From its close on (no longer live), nothing may be sent to a connection.
        super.carryOut(effects, of: input)
        checkAfterInput()
    }

    override func handOver(_ input: Input, from c: Connection) {
        switch input {
        case let .line(_, bytes): if RequestParser.parse(bytes) != nil { c.asked += 1 }
        case .lineTooLong: c.asked += 1
        default: break
        }
        super.handOver(input, from: c)
    }

    /// The input as the second engine gets it: a request padded every other time (its reply must not come from the
    /// cache), and a policy read without what was made of it away from the loop (the main engine takes that: the
    /// same effects must follow).
    func padded(_ input: Input) -> Input {
        if case let .policy(result, _) = input { return .policy(result) }
        guard case let .line(id, bytes) = input else { return input }
        if padNext.remove(id) != nil { return .line(id, bytes + [0x20]) }
        padNext.insert(id)
        return input
    }

    /// Effects as text, in order, for comparing two engines' byte for byte: the engine iterates nothing in a
    /// dictionary's order, and the two engines' dictionaries have seeds of their own. Log lines are left out (a
    /// cached reply is not logged as a fresh one's work may be).
    func render(_ fx: Effects) -> [String] {
        fx.list.compactMap { e -> String? in
            switch e {
            case let .reply(id, r): return "\(id): reply " + comparable(String(decoding: fx[r], as: UTF8.self))
            case let .event(id, h, t): return "\(id): event " + String(decoding: fx[h], as: UTF8.self) + String(decoding: fx[t], as: UTF8.self)
            // Written out by hand: printing an enum by reflection cost more than the engine.
            case let .hold(id): return "\(id): hold"
            case let .resume(id): return "\(id): resume"
            case let .close(id): return "\(id): close"
            case let .keepOpenAfterInputEnds(id): return "\(id): keep-open"
            case .log: return nil
            // The decisions as the file has them (a dictionary prints in its own order).
            case let .persist(d): return "persist " + d.encoded() + " once \(d.once.count)"
            case let .armTimer(id, usec): return "arm \(id) \(usec)"
            case let .cancelTimer(id): return "cancel \(id)"
            case .loadPolicy: return "load-policy"
            case let .loadRules(id, scripts, report, _, _):
                return "load-rules \(id) \(report) " + scripts.map(\.text).joined(separator: "\n--\n")
            case let .lookUpTables(lookup): return "look-up-tables \(lookup)"
            case let .runLoad(id, run): return "run-load \(id.map(String.init) ?? "repair") \(run.scripts.count) \(run.elements)"
            case let .loadAnswered(id, error): return "load-answered \(id) \(error.map { "\($0)" } ?? "ok")"
            case let .followTables(watching): return "follow-tables \(watching)"
            case .repairTablesSoon: return "repair-soon"
            case let .nameUnits(naming): return "name-units " + (naming.map { "\($0)" } ?? "none")
            case let .loadUnitElements(changes, ids): return "unit-elements \(ids) \(changes.commands.count)"
            case let .steer(step):
                return step.plan.map { "steer \(step.follows ? "follow " : "")\($0.allowances.count)" } ?? "remove-steering"
            case .readUsage: return "read-usage"
            case let .saveUsage(book): return "save-usage " + book.encoded()
            case let .saveTags(table): return "save-tags " + table.encoded()
            case let .loadUsageRules(id, script, report, _): return "load-usage \(id) \(report) " + script
            case let .watchExit(pid): return "watch \(pid)"
            case let .unwatchExit(pid): return "unwatch \(pid)"
            case let .watchExecs(index): return "watch-execs \(index.programs.count)"
            case let .makeScope(r): return "scope \(r.unit)"
            case let .checkClaim(c): return "claim \(c.pid) \(c.uid) \(c.app)"
            case .scanCgroupsSoon: return "scan-cgroups"
            case let .saveReport(book): return "save-report " + book.encoded()
            case .removeReport: return "remove-report"
            case let .watchReport(on): return "watch-report \(on)"
            case let .lookUpRoute(id, q): return "\(id): route \(q.destination.bytes) uid \(q.uid) mark \(q.mark.map(String.init) ?? "-")"
            case let .notify(n):
                switch n {
                case let .ready(status): return "ready " + status
                case let .status(status): return "status " + status
                case .reloading: return "reloading"
                case .stopping: return "stopping"
                }
            }
        }
    }

    /// A reply as the two engines must agree on it: METRICS' count of where a reload's work was made is left out,
    /// as the second engine is given the policy without what was made of it away from the loop (`padded`), so it
    /// differs by construction (with counting on, usage's tagging is such work).
    func comparable(_ reply: String) -> String {
        guard reply.contains("netpermd_policy_reload_work_total{") else { return reply }
        return reply.split(separator: "\\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("netpermd_policy_reload_work_total{") }.joined(separator: "\\n")
    }

    // MARK: - Effects, each checked

    /// Checks the effect, then the world carries it out.
    override func carryOut(_ e: Effect) {
        switch e {
        case let .reply(id, r):
            guard let c = live[id] else { return require(false, "reply to connection \(id), which is gone") }
            let line = Array(effects[r])
            let obj = oneLine(line, what: "reply")
            if c.snapshotsExpected > 0, obj.keys.first == "event" {
                // SUBSCRIBE's snapshot comes as a reply effect, right after SUBSCRIBE's own reply.
                c.snapshotsExpected -= 1
                checkEvent(obj, line, c)
                require(obj["event"]?.string == "snapshot", "a reply-effect event that is not a snapshot: \(show(line))")
                break
            }
            require(obj.keys.first == "ok", "a reply does not start with ok: \(show(line))")
            require(!obj.keys.contains("event"), "a reply with an event member: \(show(line))")
            if obj["ok"]?.bool == false {
                require(obj["error"]?.string.map(errorCodes.contains) == true, "unknown error code: \(show(line))")
                require(obj["message"]?.string != nil, "an error without a message: \(show(line))")
            } else {
                require(obj["ok"]?.bool == true, "ok is not a boolean: \(show(line))")
                if obj["subscribed"] != nil { c.snapshotsExpected += 1 }
            }
            c.answered += 1
            require(c.answered <= c.asked, "connection \(id): \(c.answered) replies to \(c.asked) requests: \(show(line))")
        case let .event(id, head, tail):
            guard let c = live[id] else { return require(false, "event to connection \(id), which is gone") }
            let line = Array(effects[head]) + Array(effects[tail])
            checkEvent(oneLine(line, what: "event"), line, c)
        case let .hold(id):
            // A flag, as in the transport: holding a held connection again (a DECIDE that waited for a write, then
            // starts its own) changes nothing.
            require(live[id] != nil, "hold of connection \(id), which is gone")
        case let .resume(id):
            require(live[id] != nil, "resume of connection \(id), which is gone")
        case let .close(id):
            require(live[id] != nil, "close of connection \(id), which is gone")
        case let .keepOpenAfterInputEnds(id):
            require(live[id] != nil, "keep-open of connection \(id), which is gone")
        case let .armTimer(id, _):
            require(!clock.isArmed(id), "timer \(id) armed twice")
        case .cancelTimer, .loadPolicy, .readUsage, .watchExit, .unwatchExit:
            // The world checks that a timer cancelled was armed, and that a process is watched once.
            break
        case let .persist(d):
            // What is written must read back as the same lasting decisions.
            let text = d.encoded()
            do {
                let back = try Decisions.parse(text, path: "d")
                var lasting = d
                lasting.dropOnce()
                require(back == lasting, "decisions do not read back as written:\n\(text)")
            } catch {
                require(false, "the decisions written do not parse (\(error)):\n\(text)")
            }
        case let .notify(n):
            switch n {
            case let .ready(status), let .status(status):
                require(!status.utf8.contains(0x0A), "a STATUS= with a newline: \(status)")
            case .reloading, .stopping: break
            }
        case let .loadRules(_, scripts, _, inForce, _):
            // Policies here have no [Enforcement] (off): a script, if any, is text nft reads, one table.
            require(!scripts.isEmpty && !scripts.contains(where: \.text.isEmpty) && !inForce.isEmpty, "an empty ruleset")
        case let .nameUnits(naming):
            // Policies here enforce nothing: no rules in force, so no unit is named as it is made.
            require(naming == nil, "units named with no rules in force")
        case let .loadUnitElements(_, ids):
            require(false, "units named again with no rules in force: \(ids)")
        case let .steer(step):
            // A plan's marks name only the tables it has rules for.
            if let plan = step.plan {
                let marks = Set(plan.allowances.map(\.mark))
                require(plan.uidMarks.values.allSatisfy(marks.contains), "a uid marked for a table not in the plan")
                require(plan.cgroupMarks.values.allSatisfy { $0 == 0 || marks.contains($0) }, "a cgroup marked for no table")
            }
        case let .saveUsage(book):
            // What is saved must read back as the same totals.
            requireReadsBack(book, book.encoded(), "usage totals") { (t) throws(ConfigError) in try UsageBook.parse(t, path: "u") }
        case let .saveTags(table):
            // What is saved must read back as the same tags: each app's, distinct.
            requireReadsBack(table, table.encoded(), "tags") { (t) throws(ConfigError) in try TagTable.parse(t, path: "t") }
        case let .loadUsageRules(_, script, _, _):
            require(!script.isEmpty, "an empty usage script")
        case let .runLoad(_, run):
            require(!run.scripts.isEmpty && !run.scripts.contains(where: \.text.isEmpty), "an empty load run")
        case .lookUpTables, .loadAnswered, .followTables, .repairTablesSoon:
            break
        case let .makeScope(r):
            require(r.pid > 0 && r.unit.hasSuffix(".scope"), "a scope for no process")
        case let .checkClaim(c):
            require(c.pid > 0 && !c.app.isEmpty, "a claim of no process")
        case .scanCgroupsSoon:
            break
        case let .saveReport(book):
            // What is saved must read back as the same entries and people.
            let back = try? ReportBook.parse(book.encoded(), path: "r")
            require(back?.entries == book.entries && back?.people == book.people, "the report does not read back")
        case .removeReport, .watchReport:
            break
        case .watchExecs:
            break
        case let .lookUpRoute(_, q):
            require(q.destination.bytes.count == (q.destination.family == .ipv4 ? 4 : 16), "an address of the wrong size")
        case let .log(_, message, _):
            require(!message.isEmpty, "an empty log line")
            require(!message.utf8.contains(0x0A), "a log line with a newline: \(message.debugDescription)")
        }
        super.carryOut(e)
    }

    /// At most one open prompt per app and scope, whoever raised it, never asking about no kind; a rejected packet
    /// raises at most one, for its own app, about its kind among others, for its socket's scope, marked `blocked`,
    /// and none within `blockedQuietSec` of that app and scope's last expiry; only an exit withdraws one, and only
    /// one that no packet raised.
    func checkPrompts(after input: Input, before: [Prompt]) {
        let open = engine.state.prompts.open
        let keys = open.map { Engine.quietKey($0.app, $0.scope) }
        require(Set(keys).count == keys.count, "two open prompts for one app and scope: \(keys.sorted())")
        require(open.allSatisfy { !$0.kinds.isEmpty }, "a prompt about no kind")
        let beforeIDs = Set(before.map(\.id)), openIDs = Set(open.map(\.id))
        let raised = open.filter { !beforeIDs.contains($0.id) }
        switch input {
        case .timer:
            // Only an expiry closes a prompt when a timer fires.
            for p in before where !openIDs.contains(p.id) { expiredAt[Engine.quietKey(p.app, p.scope)] = now }
        case let .blocked(app, kind, uid, _, _, incoming):
            guard !incoming else {
                require(raised.isEmpty, "a refused SYN-ACK (a connection from elsewhere) raised a prompt")
                break
            }
            let scope = engine.blockedScope(uid)
            require(raised.count <= 1 && raised.allSatisfy { $0.app == app && $0.kinds.contains(kind) && $0.blocked
                                                            && $0.scope == scope && $0.uid == uid },
                    "a rejected packet of \(app) (\(kind.rawValue)) raised \(raised.map { "\($0.app) \($0.kinds)" })")
            if let at = expiredAt[Engine.quietKey(app, scope)], now < at + Engine.blockedQuietSec * 1_000_000 {
                require(raised.isEmpty, "a rejected packet of \(app) (\(kind.rawValue)) raised a prompt \(now - at) µs "
                    + "after the last one expired")
            }
        case let .exited(pid):
            for p in before where !openIDs.contains(p.id) {
                require(!p.blocked && p.askers == [pid], "the exit of \(pid) withdrew prompt \(p.id), asked by \(p.askers)")
            }
        default:
            require(raised.allSatisfy { !$0.blocked }, "a prompt marked blocked raised by \(input)")
        }
    }

    /// One JSON object and one newline, at the end.
    func oneLine(_ line: [UInt8], what: String) -> StrictJSON.Value {
        require(line.last == 0x0A, "\(what) does not end with a newline: \(show(line))")
        let body = Array(line.dropLast())
        require(!body.contains(0x0A), "\(what) holds a newline: \(show(line))")
        switch StrictJSON.parseObject(body) {
        case let .success(v): return v
        case let .failure(f): require(false, "\(what) is not JSON (\(f.message) at \(f.offset)): \(show(line))"); return .null
        }
    }

    /// `event` then `seq`, counting the connection's events without a gap.
    func checkEvent(_ obj: StrictJSON.Value, _ line: [UInt8], _ c: Connection) {
        let keys = obj.keys
        require(keys.count >= 2 && keys[0] == "event" && keys[1] == "seq", "an event not led by event, seq: \(show(line))")
        countEvent(obj["seq"]?.int, on: c, show(line))
    }

    /// After every input: the engine's listener counts agree with its sessions, and a connection that is not held
    /// has had every request answered.
    func checkAfterInput() {
        var counted: [TrackedApp: Int] = [:]
        for s in engine.clients.sessions.values { for app in s.listened { counted[app, default: 0] += 1 } }
        require(engine.clients.listeners == counted, "listener counts \(engine.clients.listeners) drifted from the sessions' \(counted)")
        let agents = engine.countAgents()
        require(engine.state.agents == agents.agents && engine.state.userAgents == agents.users,
                "agents \(engine.state.agents) \(engine.state.userAgents) != \(agents)")
        // Every process an open prompt was asked by is watched, and nothing else.
        require(Set(engine.state.prompts.open.flatMap(\.askers)) == watched,
                "watched \(watched.sorted()) for prompts asked by \(engine.state.prompts.open.map(\.askers))")
        for c in live.values where !c.held && !c.closed {
            require(c.answered == c.asked, "connection \(c.id) not held, \(c.asked - c.answered) request(s) unanswered")
            require(c.snapshotsExpected == 0, "connection \(c.id): SUBSCRIBE's snapshot missing")
        }
        require(Set(engine.clients.sessions.keys) == Set(live.keys), "sessions \(engine.clients.sessions.keys.sorted()) != open \(live.keys.sorted())")
        // The report keeps nothing while off, a person's entries only while that person has it on, within its bound.
        let book = engine.report.book
        if engine.state.ready, !engine.state.config.report.enabled {
            require(book.entries.isEmpty && book.people.isEmpty, "the report keeps \(book.entries.count) entries while off")
        }
        require(book.entries.count <= book.limits.entries, "the report past its bound: \(book.entries.count)")
        for k in book.entries.keys where k.owner.uid.map({ !book.people.contains($0) }) ?? false {
            require(false, "an entry of uid \(k.owner.uid!), who did not turn the report on: \(k)")
        }
    }

    // MARK: - Steps

    func connection(_ slot: Int) -> Connection {
        if let id = slots[slot], let c = live[id], !c.closed { return c }
        return open(slot, peer: slot)
    }

    @discardableResult
    func open(_ slot: Int, peer: Int) -> Connection {
        close(slot)
        let c = openConnection(as: peers[peer % peers.count])
        slots[slot] = c.id
        return c
    }

    func close(_ slot: Int) {
        guard let id = slots[slot] else { return }
        slots[slot] = nil
        guard live[id] != nil else { return }
        disconnect(id)
    }

    /// Takes an input from the connection as the transport would: now, or once it is no longer held.
    func send(_ input: Input, slot: Int) { submit(input, on: connection(slot).id) }

    func step(_ line: [UInt8]) {
        guard let first = line.first else { return send(.line(connection(0).id, []), slot: 0) }
        let rest = line.dropFirst()
        let slot = rest.first.map { Int($0) % 4 } ?? 0
        switch first {
        case 0x30...0x33:
            let s = Int(first - 0x30)
            let request = Array(rest.first == 0x20 ? rest.dropFirst() : rest)
            let id = connection(s).id
            send(request.count > Request.maxLine ? .lineTooLong(id) : .line(id, request), slot: s)
            return
        case UInt8(ascii: "o"): open(slot, peer: rest.dropFirst().first.map(Int.init) ?? slot)
        case UInt8(ascii: "c"): close(slot)
        case UInt8(ascii: "i"):
            // The transport sees the sender of the next request, so it comes in order with the requests.
            send(.identityChanged(connection(slot).id, peers[(rest.dropFirst().first.map(Int.init) ?? 0) % peers.count]),
                 slot: slot)
        case UInt8(ascii: "t"):
            // While usage is counted its reading ticks for ever: a move of days would be thousands of ticks.
            let most = engine.state.config.usage.count ? 3600 : 200_000
            advance(by: UInt64(number(rest, limit: most) ?? 1) * 1_000_000 + 1)
        case UInt8(ascii: "L"): send(.lineTooLong(connection(slot).id), slot: slot)
        case UInt8(ascii: "k"), UInt8(ascii: "K"):
            if first == UInt8(ascii: "K") { resyncs += 1 }
            feed(.kernel(snapshot(number(rest, limit: 100) ?? 0, resyncs: resyncs)))
        case UInt8(ascii: "r"):
            setPolicy(policies[(number(rest, limit: 100) ?? 0) % policies.count])
            feed(.reload)
        case UInt8(ascii: "R"):
            setPolicy(String(decoding: rest.map { $0 == UInt8(ascii: "|") ? 0x0A : $0 }, as: UTF8.self))
            feed(.reload)
        case UInt8(ascii: "m"): policyLoadIsManual.toggle()
        case UInt8(ascii: "p"): if pendingPolicyLoads > 0 { completePolicyLoad() }
        case UInt8(ascii: "s"): storeIsManual.toggle()
        case UInt8(ascii: "d"), UInt8(ascii: "e"):
            if !pendingStores.isEmpty { completeStore(error: first == UInt8(ascii: "e") ? EdgeError(.storeDecisions, "EIO") : nil) }
        case UInt8(ascii: "E"): toggleFailing()
        case UInt8(ascii: "x"): feed(.stopping)
        case UInt8(ascii: "b"):
            let digits = Array(rest)
            let app = blockedApps[digits.first.map { Int($0 &- 0x30) % blockedApps.count } ?? 0]
            let kinds = PolicyDimension.allCases
            let uids: [UInt32?] = [0, 1000, 1001, nil]
            feed(.blocked(app: app, kind: kinds[digits.dropFirst().first.map { Int($0 &- 0x30) % kinds.count } ?? 0],
                          uid: uids[digits.dropFirst(2).first.map { Int($0 &- 0x30) % uids.count } ?? 0],
                          ifindex: nil))
        case UInt8(ascii: "n"):
            let d = Array(rest)
            let app = blockedApps[d.first.map { Int($0 &- 0x30) % blockedApps.count } ?? 0]
            let tag = engine.usage.tagged.tags[app] ?? 0x6E80_0001
            let address = "192.0.2.\(d.dropFirst(2).first ?? 0)"
            let sighting: ReportSighting
            // Whether it must add one to the app's counts: the report on, counting on (the tag is the app's), its
            // person's report on, and for a refusal a link the kernel has.
            let owner = engine.reportOwner(app: app)
            var counted = engine.state.config.report.enabled && engine.state.config.usage.count
                && engine.usage.tagged.owners[tag] == app && (owner.uid.map(engine.report.book.people.contains) ?? true)
            switch d.dropFirst().first.map({ Int($0 &- 0x30) % 4 }) ?? 0 {
            case 0: sighting = .opened(tag: tag, address: address, port: 443, proto: 6, link: ReportLink(kind: .wwan, metered: true))
            case 1:
                sighting = .closed(tag: tag, address: address, link: ReportLink(kind: .wwan, metered: true), bytes: 1500)
                counted = false
            case 2:
                guard let name = DNSName.text(labels: [d.dropFirst(3)]) else { return }
                sighting = .answer(tag: tag, DNSAnswer(name: name, addresses: [address]))
                counted = false
            default:
                let byte = Int(d.dropFirst(3).first ?? 0)
                let index = Int32(byte % 9)
                counted = counted && engine.state.network.links.contains { $0.index == index }
                sighting = .refused(tag: tag, address: address, port: 443, proto: 6, ifindex: index,
                                    reason: ReportRefusal.allCases[byte % ReportRefusal.allCases.count])
            }
            let before = attempts(of: owner)
            feed(.reportSighted([sighting], lost: d.dropFirst().first == UInt8(ascii: "1") ? 1 : 0))
            require(attempts(of: owner) == before + (counted ? 1 : 0),
                    "\(sighting) of \(app) counted \(attempts(of: owner) - before) times, not \(counted ? 1 : 0)")
        case UInt8(ascii: "w"):
            exit(pid: peers[(rest.first.map { Int($0 &- 0x30) } ?? 0) % peers.count].pid)
        case UInt8(ascii: "u"):
            if let id = slots[slot], live[id] != nil {
                feed(.caughtUp(id, dropped: number(rest.dropFirst(), limit: 1_000_000) ?? 1))
            }
        default:
            let id = connection(0).id
            send(line.count > Request.maxLine ? .lineTooLong(id) : .line(id, line), slot: 0)
        }
    }

    /// An owner's connections and refusals in the report, all days and destinations together.
    func attempts(of owner: ReportOwner) -> UInt64 {
        engine.report.book.entries.reduce(0) { $1.key.owner == owner ? $0 + $1.value.connections + $1.value.refused : $0 }
    }

    /// Every deferred thing finishes, every connection goes: nothing may be left behind.
    func finish() {
        policyLoadIsManual = false
        storeIsManual = false
        while pendingPolicyLoads > 0 { completePolicyLoad() }
        // Counting ticks for ever (and the report saves while it changes): a policy without them ends both, and
        // must leave none of their timers behind, as every other timer is checked below.
        if engine.state.config.usage.count {
            setPolicy(policies[3])
            feed(.reload)
            while pendingPolicyLoads > 0 { completePolicyLoad() }
        }
        while !pendingStores.isEmpty { completeStore() }
        // WAIT takes time-outs below 10^8 seconds.
        advance(by: 200_000_000 * 1_000_000)
        for slot in 0..<slots.count { close(slot) }
        advance(by: 200_000_000 * 1_000_000)
        require(engine.clients.sessions.isEmpty, "sessions left: \(engine.clients.sessions.keys.sorted())")
        require(engine.clients.listeners.isEmpty, "listeners left: \(engine.clients.listeners)")
        require(clock.armedCount == 0 && engine.timers.purposes.isEmpty, "timers left: \(clock.armedCount), engine \(engine.timers.purposes.keys.sorted())")
        require(engine.state.agents == 0, "agents left: \(engine.state.agents)")
        require(engine.reloading.loads.waiters.isEmpty && engine.reloading.loads.nextWaiters.isEmpty && engine.answering.commits.queued.isEmpty,
                "requesters left")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let world = World()
    world.feed(.policy(world.readPolicy()))
    world.feed(.kernel(snapshot(0, resyncs: 0)))
    world.feed(.started)
    for line in split(bytes(data, size), on: 0x0A).prefix(400) { world.step(line) }
    world.finish()
    return 0
}

/// A state file's text must parse back into what was written.
func requireReadsBack<T: Equatable>(_ value: T, _ text: String, _ what: String, _ parse: (String) throws(ConfigError) -> T) {
    do {
        let read = try parse(text)
        require(read == value, "\(what) do not read back as written:\n\(text)")
    } catch {
        require(false, "the \(what) written do not parse (\(error)):\n\(text)")
    }
}
