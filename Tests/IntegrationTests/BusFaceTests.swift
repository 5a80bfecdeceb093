// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import NetpermCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The system bus face (docs/DBUS.md) as installed: a real systemd container (RealSystemd) with Debian's
/// dbus-daemon as its system bus, reading the installed bus policy, and Debian's real polkitd 122, started by the
/// bus on demand, reading the installed actions (a test rule in /etc/polkit-1/rules.d says yes where a person
/// would type a password). netpermd runs as its unit says (User=netpermd, socket-activated).
final class BusFaceTests: IntegrationTestCase {
    static let socket = "/run/netpermd/netpermd.sock"
    static let dest = ["org.netpermd.NetPerm1", "/org/netpermd/NetPerm1"]
    static let alice = 1500, bob = 1501, dave = 1503
    /// Apps whose verdicts differ in reason: wwan0 (metered, the kernel's egress) and wlan0 both usable.
    static let policy = """
        [Usage]
        Count=yes
        [Report]
        Enabled=yes
        [Interface wlan0]
        Kind=wifi
        [Interface wwan0]
        Kind=wwan
        [App open]
        Executable=/usr/bin/open-app
        WWAN=allow
        [App elsewhere]
        Executable=/usr/bin/elsewhere
        WWAN=deny
        [App denied]
        Executable=/usr/bin/denied
        WWAN=deny
        WiFi=deny
        [App unmetered]
        Executable=/usr/bin/unmetered
        Metered=deny
        WiFi=deny
        [App asked]
        Executable=/usr/bin/asked
        WWAN=ask
        # What the docs' examples name.
        [App updater]
        Executable=/usr/bin/apt-get
        [App maps]
        Executable=/usr/bin/maps
        WWAN=ask
        WiFi=deny
        # dave's: one byte on a metered link uses its budget up (Wi-Fi denied: budget-exhausted, not routed-elsewhere).
        [App spender]
        User=1503
        WWAN=allow
        WiFi=deny
        MeteredBudget=1
        # Listed for both users (SUBSCRIBE mine, Subscribe): what each decides for themselves.
        [App shared]
        Executable=/usr/bin/shared
        User=1500 1501
        """

    private func boot() throws -> RealSystemd {
        let sd = try bootRealSystemd(policy: Self.policy, defaultRoutes: [("wwan0", 100), ("wlan0", 600)])
        try sd.addUser("alice", uid: Self.alice)
        try sd.addUser("bob", uid: Self.bob)
        try sd.addUser("dave", uid: Self.dave)
        // The container's system bus: Debian's dbus.socket and dbus.service, which read the installed policy.
        try sd.check(["systemctl", "start", "dbus.socket", "dbus.service"])
        try sd.check(["systemctl", "start", "netpermd.service"])
        try waitUntil("netpermd owns its name", timeout: 10) {
            let r = try sd.run(["busctl", "--system", "status", "org.netpermd.NetPerm1"])
            return (r.status == 0, r.summary)
        }
        return sd
    }

    /// The test client's `listen` as `uid` (0: root), ready: the signals `members` as they come, in order; its stdin
    /// takes "unsubscribe".
    private func listen(_ sd: RealSystemd, as uid: Int, topics: String, everyone: Bool = false, _ members: [String])
        throws -> (input: Int32, output: FDLineReader, stop: () -> Void) {
        let script = try String(contentsOfFile: Repository.root + "/Tests/IntegrationTests/Support/bus-client.py", encoding: .utf8)
        try sd.write(script, to: "/usr/local/lib/npt-bus-client.py")
        let log = try makeTempDir() + "/listen.log"
        showOnFailure("the listener's errors") { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        let l = try spawnOwn(sd, as: uid, ["/usr/bin/python3", "/usr/local/lib/npt-bus-client.py", "listen", topics,
                                           String(everyone)] + members, log: log)
        XCTAssertEqual(l.output.nextLine(timeout: 10), "ready", "\(l.output.history)")
        return l
    }

    /// The listener's lines until each of `members` has come (10 s at most): the arguments of each one's first.
    private func signals(_ l: (input: Int32, output: FDLineReader, stop: () -> Void), _ members: Set<String>)
        throws -> [String: [Any]] {
        var got: [String: [Any]] = [:]
        while !members.isSubset(of: Set(got.keys)) {
            let line = try XCTUnwrap(l.output.nextLine(timeout: 10), "heard \(got.keys.sorted()) of \(members.sorted()): \(l.output.history)")
            let signal = try JSONValue.object(line)
            if let m = signal["member"] as? String, got[m] == nil { got[m] = signal["args"] as? [Any] ?? [] }
        }
        return got
    }

    /// `Unsubscribe` over the bus ends the caller's subscription: bob, subscribed to his own apps, hears shared's
    /// AppChanged when root decides for everyone; after his Unsubscribe's reply, root's Forget brings the broadcast
    /// AppsChanged and no AppChanged (both come from the same engine event, the unicast first).
    private func checkUnsubscribe(_ sd: RealSystemd) throws {
        let bob = try listen(sd, as: Self.bob, topics: "mine", ["AppChanged", "AppsChanged"])
        defer { bob.stop() }
        try sd.check(["/usr/local/bin/netpermctl", "decide", "shared", "wwan", "deny"])
        let first = try JSONValue.object(try XCTUnwrap(bob.output.nextLine(timeout: 10), "\(bob.output.history)"))
        XCTAssertEqual(first["member"] as? String, "AppChanged", "\(first)")
        XCTAssertEqual(((first["args"] as? [Any])?.first as? [String: Any])?["app"] as? String, "shared", "\(first)")
        let bytes = Array("unsubscribe\n".utf8)
        guard write(bob.input, bytes, bytes.count) == bytes.count else { throw HarnessError("write to bob's listener") }
        // Whatever was sent before the reply comes before it; nothing of the subscription's may come after.
        var line = ""
        while !line.contains("\"unsubscribed\"") {
            line = try XCTUnwrap(bob.output.nextLine(timeout: 10), "no reply to Unsubscribe: \(bob.output.history)")
        }
        XCTAssertEqual(try JSONValue.object(line)["unsubscribed"] as? NSDictionary, [:] as NSDictionary, line)
        try sd.check(["/usr/local/bin/netpermctl", "forget", "shared"])
        let after = try JSONValue.object(try XCTUnwrap(bob.output.nextLine(timeout: 10), "\(bob.output.history)"))
        XCTAssertEqual(after["member"] as? String, "AppsChanged", "unsubscribed, bob hears no AppChanged: \(after)")
    }

    /// A reload that takes users' answering away (`[Defaults] UserDecisions=no`) takes the prompts topic off alice's
    /// agent on the bus: `Unsubscribed` says so, to her alone; `PolicyChanged` is broadcast for each reload.
    private func checkUnsubscribed(_ sd: RealSystemd) throws {
        let broadcast = try listen(sd, as: Self.bob, topics: "-", ["PolicyChanged"])
        defer { broadcast.stop() }
        let alice = try listen(sd, as: Self.alice, topics: "prompts", ["Unsubscribed"])
        defer { alice.stop() }
        let file = "/etc/netpermd/netpermd.conf"
        try sd.write("[Defaults]\nUserDecisions=no\n" + Self.policy, to: file)
        if case let .failure(e) = try call(sd, Self.d, "Reload") { XCTFail("Reload: \(e.text)") }
        let gone = try signals(alice, ["Unsubscribed"])["Unsubscribed"]?.first as? [String: Any]
        XCTAssertEqual(gone?["topics"] as? [String], ["prompts"], "\(gone ?? [:])")
        XCTAssertEqual(gone?["error"] as? String, "permission-denied", "\(gone ?? [:])")
        let first = try signals(broadcast, ["PolicyChanged"])["PolicyChanged"]?.first as? [String: Any]
        try sd.write(Self.policy, to: file)
        if case let .failure(e) = try call(sd, Self.d, "Reload") { XCTFail("Reload: \(e.text)") }
        let second = try signals(broadcast, ["PolicyChanged"])["PolicyChanged"]?.first as? [String: Any]
        XCTAssertEqual((second?["generation"] as? Int).map { $0 - 1 }, first?["generation"] as? Int, "one PolicyChanged a reload")
        XCTAssertNil(second?["error"], "\(second ?? [:])")
    }

    /// `busctl call` as `uid` (nil: root), its reply's values as plain JSON, or the error busctl printed.
    private func call(_ sd: RealSystemd, as uid: Int? = nil, interactive: Bool = false, _ iface: String,
                      _ method: String, _ args: [String] = []) throws -> Result<Any, BusError> {
        let argv = ["busctl", "--system", "--json=short", "--allow-interactive-authorization=\(interactive ? "yes" : "no")",
                    "call"] + Self.dest + [iface, method] + args
        let r = try sd.run(uid.map { sd.asUser($0, argv) } ?? argv)
        guard r.status == 0 else { return .failure(BusError(text: r.stderr)) }
        let reply = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        return .success(Self.plain((reply?["data"] as? [Any])?.first ?? NSNull()))
    }

    struct BusError: Error { var text: String }

    /// busctl's `{"type":T,"data":V}` around every variant's value, taken off.
    static func plain(_ v: Any) -> Any {
        if let d = v as? [String: Any] {
            if d.count == 2, d["type"] is String, let data = d["data"] { return plain(data) }
            return d.mapValues(plain)
        }
        if let a = v as? [Any] { return a.map(plain) }
        return v
    }

    /// A socket reply as the bus gives it: no `ok`, and no null anywhere (D-Bus has none).
    static func withoutNulls(_ v: Any) -> Any? {
        if v is NSNull { return nil }
        if let d = v as? [String: Any] { return d.compactMapValues(withoutNulls) }
        if let a = v as? [Any] { return a.compactMap(withoutNulls) }
        return v
    }

    private static let r = "org.netpermd.NetPerm1", d = "org.netpermd.NetPerm1.Decisions"
    /// The reasons checkSameVerdicts compared so far.
    private var comparedReasons: Set<String> = []

    func testTheBusFace() throws {
        let sd = try boot()
        try checkIntrospection(sd)
        let broadcast = try listen(sd, as: 0, topics: "-", ["PolicyChanged", "AppsChanged"])
        try checkRoot(sd)
        let heard = try signals(broadcast, ["PolicyChanged", "AppsChanged"])
        XCTAssertEqual((heard["PolicyChanged"]?.first as? [String: Any])?["generation"] as? Int, 2, "Reload's PolicyChanged: \(heard)")
        try checkUnsubscribe(sd)
        try checkUnsubscribed(sd)
        try checkDocsExamples(sd)
        try checkSubscriptions(sd)
        try checkReport(sd)
        try checkHostile(sd)
        try checkUsers(sd)
        try checkAnswerOwn(sd)
        try checkSameVerdicts(sd, [(nil, ["compare", "QueryApp", "open"]), (nil, ["compare", "QueryApp", "elsewhere"]),
                                   (nil, ["compare", "QueryApp", "denied"]), (nil, ["compare", "QueryApp", "unmetered"]),
                                   (nil, ["compare", "QueryApp", "asked"]), (Self.alice, ["compare", "Query"]),
                                   (nil, ["compare", "Query"]), (nil, ["compare-agent", "QueryApp", "maps"])],
                              reasons: ["ok", "routed-elsewhere", "denied", "awaiting-decision"])
        try checkBudgetExhausted(sd)
        try checkPromptSignal(sd)
        try checkSignalTiming(sd)
        // No usable link left (wlan0p went down above).
        try sd.namespace.ip("link", "set", "wwan0p", "down")
        try waitUntil("no link is usable", timeout: 10) {
            let r = try sd.run(["/usr/local/bin/netpermctl", "--json", "query", "open"])
            return (r.stdout.contains("\"no-network\""), r.summary)
        }
        try checkSameVerdicts(sd, [(nil, ["compare", "QueryApp", "open"]), (Self.bob, ["compare", "Query"])],
                              reasons: ["no-network"])
        // Every reason a verdict can have but `starting`, which no caller of either face meets: the daemon feeds its
        // engine `started` before its loop serves anyone (BusTransportTests compares it where the start can be held).
        XCTAssertEqual(comparedReasons, Set(Verdict.Reason.allCases.filter { $0 != .starting }.map(\.rawValue)))
    }

    /// What the bus shows of the object is the installed interface file's, interface by interface.
    private func checkIntrospection(_ sd: RealSystemd) throws {
        let shown = try sd.check(["busctl", "--system", "introspect", "--xml-interface"] + Self.dest).stdout
        let file = try String(contentsOfFile: sd.root + "/usr/share/dbus-1/interfaces/org.netpermd.NetPerm1.xml", encoding: .utf8)
        let blocks = file.components(separatedBy: "<interface ").dropFirst().map { "<interface " + $0.components(separatedBy: "</interface>")[0] }
        XCTAssertEqual(blocks.count, 2)
        for b in blocks { XCTAssertTrue(shown.contains(b), "introspection lacks \(b.prefix(60))...:\n\(shown)") }
        XCTAssertEqual(try sd.check(["busctl", "--system", "get-property"] + Self.dest + [Self.r, "Version"]).stdout
            .hasPrefix("s \""), true)
    }

    /// Root may call every method, and needs no polkit.
    private func checkRoot(_ sd: RealSystemd) throws {
        for (iface, method, args) in [(Self.r, "GetStatus", []), (Self.r, "GetLinks", []), (Self.r, "Query", []),
                                      (Self.r, "QueryApp", ["sb", "open", "true"]), (Self.r, "GetApps", ["b", "true"]),
                                      (Self.r, "GetUsage", ["sb", "", "true"]), (Self.r, "GetPrompts", ["b", "true"]),
                                      (Self.r, "GetDecisions", ["b", "true"]),
                                      (Self.d, "Decide", ["sssbb", "asked", "wwan", "allow", "false", "true"]),
                                      (Self.d, "Forget", ["ssb", "asked", "", "true"]), (Self.d, "Reload", [])] {
            if case let .failure(e) = try call(sd, iface, method, args) { XCTFail("root's \(method): \(e.text)") }
        }
        // Answer is the engine's answer: no such prompt.
        guard case let .failure(e) = try call(sd, Self.d, "Answer", ["usb", "7", "allow", "true"]) else {
            return XCTFail("answered a prompt that is not open")
        }
        XCTAssertTrue(e.text.contains("is not open"), e.text)
        let status = try call(sd, Self.r, "GetStatus").get() as? [String: Any]
        XCTAssertEqual((status?["policy"] as? [String: Any])?["generation"] as? Int, 2, "Reload reloaded")
    }

    /// The busctl lines of README.md and docs/DBUS.md, as root, as written (DocsExamplesTests leaves them here).
    private func checkDocsExamples(_ sd: RealSystemd) throws {
        var ran = 0
        for file in ["README.md", "docs/DBUS.md"] {
            for block in try DocsExamplesTests.blocks(in: file) where block.language == "sh" {
                for command in DocsExamplesTests.commands(block) where DocsExamplesTests.callsTheBus(command) {
                    let r = try sd.run(["sh", "-c", command])
                    XCTAssertEqual(r.status, 0, "\(file):\(block.line): \(command): \(r.summary)")
                    ran += 1
                }
            }
        }
        XCTAssertEqual(ran, 23, "the docs' bus examples were found")
    }

    /// A user decides for their own processes without a password; for everyone only when polkit says yes; never
    /// reads another user's usage or prompts without it.
    private func checkUsers(_ sd: RealSystemd) throws {
        try checkOwnReadsAndEveryonesRefusals(sd)
        let own = try call(sd, as: Self.alice, Self.d, "Decide", ["sssbb", "asked", "wwan", "allow", "false", "false"])
        XCTAssertEqual(((try? own.get()) as? [String: Any])?["decided"].flatMap { ($0 as? [String: Any])?["for_uid"] as? Int },
                       Self.alice, "\(own)")
        for interactive in [false, true] {
            guard case let .failure(e) = try call(sd, as: Self.alice, interactive: interactive, Self.d, "Decide",
                                                  ["sssbb", "asked", "wwan", "deny", "false", "true"]) else {
                return XCTFail("alice decided for everyone without polkit's yes")
            }
            XCTAssertTrue(e.text.contains("needs authentication") || e.text.contains("does not allow"), e.text)
        }
        for (method, args) in [("GetUsage", ["sb", "", "true"]), ("GetPrompts", ["b", "true"]), ("GetApps", ["b", "true"]),
                               ("Subscribe", ["asb", "1", "apps", "true"])] {
            guard case let .failure(e) = try call(sd, as: Self.bob, Self.r, method, args) else {
                return XCTFail("bob read everyone's \(method)")
            }
            XCTAssertTrue(e.text.contains("read-all"), e.text)
        }
        if case let .failure(e) = try call(sd, as: Self.bob, Self.r, "GetUsage", ["sb", "", "false"]) {
            XCTFail("bob's own usage: \(e.text)")
        }
        let decisions = try call(sd, Self.r, "GetDecisions", ["b", "true"]).get() as? [[String: Any]] ?? []
        XCTAssertFalse(decisions.contains { $0["for_uid"] == nil }, "no decision for everyone: \(decisions)")
        try checkForgetOwn(sd)

        // The administrator's rule: alice manages (as a rule for a group would, docs/DBUS.md).
        try sd.write("""
            polkit.addRule(function(action, subject) {
                if (action.id == "org.netpermd.NetPerm1.manage" && subject.user == "alice") return polkit.Result.YES;
                if (action.id == "org.netpermd.NetPerm1.read-all" && subject.user == "bob") return polkit.Result.YES;
            });
            """, to: "/etc/polkit-1/rules.d/50-netpermd-test.rules")
        try sd.check(["systemctl", "restart", "polkit.service"])
        let everyone = try call(sd, as: Self.alice, Self.d, "Decide", ["sssbb", "asked", "wwan", "deny", "false", "true"])
        let decided = ((try? everyone.get()) as? [String: Any])?["decided"] as? [String: Any]
        XCTAssertEqual(decided?["decision"] as? String, "deny", "\(everyone)")
        XCTAssertNil(decided?["for_uid"], "for everyone: \(everyone)")
        guard case .failure = try call(sd, as: Self.alice, Self.r, "GetUsage", ["sb", "", "true"]) else {
            return XCTFail("manage is not read-all")
        }
        // bob may read everyone's (the rule's read-all): his subscription to every app is granted.
        let everyonesApps = try call(sd, as: Self.bob, Self.r, "Subscribe", ["asb", "1", "apps", "true"])
        XCTAssertEqual(((try? everyonesApps.get()) as? [String: Any])?["subscribed"] as? [String], ["apps"], "\(everyonesApps)")

        // Without polkit: masked (the bus may not start it; it said "did not answer: ...UnitMasked (RF-kill)" before
        // the bus's activation errors were read as not running), then not installed (stopped, and no activation file:
        // the bus knows no org.freedesktop.PolicyKit1). What needs it is refused, saying why; the rest and the socket
        // serve as before.
        let activation = "/usr/share/dbus-1/system-services/org.freedesktop.PolicyKit1.service"
        let reloadBus = ["busctl", "--system", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ReloadConfig"]
        try sd.check(["systemctl", "mask", "--runtime", "--now", "polkit.service"])
        try checkRefusedWithoutPolkit(sd)
        try sd.check(["systemctl", "unmask", "--runtime", "polkit.service"])
        try sd.check(["mv", activation, activation + ".hidden"])
        try sd.check(reloadBus)
        try checkRefusedWithoutPolkit(sd)
        if case let .failure(e) = try call(sd, as: Self.bob, Self.r, "GetApps", ["b", "false"]) { XCTFail("bob's own apps: \(e.text)") }
        let socket = try sd.run(sd.asUser(Self.bob, ["/usr/local/bin/netpermctl", "decide", "asked", "wwan", "allow"]))
        XCTAssertEqual(socket.status, 0, "the socket needs no polkit: \(socket.summary)")
        try sd.check(["mv", activation + ".hidden", activation])
        try sd.check(reloadBus)
    }

    /// A user reads their own with no polkit action; for everyone, with no agent to ask a person, each method is
    /// refused, naming the action it needs.
    private func checkOwnReadsAndEveryonesRefusals(_ sd: RealSystemd) throws {
        // Her own: no polkit action, no password.
        let app = try call(sd, as: Self.alice, Self.r, "QueryApp", ["sb", "shared", "false"])
        XCTAssertEqual(((try? app.get()) as? [String: Any])?["app"] as? String, "shared", "alice's own app: \(app)")
        for (method, args) in [("GetPrompts", ["b", "false"]), ("GetStatus", []), ("GetLinks", [])] {
            if case let .failure(e) = try call(sd, as: Self.alice, Self.r, method, args) { XCTFail("alice's \(method): \(e.text)") }
        }
        // For everyone, with no agent to ask a person: refused, naming the action.
        for (iface, method, args, action) in [(Self.d, "Forget", ["ssb", "asked", "", "true"], "manage"),
                                              (Self.d, "Answer", ["usb", "7", "allow", "true"], "manage"),
                                              (Self.d, "Reload", [], "manage"),
                                              (Self.r, "QueryApp", ["sb", "open", "true"], "read-all"),
                                              (Self.r, "GetDecisions", ["b", "true"], "read-all")] {
            guard case let .failure(e) = try call(sd, as: Self.bob, interactive: true, iface, method, args) else {
                return XCTFail("bob's \(method) for everyone without polkit's yes")
            }
            XCTAssertTrue(e.text.contains("NetPerm1.\(action)") && (e.text.contains("needs authentication")
                || e.text.contains("does not allow")), "\(method): \(e.text)")
        }
    }

    /// polkit cannot be asked: a decision for everyone and one of bob's own are refused with DBUS.md's words.
    private func checkRefusedWithoutPolkit(_ sd: RealSystemd) throws {
        for (who, args) in [(Self.alice, ["sssbb", "asked", "wwan", "deny", "false", "true"]),
                            (Self.bob, ["sssbb", "asked", "wwan", "allow", "false", "false"])] {
            guard case let .failure(e) = try call(sd, as: who, Self.d, "Decide", args) else {
                return XCTFail("decided without polkit")
            }
            XCTAssertTrue(e.text.contains("needs polkit's authorization: polkit is not running on this system"), e.text)
        }
    }

    /// A process of the test's in the container as `uid`, in a process group of its own (nsenter forks into the pid
    /// namespace): its stdin to write, its stdout read line by line, its stderr in `log`; killed, group and all, by
    /// the caller's `stop` (and at the test's end).
    private func spawnOwn(_ sd: RealSystemd, as uid: Int, _ argv: [String], log: String)
        throws -> (input: Int32, output: FDLineReader, stop: () -> Void) {
        let (inR, inW) = try Subprocess.makePipe()
        let (outR, outW) = try Subprocess.makePipe()
        let p = try Subprocess.spawn(["nsenter", "-t", String(sd.pid1), "-a"] + sd.asUser(uid, argv), stdin: .fd(inR),
                                     stdout: .fd(outW), stderr: .appendFile(log), ownGroup: true)
        close(inR)
        close(outW)
        var stopped = false
        let stop = { if !stopped { stopped = true; close(inW); _ = p.killAndReap(); close(outR) } }
        addTeardownBlock(stop)
        return (inW, FDLineReader(fd: outR), stop)
    }

    /// A user answers their own app's prompt over the bus, with no password (decide-own) and nothing of the
    /// socket's: alice's agent is a `Subscribe(["prompts"])` of hers on the bus, her app (a copy of socat as
    /// /usr/bin/maps, WWAN=ask, kept running: a prompt is withdrawn once every process that asked has exited) asks
    /// and is awaiting-decision, she hears PromptChanged and calls `Answer` for her own processes, and the same
    /// app's next QUERY is ok by her decision. bob's `Answer` of her prompt is refused as not his to answer.
    private func checkAnswerOwn(_ sd: RealSystemd) throws {
        try sd.check(["cp", "/usr/bin/socat", "/usr/bin/maps"])
        let log = try makeTempDir() + "/answer-own.log"
        showOnFailure("alice's agent and app") { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        let script = try String(contentsOfFile: Repository.root + "/Tests/IntegrationTests/Support/bus-client.py", encoding: .utf8)
        try sd.write(script, to: "/usr/local/lib/npt-bus-client.py")
        let agent = try spawnOwn(sd, as: Self.alice, ["/usr/bin/python3", "/usr/local/lib/npt-bus-client.py", "agent"], log: log)
        defer { agent.stop() }
        XCTAssertEqual(agent.output.nextLine(timeout: 10), "ready", "\(agent.output.history)")
        let app = try spawnOwn(sd, as: Self.alice, ["/usr/bin/maps", "-", "UNIX-CONNECT:\(Self.socket)"], log: log)
        defer { app.stop() }
        func query() throws -> [String: Any] {
            let bytes = Array("QUERY\n".utf8)
            guard write(app.input, bytes, bytes.count) == bytes.count else { throw HarnessError("write to alice's app") }
            return try JSONValue.object(try XCTUnwrap(app.output.nextLine(timeout: 10), "alice's app had no answer"))
        }
        let asked = try query()
        XCTAssertEqual(asked["reason"] as? String, "awaiting-decision", "alice's agent on the bus is an agent: \(asked)")
        let line = try XCTUnwrap(agent.output.nextLine(timeout: 10), "alice heard no prompt: \(agent.output.history)")
        let raised = try JSONValue.object(line)
        XCTAssertEqual(raised["change"] as? String, "prompt", line)
        let prompt = try XCTUnwrap(raised["prompt"] as? [String: Any], line)
        XCTAssertEqual(prompt["app"] as? String, "maps", line)
        XCTAssertEqual(prompt["uid"] as? Int, Self.alice, line)
        let id = String(try XCTUnwrap(prompt["id"] as? Int, line))

        guard case let .failure(e) = try call(sd, as: Self.bob, Self.d, "Answer", ["usb", id, "allow", "false"]) else {
            return XCTFail("bob answered alice's prompt")
        }
        XCTAssertTrue(e.text.contains("is not open") && e.text.contains("not yours"), e.text)
        let mine = try call(sd, as: Self.alice, Self.d, "Answer", ["usb", id, "allow", "false"])
        let answered = ((try? mine.get()) as? [String: Any])?["answered"] as? [String: Any]
        XCTAssertEqual(answered?["for_uid"] as? Int, Self.alice, "for her own processes: \(mine)")
        XCTAssertEqual(answered?["decision"] as? String, "allow", "\(mine)")
        let closed = try JSONValue.object(try XCTUnwrap(agent.output.nextLine(timeout: 10), "\(agent.output.history)"))
        XCTAssertEqual(closed["change"] as? String, "prompt-answered", "\(closed)")
        let now = try query()
        XCTAssertEqual(now["reason"] as? String, "ok", "\(now)")
        XCTAssertEqual((now["sources"] as? [String: Any])?["wwan"] as? String, "user-decision", "\(now)")
        XCTAssertEqual((now["permissions"] as? [String: Any])?["wwan"] as? String, "allow", "\(now)")
        // Everyone's maps still asks (no agent for everyone listens now): her answer was hers alone.
        let everyone = try JSONValue.object(try sd.check(["/usr/local/bin/netpermctl", "--json", "query", "maps"]).stdout)
        XCTAssertEqual((everyone["sources"] as? [String: Any])?["wwan"] as? String, "no-agent", "\(everyone)")
        if case let .failure(e) = try call(sd, as: Self.alice, Self.d, "Forget", ["ssb", "maps", "", "false"]) {
            XCTFail("alice forgets her answer: \(e.text)")
        }
        // Asked again, her prompt is answered for everyone: not by bob (manage), by root.
        XCTAssertEqual(try query()["reason"] as? String, "awaiting-decision", "her answer forgotten")
        let again = try JSONValue.object(try XCTUnwrap(agent.output.nextLine(timeout: 10), "\(agent.output.history)"))
        let second = String(try XCTUnwrap((again["prompt"] as? [String: Any])?["id"] as? Int, "\(again)"))
        guard case let .failure(refused) = try call(sd, as: Self.bob, Self.d, "Answer", ["usb", second, "allow", "true"]) else {
            return XCTFail("bob answered for everyone")
        }
        XCTAssertTrue(refused.text.contains("NetPerm1.manage"), refused.text)
        let root = try call(sd, Self.d, "Answer", ["usb", second, "allow", "true"])
        let forAll = ((try? root.get()) as? [String: Any])?["answered"] as? [String: Any]
        XCTAssertEqual(forAll?["decision"] as? String, "allow", "root's Answer for everyone: \(root)")
        XCTAssertNil(forAll?["for_uid"], "for everyone: \(root)")
        let everyones = try JSONValue.object(try sd.check(["/usr/local/bin/netpermctl", "--json", "query", "maps"]).stdout)
        XCTAssertEqual((everyones["sources"] as? [String: Any])?["wwan"] as? String, "decision", "\(everyones)")
        if case let .failure(e) = try call(sd, Self.d, "Forget", ["ssb", "maps", "", "true"]) { XCTFail("root forgets: \(e.text)") }
    }

    /// alice's own decisions as she lists them on the bus, "app kind".
    private func ownDecisions(_ sd: RealSystemd, _ uid: Int) throws -> Set<String> {
        let list = try call(sd, as: uid, Self.r, "GetDecisions", ["b", "false"]).get() as? [[String: Any]] ?? []
        return Set(list.map { "\($0["app"] ?? "?") \($0["kind"] ?? "?") \($0["for_uid"] ?? "everyone")" })
    }

    /// A user forgets their own decision over the bus (decide-own, no password): bob's Forget of the same app
    /// leaves alice's, alice's removes it.
    private func checkForgetOwn(_ sd: RealSystemd) throws {
        let mine = "asked wwan \(Self.alice)"
        XCTAssertTrue(try ownDecisions(sd, Self.alice).contains(mine), "alice decided above")
        let bobs = try call(sd, as: Self.bob, Self.d, "Forget", ["ssb", "asked", "wwan", "false"])
        XCTAssertEqual(((try? bobs.get()) as? [String: Any])?["forgotten"] as? Bool, false, "bob has none: \(bobs)")
        XCTAssertTrue(try ownDecisions(sd, Self.alice).contains(mine), "bob's Forget left alice's")
        let hers = try call(sd, as: Self.alice, Self.d, "Forget", ["ssb", "asked", "wwan", "false"])
        let forgot = (try? hers.get()) as? [String: Any]
        XCTAssertEqual(forgot?["forgotten"] as? Bool, true, "\(hers)")
        XCTAssertEqual(forgot?["for_uid"] as? Int, Self.alice, "\(hers)")
        XCTAssertFalse(try ownDecisions(sd, Self.alice).contains(mine), "alice's Forget removed hers")
    }

    /// The privacy report on the bus (docs/PRIVACY.md, issue 50): KeepReport, GetReport and ResetReport are the
    /// socket's KEEP-REPORT, REPORT and RESET-REPORT for the caller the bus names. A user's report over the bus is
    /// the socket's for the same process, member by member (the engine's JSON as it is: its shape is PRIVACY.md's);
    /// what a user turned on over the bus the socket says; another's is refused by both rules the socket has.
    private func checkReport(_ sd: RealSystemd) throws {
        let kept = try call(sd, as: Self.alice, Self.d, "KeepReport", ["b", "true"])
        XCTAssertEqual(((try? kept.get()) as? [String: Any])?["yours"] as? Bool, true, "\(kept)")
        for (uid, yours) in [(Self.alice, true), (Self.bob, false)] {
            let both = try client(sd, as: uid, ["compare", Self.socket, "GetReport"])
            var socket = try XCTUnwrap(both["socket"] as? [String: Any], "\(both)")
            XCTAssertEqual(socket.removeValue(forKey: "ok") as? Bool, true, "\(both)")
            XCTAssertEqual(socket["yours"] as? Bool, yours, "\(uid)'s own choice, made on the bus, read on the socket: \(both)")
            XCTAssertEqual(Self.withoutNulls(socket) as? NSDictionary, both["bus"] as? NSDictionary, "\(uid)'s report")
        }
        // Everyone's needs read-all; an app that is not the caller's alone is not found, as on the socket (shared is
        // alice's and bob's, open no one person's).
        for (method, args) in [("GetReport", ["sb", "", "true"]), ("ResetReport", ["sb", "", "true"])] {
            guard case let .failure(e) = try call(sd, as: Self.bob, method == "GetReport" ? Self.r : Self.d, method, args) else {
                return XCTFail("bob's \(method) of everyone's report")
            }
            XCTAssertTrue(e.text.contains(method == "GetReport" ? "read-all" : "manage"), e.text)
        }
        for app in ["shared", "open"] {
            for (iface, method) in [(Self.r, "GetReport"), (Self.d, "ResetReport")] {
                guard case let .failure(e) = try call(sd, as: Self.bob, iface, method, ["sb", app, "false"]) else {
                    return XCTFail("bob's \(method) of \(app)")
                }
                XCTAssertTrue(e.text.contains("whose report you may see"), e.text)
            }
            XCTAssertNotNil(try? call(sd, Self.r, "GetReport", ["sb", app, "true"]).get(), "root reads \(app)'s")
        }
        let cleared = try call(sd, as: Self.alice, Self.d, "ResetReport", ["sb", "", "false"])
        XCTAssertNotNil(try? cleared.get(), "alice clears her own: \(cleared)")
        let off = try call(sd, as: Self.alice, Self.d, "KeepReport", ["b", "false"])
        XCTAssertEqual(((try? off.get()) as? [String: Any])?["yours"] as? Bool, false, "\(off)")
    }

    /// Hostile callers. One that writes a SENDER header naming the daemon's own connection (whose uid is
    /// privileged) on a Decide for everyone: the bus daemon puts the real sender there, so the call is bob's,
    /// polkit says so, and nothing is decided. One that names a pid: no method takes one (the caller is who the
    /// bus says; Answer's `u` is a prompt's id), and a pid added to a method's arguments is InvalidArgs.
    private func checkHostile(_ sd: RealSystemd) throws {
        let owner = try sd.check(["busctl", "--system", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                  "org.freedesktop.DBus", "GetNameOwner", "s", "org.netpermd.NetPerm1"]).stdout
        let victim = try XCTUnwrap(owner.split(separator: "\"").dropFirst().first.map(String.init), owner)
        let forged = try client(sd, as: Self.bob, ["forge", victim])
        XCTAssertEqual(forged["reply"] as? String, "error", "\(forged)")
        XCTAssertEqual(forged["error"] as? String, "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired", "\(forged)")
        XCTAssertNotEqual(forged["me"] as? String, victim)
        let decisions = try call(sd, Self.r, "GetDecisions", ["b", "true"]).get() as? [[String: Any]] ?? []
        XCTAssertFalse(decisions.contains { $0["for_uid"] == nil }, "nothing decided for everyone: \(decisions)")

        // Another user's process: the container's init, root's.
        let pid = "1"
        for (method, args) in [("Query", ["u", pid]), ("QueryApp", ["sbu", "shared", "false", pid]),
                               ("GetApps", ["bu", "false", pid]), ("GetReport", ["sbu", "", "false", pid])] {
            guard case let .failure(e) = try call(sd, as: Self.bob, Self.r, method, args) else {
                return XCTFail("\(method) took a pid")
            }
            XCTAssertTrue(e.text.contains("takes ("), "\(method): \(e.text)")
        }
    }

    private func client(_ sd: RealSystemd, as uid: Int?, _ args: [String]) throws -> [String: Any] {
        let script = try String(contentsOfFile: Repository.root + "/Tests/IntegrationTests/Support/bus-client.py", encoding: .utf8)
        try sd.write(script, to: "/usr/local/lib/npt-bus-client.py")
        let argv = ["/usr/bin/python3", "/usr/local/lib/npt-bus-client.py"] + args
        let r = try sd.check(uid.map { sd.asUser($0, argv) } ?? argv)
        return try JSONValue.object(r.lines.last ?? "")
    }

    /// The same process asks the socket and the bus: the same verdict, member by member, for every reason the
    /// policy's apps have (ok, routed-elsewhere, denied by kind, by metered) and for a user's own app.
    private func checkSameVerdicts(_ sd: RealSystemd, _ cases: [(Int?, [String])], reasons expected: Set<String>) throws {
        var reasons: Set<String> = []
        for (uid, args) in cases {
            let both = try client(sd, as: uid, [args[0], Self.socket] + args.dropFirst())
            var socket = try XCTUnwrap(both["socket"] as? [String: Any], "\(both)")
            XCTAssertEqual(socket.removeValue(forKey: "ok") as? Bool, true, "\(both)")
            let expected = Self.withoutNulls(socket) as? NSDictionary
            XCTAssertEqual(expected, both["bus"] as? NSDictionary, "\(args) as \(uid ?? 0)")
            reasons.insert(socket["reason"] as? String ?? "?")
        }
        XCTAssertEqual(reasons, expected, "the reasons compared")
        comparedReasons.formUnion(reasons)
    }

    /// dave's app sends a datagram out of wwan0 (metered, the default route): its one-byte budget is used up as the
    /// kernel's quota says, and the bus and the socket say budget-exhausted alike, everyone's view and dave's own.
    /// Counting needs CAP_NET_ADMIN, which the shipped unit does not grant (docs/USAGE.md): the daemon restarts with
    /// the shipped drop-in that does (its policy keeps Mode=off).
    private func checkBudgetExhausted(_ sd: RealSystemd) throws {
        let dropIn = try String(contentsOfFile: Repository.root + "/systemd/netpermd-enforcement.conf", encoding: .utf8)
        try sd.write(dropIn, to: "/etc/systemd/system/netpermd.service.d/netpermd-enforcement.conf")
        try sd.check(["systemctl", "daemon-reload"])
        try sd.check(["systemctl", "restart", "netpermd.service"])
        try waitUntil("the daemon counts and owns its name again", timeout: 10) {
            let status = try sd.run(["/usr/local/bin/netpermctl", "--json", "status"])
            let name = try sd.run(["busctl", "--system", "status", "org.netpermd.NetPerm1"])
            return (status.stdout.contains("\"state\":\"counting\"") && name.status == 0, status.summary + name.summary)
        }
        // A subscriber to everyone's usage hears the budget's UsageReached; everyone hears UsageChanged.
        let usage = try listen(sd, as: 0, topics: "usage", everyone: true, ["UsageReached", "UsageChanged"])
        defer { usage.stop() }
        let send = "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x' * 100, ('192.0.2.1', 9))"
        showOnFailure("the container's nftables and usage") {
            ((try? sd.run(["nft", "list", "ruleset"]))?.summary ?? "?") + ((try? sd.run(["/usr/local/bin/netpermctl", "usage"]))?.stdout ?? "?")
                + ((try? sd.run(["/usr/local/bin/netpermctl", "--json", "status"]))?.stdout ?? "?")
        }
        try sd.check(sd.asUser(Self.dave, ["/usr/bin/python3", "-c", send]))
        try waitUntil("spender's budget is used up", timeout: 10) {
            let r = try sd.run(["/usr/local/bin/netpermctl", "--json", "query", "spender"])
            return (r.stdout.contains("\"budget-exhausted\""), r.summary)
        }
        try checkSameVerdicts(sd, [(nil, ["compare", "QueryApp", "spender"]), (Self.dave, ["compare", "Query"])],
                              reasons: ["budget-exhausted"])
        // 80% and 100% may both be announced, each its UsageReached; UsageChanged at least once.
        var changed = false, full = false
        while !(changed && full) {
            let line = try XCTUnwrap(usage.output.nextLine(timeout: 10), "no usage signals: \(usage.output.history)")
            let signal = try JSONValue.object(line)
            changed = changed || signal["member"] as? String == "UsageChanged"
            guard signal["member"] as? String == "UsageReached" else { continue }
            let reached = (signal["args"] as? [Any])?.first as? [String: Any]
            XCTAssertEqual(reached?["app"] as? String, "spender", line)
            full = full || reached?["percent"] as? Int == 100
        }
    }

    /// The test client run in the container as `uid` (nil: root), its lines read as they come; killed at the end.
    private func streaming(_ sd: RealSystemd, as uid: Int?, _ args: [String]) throws -> FDLineReader {
        let script = try String(contentsOfFile: Repository.root + "/Tests/IntegrationTests/Support/bus-client.py", encoding: .utf8)
        try sd.write(script, to: "/usr/local/lib/npt-bus-client.py")
        let argv = ["/usr/bin/python3", "/usr/local/lib/npt-bus-client.py"] + args
        let log = try makeTempDir() + "/client.log"
        showOnFailure("the bus client's errors") { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        let pipe = try Subprocess.makePipe()
        let p = try Subprocess.spawn(["nsenter", "-t", String(sd.pid1), "-a"] + (uid.map { sd.asUser($0, argv) } ?? argv),
                                     stdin: .devNull, stdout: .fd(pipe.write), stderr: .appendFile(log))
        close(pipe.write)
        addTeardownBlock { p.killAndReap(); close(pipe.read) }
        return FDLineReader(fd: pipe.read)
    }

    /// A subscriber's signals carry what the socket's events do: alice's own decision reaches her as AppChanged
    /// with her `app` event's members, within 50 ms of it; bob, subscribed and hearing every AppChanged whoever it
    /// is for, hears nothing of alice's and his own decision first (a broadcast failed here: bob heard alice's deny).
    private func checkSubscriptions(_ sd: RealSystemd) throws {
        let alice = try streaming(sd, as: Self.alice, ["follow", Self.socket, "shared"])
        let bob = try streaming(sd, as: Self.bob, ["follow", Self.socket, "shared"])
        XCTAssertEqual(alice.nextLine(timeout: 10), "ready", "\(alice.history)")
        XCTAssertEqual(bob.nextLine(timeout: 10), "ready", "\(bob.history)")
        // Each decides otherwise: what bob hears is his own verdict, never alice's.
        let decisions = [Self.alice: "deny", Self.bob: "allow"]
        let decide = { (uid: Int) throws in
            try sd.check(sd.asUser(uid, ["/usr/local/bin/netpermctl", "decide", "shared", "wwan", decisions[uid] ?? "?"]))
        }
        try decide(Self.alice)
        for (who, out, uid) in [("alice", alice, Self.alice), ("bob", bob, Self.bob)] {
            if uid == Self.bob { try decide(Self.bob) }
            let line = try XCTUnwrap(out.nextLine(timeout: 10), "\(who) heard no AppChanged: \(out.history)")
            let got = try JSONValue.object(line)
            var socket = try XCTUnwrap(got["socket"] as? [String: Any], line)
            var bus = try XCTUnwrap(got["bus"] as? [String: Any], line)
            for k in ["event", "seq"] { socket[k] = nil }
            bus["seq"] = nil
            XCTAssertEqual(Self.withoutNulls(socket) as? NSDictionary, bus as NSDictionary, "\(who): \(line)")
            XCTAssertEqual((bus["sources"] as? [String: Any])?["wwan"] as? String, "user-decision", "\(who)'s own decision: \(line)")
            XCTAssertEqual((bus["permissions"] as? [String: Any])?["wwan"] as? String, decisions[uid], "\(who)'s own: \(line)")
            XCTAssertEqual(got["signals"] as? Int, 1, "\(who) heard only the AppChanged of their own change: \(line)")
            let at = (bus: try XCTUnwrap(got["bus_at"] as? Double), socket: try XCTUnwrap(got["socket_at"] as? Double))
            print(String(format: "BusFaceTests: %@'s AppChanged %.2f ms after the socket's app event", who, (at.bus - at.socket) * 1000))
            XCTAssertLessThan(abs(at.bus - at.socket), 0.05, line)
        }
        for uid in [Self.alice, Self.bob] { try sd.check(sd.asUser(uid, ["/usr/local/bin/netpermctl", "forget", "shared"])) }
    }

    /// An app asking while an agent listens raises a prompt: PromptsChanged says so on the bus.
    private func checkPromptSignal(_ sd: RealSystemd) throws {
        try sd.check(["cp", "/usr/bin/socat", "/usr/bin/maps"])
        let pipe = try Subprocess.makePipe()
        let p = try Subprocess.spawn(["nsenter", "-t", String(sd.pid1), "-a", "/usr/bin/python3",
                                      "/usr/local/lib/npt-bus-client.py", "signal", Self.socket, "PromptsChanged"],
                                     stdin: .devNull, stdout: .fd(pipe.write), stderr: .devNull)
        close(pipe.write)
        let out = FDLineReader(fd: pipe.read)
        defer { p.killAndReap(); close(pipe.read) }
        XCTAssertEqual(out.nextLine(timeout: 10), "ready")
        let agent = try streaming(sd, as: nil, ["prompt", Self.socket])
        XCTAssertEqual(agent.nextLine(timeout: 10), "ready", "\(agent.history)")
        let ask = try sd.run(["sh", "-c", "echo QUERY | /usr/bin/maps -t 2 - UNIX-CONNECT:\(Self.socket)"])
        XCTAssertTrue(ask.stdout.contains("awaiting-decision"), ask.summary)
        XCTAssertEqual(out.nextLine(timeout: 15), "{\"got\": true}", "\(out.history)")
        // A subscriber of prompts on the bus (an agent there, as on the socket) hears the prompt's body itself.
        let line = try XCTUnwrap(agent.nextLine(timeout: 15), "no PromptChanged: \(agent.history)")
        let got = try JSONValue.object(line)
        var socket = try XCTUnwrap(got["socket"] as? [String: Any], line)
        let bus = try XCTUnwrap(got["bus"] as? [Any], line)
        XCTAssertEqual(bus.first as? String, "prompt", line)
        var body = try XCTUnwrap(bus.last as? [String: Any], line)
        for k in ["event", "seq"] { socket[k] = nil }
        body["seq"] = nil
        XCTAssertEqual(Self.withoutNulls(socket) as? NSDictionary, body as NSDictionary, line)
        XCTAssertEqual(body["app"] as? String, "maps", line)
        let at = (bus: try XCTUnwrap(got["bus_at"] as? Double), socket: try XCTUnwrap(got["socket_at"] as? Double))
        print(String(format: "BusFaceTests: PromptChanged %.2f ms after the socket's prompt event", (at.bus - at.socket) * 1000))
        XCTAssertLessThan(abs(at.bus - at.socket), 0.05, line)
    }

    /// A link's change comes as LinkChanged within 50 ms of the socket's link event, to one process listening to both.
    private func checkSignalTiming(_ sd: RealSystemd) throws {
        let script = try String(contentsOfFile: Repository.root + "/Tests/IntegrationTests/Support/bus-client.py", encoding: .utf8)
        try sd.write(script, to: "/usr/local/lib/npt-bus-client.py")
        let pipe = try Subprocess.makePipe()
        let p = try Subprocess.spawn(["nsenter", "-t", String(sd.pid1), "-a", "/usr/bin/python3",
                                      "/usr/local/lib/npt-bus-client.py", "race", Self.socket],
                                     stdin: .devNull, stdout: .fd(pipe.write), stderr: .devNull)
        close(pipe.write)
        let out = FDLineReader(fd: pipe.read)
        defer { p.killAndReap(); close(pipe.read) }
        XCTAssertEqual(out.nextLine(timeout: 10), "ready")
        try sd.namespace.ip("link", "set", "wlan0p", "down")
        let line = try XCTUnwrap(out.nextLine(timeout: 15), "no times: \(out.history)")
        let times = try JSONValue.object(line)
        let bus = try XCTUnwrap(times["bus"] as? Double, line), socket = try XCTUnwrap(times["socket"] as? Double, line)
        print(String(format: "BusFaceTests: LinkChanged %.2f ms after the socket's link event", (bus - socket) * 1000))
        XCTAssertLessThan(abs(bus - socket), 0.05, line)
    }

    /// A process of the test's in the container as `uid`: its stdin to write, its stdout read line by line; killed
    /// at the end (and with the container).
    private func spawnInside(_ sd: RealSystemd, _ argv: [String], log: String) throws -> (input: Int32, output: FDLineReader) {
        let (inR, inW) = try Subprocess.makePipe()
        let (outR, outW) = try Subprocess.makePipe()
        let p = try Subprocess.spawn(["nsenter", "-t", String(sd.pid1), "-a"] + argv, stdin: .fd(inR), stdout: .fd(outW),
                                     stderr: .appendFile(log))
        close(inR)
        close(outW)
        addTeardownBlock { close(inW); p.killAndReap(); close(outR) }
        return (inW, FDLineReader(fd: outR))
    }

    /// The settings app as a person who is no administrator meets it: alice runs it under an X server, with her own
    /// session and accessibility buses, driven through its accessibility tree (Support/settings-driver.py), with a
    /// polkit agent registered for its process (Support/polkit-agent.py, which runs polkit's own password helper)
    /// standing for her desktop's password dialog. "For everyone on this computer", then "Wi-Fi only" for app shared: polkit asks for
    /// the password of carol (in group sudo, Debian's polkit administrators). A wrong one: refused, said in the
    /// window, and nothing decided; the right one: shared's cellular denied for everyone (root's QUERY on the
    /// socket), and alice's row says her administrator set it.
    func testTheSettingsAppDecidesForEveryoneWithAnAdministratorsPassword() throws {
        let sd = try boot()
        try sd.check(["useradd", "--uid", "1502", "--user-group", "--groups", "sudo", "--no-create-home",
                      "--home-dir", "/nonexistent", "--shell", "/bin/sh", "carol"])
        let password = try sd.run(["chpasswd"], input: "carol:npt-admin-pw\n")
        XCTAssertEqual(password.status, 0, password.summary)
        // The app and the test's scripts, copied in (the container's / is the host's, without its other mounts).
        let share = "/usr/local/share/npt-settings"
        try FileManager.default.createDirectory(atPath: sd.root + share, withIntermediateDirectories: true)
        _ = try Subprocess.run(["cp", "-r", Repository.path("settings"), sd.root + share + "/"], timeout: 10)
        for script in ["settings-driver.py", "polkit-agent.py"] {
            let text = try String(contentsOfFile: Repository.path("Tests/IntegrationTests/Support/" + script), encoding: .utf8)
            try sd.write(text, to: share + "/" + script)
        }
        try sd.check(["install", "-d", "-o", "alice", "-g", "alice", "-m", "0700", "/home/alice", "/run/user/\(Self.alice)"])
        let log = try makeTempDir() + "/settings.log"
        showOnFailure("the settings app's, its driver's and the agent's errors") {
            (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        }
        // -displayfd: Xvfb picks a free display and writes its number once it accepts connections (a socket's file
        // alone said it too early: GTK could not open the display).
        let x = try spawnInside(sd, ["Xvfb", "-displayfd", "1", "-ac", "-nolisten", "tcp", "-screen", "0", "1024x768x24"], log: log)
        let display = try XCTUnwrap(x.output.nextLine(timeout: 15), "Xvfb did not start")
        let env = ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/alice", "XDG_RUNTIME_DIR=/run/user/\(Self.alice)",
                   "DISPLAY=:\(display)", "LANG=C.UTF-8", "GSETTINGS_BACKEND=memory", "NETPERMD_SOCKET=\(Self.socket)"]
        let driver = try spawnInside(sd, sd.asUser(Self.alice, ["/usr/bin/python3", share + "/settings-driver.py", "serve",
                                                                share + "/settings/netpermd-settings"], environment: env), log: log)
        func ask(_ command: String) throws -> [String: Any] {
            let bytes = Array((command + "\n").utf8)
            guard write(driver.input, bytes, bytes.count) == bytes.count else { throw HarnessError("write to the driver") }
            let answer = try JSONValue.object(try XCTUnwrap(driver.output.nextLine(timeout: 30), "\(command): no answer"))
            if let e = answer["error"] { XCTFail("\(command): \(e)") }
            return answer
        }
        let ready = try JSONValue.object(try XCTUnwrap(driver.output.nextLine(timeout: 60), "the driver did not start"))
        let pid = try XCTUnwrap(ready["pid"] as? Int, "\(ready)")
        /// The agent, registered for the app's process, that types `password` when asked.
        func agent(typing password: String) throws -> FDLineReader {
            let agent = try spawnInside(sd, sd.asUser(Self.alice, ["/usr/bin/python3", share + "/polkit-agent.py", String(pid),
                                                                   password]), log: log)
            XCTAssertEqual(agent.output.nextLine(timeout: 15), "ready", "polkit has the agent: \(agent.output.history)")
            return agent.output
        }
        func everyonesWWAN() throws -> String? {
            let v = try JSONValue.object(try sd.check(["/usr/local/bin/netpermctl", "--json", "query", "shared"]).stdout)
            return (v["sources"] as? [String: Any])?["wwan"] as? String == "decision"
                ? (v["permissions"] as? [String: Any])?["wwan"] as? String : nil
        }
        try waitUntil("alice's apps are listed", timeout: 20, interval: 0.1) {
            let rows = (try ask("apps")["apps"] as? [[String: Any]]) ?? []
            return (rows.contains { $0["name"] as? String == "shared" }, "\(rows)")
        }
        _ = try ask("open shared")
        _ = try ask("check For everyone on this computer")
        try waitUntil("Wi-Fi only can be pressed for everyone", timeout: 10, interval: 0.05) {
            let page = try ask("app")
            return ((page["sensitive"] as? [String: Bool])?["Wi-Fi only"] == true, "\(page)")
        }

        // A wrong password: polkit says no, the window says so, nothing is decided.
        var typing = try agent(typing: "not-the-password")
        _ = try ask("choose shared Wi-Fi only")
        XCTAssertEqual(typing.nextLine(timeout: 20), #"{"asked": "carol"}"#, "\(typing.history)")
        XCTAssertEqual(typing.nextLine(timeout: 20), #"{"outcome": "failed"}"#, "\(typing.history)")
        try waitUntil("the window says it was not changed", timeout: 15, interval: 0.1) {
            let texts = (try ask("texts")["texts"] as? [String]) ?? []
            return (texts.contains("Not changed for everyone: not authorized"), "\(texts)")
        }
        XCTAssertNil(try everyonesWWAN(), "refused: nothing decided for everyone")

        // The administrator's password: decided for everyone, and alice's window follows.
        typing = try agent(typing: "npt-admin-pw")
        _ = try ask("choose shared Wi-Fi only")
        XCTAssertEqual(typing.nextLine(timeout: 20), #"{"asked": "carol"}"#, "\(typing.history)")
        XCTAssertEqual(typing.nextLine(timeout: 20), #"{"outcome": "complete"}"#, "\(typing.history)")
        try waitUntil("shared's cellular is denied for everyone", timeout: 15, interval: 0.1) {
            let wwan = try everyonesWWAN()
            return (wwan == "deny", "\(wwan ?? "undecided")")
        }
        let decided = try JSONValue.object(try sd.check(["/usr/local/bin/netpermctl", "--json", "decisions"]).stdout)
        print("BusFaceTests: decisions after the password: \(decided)")
        try waitUntil("alice's row says her administrator set it", timeout: 10, interval: 0.1) {
            let rows = (try ask("apps")["apps"] as? [[String: Any]]) ?? []
            let row = rows.first { $0["name"] as? String == "shared" }
            return (row?["choice"] as? String == "Set by your administrator", "\(row ?? [:])")
        }
    }

    /// `netpermd_connections_total`: the socket's connections and the bus's calls.
    private func connections(_ sd: RealSystemd) throws -> Int {
        let text = try sd.check(["/usr/local/bin/netpermctl", "metrics"]).stdout
        let line = text.split(separator: "\n").first { $0.hasPrefix("netpermd_connections_total ") } ?? ""
        return Int(Double(line.split(separator: " ").last ?? "") ?? -1)
    }

    /// One caller floods the bus face with 10,000 calls a second and never reads a reply: the socket's good client
    /// is answered meanwhile (p99), and the face answers root right after. The bus daemon, not the caller, bounds the
    /// rate that reaches the bus: it stops reading a caller's socket while it is busy, and took 7,800-10,000 calls a
    /// second of the 10,000 offered on 2 cores at loads of 5-15 (7,300 of 20,000 offered at 15), so the test asks for
    /// 6,000, twice what the old bound (10,000 in 3 s) let pass (docs/DBUS.md).
    func testAFloodingCallerStallsNothing() throws {
        let sd = try boot()
        let good = GoodClient(socket: sd.root + Self.socket, app: "open")
        try good.start()
        let before = try connections(sd)
        let flood = try client(sd, as: Self.alice, ["flood", "3", "10000"])
        good.stop()
        // Each call is a connection of the engine's: how many of the flood's the daemon answered.
        let served = try connections(sd) - before
        XCTAssertGreaterThan(served, 1_000, "the flood reached the daemon (the bus refuses a caller more than 128 calls waiting)")
        let latencies = good.latencies.sorted()
        XCTAssertGreaterThan(latencies.count, 100, "the good client kept asking")
        XCTAssertEqual(good.failures, [])
        let p99 = latencies[Int(Double(latencies.count) * 0.99)]
        print(String(format: "BusFaceTests: flood of %@ calls in 3 s (%@ a second), %d answered; good client's QUERY p99 %.2f ms, worst %.1f ms",
                     "\(flood["sent"] ?? 0)", "\(flood["rate"] ?? 0)", served, p99 * 1000, (latencies.last ?? 0) * 1000))
        XCTAssertGreaterThan(flood["rate"] as? Int ?? 0, 6_000, "the flood reached the bus at about 10,000 calls a second: \(flood)")
        XCTAssertLessThan(p99, 0.1, "p99 of the good client's QUERY")
        let t = monotonicNow()
        if case let .failure(e) = try call(sd, Self.r, "GetStatus") { XCTFail("after the flood: \(e.text)") }
        XCTAssertLessThan(monotonicNow() - t, 2, "root answered at once after the flood")
    }
}
