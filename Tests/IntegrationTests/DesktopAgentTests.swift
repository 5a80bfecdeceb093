// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `netpermctl agent --notify` as a desktop user meets it: the user (not root, not in group netperm) runs the agent on
/// their own session bus, with python-dbusmock's notification server (its `actions` capability passed) or a real
/// dunst under Xvfb; their app's first blocked connection (`Mode=block`) or its asking raises one notification, and
/// each action decides for that user's uid only. Another user's agent never sees it. Each bus is the test's own, run
/// as its user, with no service directories (so nothing, dunst included, is activated on it).
final class DesktopAgentTests: IntegrationTestCase {
    static let alice: UInt32 = 4201, bob: UInt32 = 4202
    /// alice as the agent names her: her name where the agent's view of the user database has her, else her uid.
    static var aliceName: String { getpwuid(alice).map { String(cString: $0.pointee.pw_name) } ?? "uid \(alice)" }

    static let policy = """
        [Enforcement]
        Mode=block

        [Interface wwan0]
        Kind=wwan

        [App maps]
        User=4201 4202
        WWAN=ask

        [Defaults]
        PromptTimeoutSec=3

        """

    struct Desk {
        var bed: EnforcementBed
        var dir: String
        var socket: String
        var users: TestUsers
        var decisions: String { dir + "/state/decisions.conf" }
    }

    /// The daemon in an enforcement bed whose only link is wwan0 (metered, as cellular is), its rules in force, and
    /// alice and bob with passwd entries of their own. `entries`: desktop entries installed for everyone (by their
    /// file name), in an `XDG_DATA_DIRS` of the daemon's.
    func makeDesk(_ policy: String = DesktopAgentTests.policy, entries: [String: String] = [:]) throws -> Desk {
        let bed = try EnforcementBed(self)
        try bed.addLink("wwan0", subnet: 2)
        try bed.ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0")
        let dir = try makeTempDir()
        chmod(dir, 0o755)
        let socket = dir + "/netpermd.sock"
        var wrapper: [String] = []
        if !entries.isEmpty {
            try FileManager.default.createDirectory(atPath: dir + "/share/applications", withIntermediateDirectories: true)
            for (file, text) in entries { try text.write(toFile: dir + "/share/applications/" + file, atomically: true, encoding: .utf8) }
            wrapper = ["env", "XDG_DATA_DIRS=\(dir)/share"]
        }
        _ = try startDaemon(in: bed.ns, socket: socket, config: try writeConfig(policy, in: dir), wrapper: wrapper,
                            nsenter: true)
        if policy.contains("Mode=block") { try waitForEnforcing(socket) }
        showOnFailure("netpermd log") { (try? String(contentsOfFile: dir + "/netpermd.log", encoding: .utf8))?.suffix(4000).description ?? "" }
        return Desk(bed: bed, dir: dir, socket: socket,
                    users: try TestUsers(self, [("npt-alice", Self.alice), ("npt-bob", Self.bob)]))
    }

    /// `uid`'s own session bus.
    func session(_ d: Desk, _ uid: UInt32) throws -> PrivateBus {
        let bus = try PrivateBus(.session, scratch: try makeTempDir(), user: (d.users, uid))
        addTeardownBlock { bus.stop() }
        return bus
    }

    /// A real dunst (Debian's) under xvfb-run on alice's bus, once it owns the notifications' name.
    @discardableResult
    func dunst(_ d: Desk, _ bus: PrivateBus, config: String, log: String) throws -> ChildProcess {
        let dunst = try Subprocess.spawn(d.users.argv(Self.alice, ["xvfb-run", "-a", "-s", "-screen 0 640x480x24", "dunst",
                                                                   "-config", config],
                                                      environment: [bus.environment]),
                                         stdin: .devNull, stdout: .appendFile(log), stderr: .appendFile(log))
        addTeardownBlock { dunst.killAndReap() }
        try bus.waitForName("org.freedesktop.Notifications", of: dunst, log: log)
        return dunst
    }

    /// python-dbusmock's notification server on the bus, as `uid`, once it owns its name.
    func notificationMock(_ d: Desk, _ bus: PrivateBus, _ uid: UInt32) throws -> ChildProcess {
        let log = d.dir + "/mock-\(uid).log"
        let mock = try Subprocess.spawn(d.users.argv(uid, ["/usr/bin/python3", "-m", "dbusmock", "--session", "--template",
                                                           "notification_daemon", "-p", #"{"capabilities": "body actions"}"#],
                                                     environment: [bus.environment]),
                                        stdin: .devNull, stdout: .appendFile(log), stderr: .appendFile(log))
        addTeardownBlock { mock.killAndReap() }
        try bus.waitForName("org.freedesktop.Notifications", of: mock, log: log)
        return mock
    }

    /// `netpermctl agent --notify` as `uid` on its bus; its output, line by line.
    /// `path`: its PATH instead of none.
    func notifyAgent(_ d: Desk, _ bus: PrivateBus, _ uid: UInt32, runtime: String? = nil,
                             path: String? = nil, language: [String] = []) throws -> (ChildProcess, FDLineReader) {
        let out = try Subprocess.makePipe()
        let vars = (runtime.map { ["XDG_RUNTIME_DIR=" + $0] } ?? []) + (path.map { ["PATH=" + $0] } ?? []) + language
        let env = vars.isEmpty ? [] : ["env"] + vars
        let agent = try Subprocess.spawn(asUser(uid, env + [netpermctl, "--socket", d.socket, "agent", "--notify"], bus: bus),
                                         stdin: .devNull, stdout: .fd(out.write), stderr: .fd(out.write))
        close(out.write)
        let reader = FDLineReader(fd: out.read)
        addTeardownBlock {
            agent.killAndReap()
            close(out.read)
        }
        showOnFailure("agent --notify of uid \(uid)") { reader.allText }
        try reader.waitForText("prompts go to")
        return (agent, reader)
    }

    func asUser(_ uid: UInt32, _ argv: [String], bus: PrivateBus? = nil) -> [String] {
        ["setpriv", "--reuid", String(uid), "--regid", String(uid), "--clear-groups", "env", "-i"]
            + (bus.map { [$0.environment] } ?? []) + argv
    }

    /// What the mock was asked, in order.
    func calls(_ bus: PrivateBus) throws -> [[String: Any]] {
        let r = try Subprocess.check(["env", bus.environment, "/usr/bin/python3", Repository.path("Tests/IntegrationTests/Support/notifications.py"), "calls"])
        return try r.lines.map(JSONValue.object)
    }

    func notifications(_ bus: PrivateBus) throws -> [[Any]] {
        try calls(bus).filter { $0["method"] as? String == "Notify" }.compactMap { $0["args"] as? [Any] }
    }

    func closed(_ bus: PrivateBus) throws -> [Int] {
        try calls(bus).filter { $0["method"] as? String == "CloseNotification" }
            .compactMap { ($0["args"] as? [Any])?.first as? Int }
    }

    /// The mock emits a signal, as the person's click would have it do.
    func emit(_ bus: PrivateBus, _ args: [String]) throws {
        try Subprocess.check(["env", bus.environment, "/usr/bin/python3",
                              Repository.path("Tests/IntegrationTests/Support/notifications.py")] + args)
    }

    /// Waits for the `n`th notification (1-based) and returns its id (the mock numbers them 1, 2, ...) and arguments.
    func waitForNotification(_ bus: PrivateBus, count n: Int) throws -> (id: Int, args: [Any]) {
        var shown: [[Any]] = []
        try waitUntil("notification \(n) is shown", timeout: 5) {
            shown = try self.notifications(bus)
            return (shown.count >= n, "\(shown)")
        }
        XCTAssertEqual(shown.count, n, "exactly \(n) notification(s): \(shown)")
        return (n, shown[n - 1])
    }

    /// alice's app connects out of wwan0 and is refused until its `n`th notification is shown: an app retrying, as
    /// apps do (the rules log at most 5 packets a second per app and kind, whatever the uid, and this test's connects
    /// come faster than that).
    func blockedUntilNotified(_ d: Desk, _ bus: PrivateBus, count n: Int) throws -> (id: Int, args: [Any]) {
        try waitUntil("a blocked connect of alice's app raises notification \(n)", timeout: 10) {
            let p = try d.bed.probe(uid: Self.alice, link: "wwan0")
            guard p.blocked else { throw HarnessError("alice's connect was not refused: \(p)") }
            return (try self.notifications(bus).count >= n, "\(p)")
        }
        return try waitForNotification(bus, count: n)
    }

    func ctlAs(_ uid: UInt32, _ d: Desk, _ args: [String]) throws -> CommandResult {
        try Subprocess.run(asUser(uid, [netpermctl, "--socket", d.socket] + args))
    }

    func decisionsText(_ d: Desk) -> String { (try? String(contentsOfFile: d.decisions, encoding: .utf8)) ?? "" }

    // MARK: - python-dbusmock

    /// The question in the person's language: under LANG=zh_CN.UTF-8 the notification names the app by its desktop
    /// entry's `Name[zh_CN]=` ("允许“测试地图”使用无线数据？", not its `Name=`), and its buttons are Chinese, from
    /// netpermctl's catalogue (po/netpermctl).
    func testTheQuestionIsAskedInThePersonsLanguage() throws {
        let d = try makeDesk(entries: ["maps.desktop": "[Desktop Entry]\nType=Application\nName=Test Maps\n"
                                        + "Name[de]=Testkarten\nName[zh_CN]=测试地图\nExec=/usr/bin/false\n"])
        let bus = try session(d, Self.alice)
        _ = try notificationMock(d, bus, Self.alice)
        let chinese = try Languages.environment(self, "zh_CN", catalogues: [("netpermctl", "po/netpermctl", "NETPERMCTL_LOCALEDIR")])
        _ = try notifyAgent(d, bus, Self.alice, language: chinese)
        let (_, args) = try blockedUntilNotified(d, bus, count: 1)
        XCTAssertEqual(args[3] as? String, "允许“测试地图”使用无线数据？", "\(args)")
        XCTAssertEqual(args[5] as? [String], ["allow", "允许", "deny", "仅限无线局域网", "once", "允许一次"], "\(args)")
        XCTAssertTrue((args[4] as? String)?.contains("若不回答，此问题将在 3 秒后过期") == true, "\(args)")
    }

    func testEachActionDecidesForTheUsersOwnUidAndTheNotificationFollowsThePrompt() throws {
        let d = try makeDesk()
        let bus = try session(d, Self.alice)

        // No notification server on alice's bus: the agent says so and exits 6.
        let none = try Subprocess.run(asUser(Self.alice, [netpermctl, "--socket", d.socket, "agent", "--notify"], bus: bus),
                                      timeout: 10)
        XCTAssertEqual(none.status, 6, none.summary)
        XCTAssertTrue(none.stderr.hasPrefix("netpermctl: agent --notify: no notification server to show prompts with: "
            + "org.freedesktop.Notifications.GetCapabilities on \(bus.address): "), none.summary)

        _ = try notificationMock(d, bus, Self.alice)
        let (_, out) = try notifyAgent(d, bus, Self.alice)
        XCTAssertTrue(out.allText.contains("answers are for your own processes (uid 4201)"), out.allText)
        // bob's own agent: a plain subscriber of prompts, as bob.
        let bobAgent = try HeldAsker(self, asUser(Self.bob, ["socat", "-t", "60", "-", "UNIX-CONNECT:\(d.socket)"]))
        let ack = try bobAgent.ask("SUBSCRIBE prompts")
        XCTAssertEqual(ack["privileged"] as? Bool, false, "\(ack)")
        let bobSnapshot = try JSONValue.object(try XCTUnwrap(bobAgent.replies.nextLine(timeout: 5)))
        XCTAssertEqual((bobSnapshot["prompts"] as? [Any])?.count, 0, "\(bobSnapshot)")

        // alice's app's first blocked connection: one notification, with the choices as actions.
        let (first, args) = try blockedUntilNotified(d, bus, count: 1)
        XCTAssertEqual(args[0] as? String, "netpermd")
        // In a person's words (issue 36, 13: "Allow maps to use WWAN?", "uid 4201", no destination, never
        // "refused" nor when it expires).
        XCTAssertEqual(args[3] as? String, "Allow “maps” to use cellular data?")
        XCTAssertEqual(args[4] as? String, "maps (run by \(Self.aliceName)) was refused a connection to 10.2.0.2:7777 over cellular "
            + "data via wwan0 (cellular, metered).\nUnanswered, it expires in 3 s and maps stays off cellular data.\n"
            + "Allow once: until netpermd restarts or its policy changes.")
        XCTAssertEqual(args[5] as? [String], ["allow", "Allow", "deny", "Wi-Fi only", "once", "Allow once"],
                       "its buttons, no default action (issue 36, 9: a click on the body granted Allow once)")
        let hints = args[6] as? [String: Any]
        XCTAssertEqual(hints?["urgency"] as? Int, 2, "\(args)")
        XCTAssertEqual(hints?["resident"] as? Bool, true, "\(args)")
        XCTAssertEqual(args[7] as? Int, 0, "never expires by itself")
        // bob's agent heard nothing of it.
        XCTAssertEqual(try bobAgent.ask("PROMPTS")["prompts"].map { ($0 as? [Any])?.count }, 0)

        // A server that sends "default" anyway (a click on the body): nothing is granted, the prompt stays open.
        try emit(bus, ["action", String(first), "default"])
        try out.waitForText("notification \(first) for prompt ")
        XCTAssertTrue(out.allText.contains("a click on it answers nothing; its buttons do"), out.allText)
        XCTAssertFalse(try closed(bus).contains(first), "still shown")
        XCTAssertTrue(try d.bed.probe(uid: Self.alice, link: "wwan0").blocked)

        // Allow: stored for alice's uid; her retry passes, bob's same app is still blocked, and asked of bob alone.
        try emit(bus, ["action", String(first), "allow"])
        try out.waitForText("maps: Allow (cellular data allowed, for \(Self.aliceName)'s own processes)")
        try waitUntil("notification \(first) is closed") { (try self.closed(bus).contains(first), "\(try self.calls(bus))") }
        XCTAssertTrue(decisionsText(d).contains("[User 4201 maps]\nWWAN=allow\n"), decisionsText(d))
        XCTAssertTrue(try d.bed.probe(uid: Self.alice, link: "wwan0").passed)
        // bob's app retries until its prompt comes (the log's rate is per app, and alice's connects just used it).
        var bobsLine: String?
        try waitUntil("bob's blocked connect raises bob's prompt", timeout: 10) {
            let p = try d.bed.probe(uid: Self.bob, link: "wwan0")
            guard p.blocked else { throw HarnessError("bob's connect was not refused: \(p)") }
            bobsLine = bobAgent.replies.nextLine(timeout: 0.5)
            return (bobsLine != nil, "\(p)")
        }
        let bobs = try JSONValue.object(try XCTUnwrap(bobsLine, "bob's prompt"))
        XCTAssertEqual(bobs["event"] as? String, "prompt", "\(bobs)")
        XCTAssertEqual(bobs["uid"] as? Int, Int(Self.bob), "\(bobs)")
        XCTAssertEqual(try notifications(bus).count, 1, "alice is not asked about bob's")
        let stolen = try bobAgent.ask("ANSWER \(first) allow")
        XCTAssertEqual(stolen["error"] as? String, "not-found", "\(stolen)")

        // Wi-Fi only: a lasting deny for alice's uid; her retry is refused and asks nothing.
        XCTAssertEqual(try ctlAs(Self.alice, d, ["forget", "maps"]).stdout, "forgotten\n")
        let (second, _) = try blockedUntilNotified(d, bus, count: 2)
        try emit(bus, ["action", String(second), "deny"])
        try out.waitForText("maps: Wi-Fi only (cellular data denied, for \(Self.aliceName)'s own processes)")
        XCTAssertTrue(decisionsText(d).contains("[User 4201 maps]\nWWAN=deny\n"), decisionsText(d))
        XCTAssertTrue(try d.bed.probe(uid: Self.alice, link: "wwan0").blocked)

        // Once: allowed, not written down.
        XCTAssertEqual(try ctlAs(Self.alice, d, ["forget", "maps"]).stdout, "forgotten\n")
        let (third, _) = try blockedUntilNotified(d, bus, count: 3)
        try emit(bus, ["action", String(third), "once"])
        try out.waitForText("maps: Allow once (cellular data allowed until netpermd restarts or its policy changes")
        XCTAssertTrue(try d.bed.probe(uid: Self.alice, link: "wwan0").passed)
        XCTAssertFalse(decisionsText(d).contains("[User 4201"), decisionsText(d))
        XCTAssertEqual(try ctlAs(Self.alice, d, ["-t", "decisions"]).lines, ["maps:wwan:allow:yes:4201"])
        XCTAssertEqual(try notifications(bus).count, 3, "a user's answer for bob's prompt never reaches alice")

        // Answered elsewhere (alice's own decide on a terminal): the notification is withdrawn.
        XCTAssertEqual(try ctlAs(Self.alice, d, ["forget", "maps"]).stdout, "forgotten\n")
        let app = try HeldAsker(self, asUser(Self.alice, ["socat", "-t", "60", "-", "UNIX-CONNECT:\(d.socket)"]))
        XCTAssertEqual(try app.ask("QUERY")["reason"] as? String, "awaiting-decision")
        let (fourth, asked) = try waitForNotification(bus, count: 4)
        XCTAssertTrue((asked[4] as? String)?.hasPrefix("maps (/usr/bin/socat, run by \(Self.aliceName)) asks to use cellular data") == true, "\(asked)")
        XCTAssertEqual(try ctlAs(Self.alice, d, ["decide", "maps", "wwan", "allow"]).status, 0)
        try waitUntil("notification \(fourth) is closed") { (try self.closed(bus).contains(fourth), "\(try self.calls(bus))") }

        // Its asking process exits: withdrawn too.
        XCTAssertEqual(try ctlAs(Self.alice, d, ["forget", "maps"]).stdout, "forgotten\n")
        XCTAssertEqual(try app.ask("QUERY")["reason"] as? String, "awaiting-decision")
        let (fifth, _) = try waitForNotification(bus, count: 5)
        app.close()
        try waitUntil("notification \(fifth) is closed") { (try self.closed(bus).contains(fifth), "\(try self.calls(bus))") }
        try out.waitForText("was withdrawn (its asker has exited): notification \(fifth) closed")

        // Dismissed by the person (NotificationClosed, reason 2): not now. The prompt closes unanswered with its
        // notification (issue 36, 12: it stayed open, unseen, until it expired), and nothing is stored; the app
        // asking again is asked at once.
        let dismissing = try HeldAsker(self, asUser(Self.alice, ["socat", "-t", "60", "-", "UNIX-CONNECT:\(d.socket)"]))
        XCTAssertEqual(try dismissing.ask("QUERY")["reason"] as? String, "awaiting-decision")
        let (sixth, _) = try waitForNotification(bus, count: 6)
        try emit(bus, ["closed", String(sixth), "2"])
        try out.waitForText("notification \(sixth) for prompt ")
        try out.waitForText("dismissed: the prompt is closed unanswered")
        let open = try request(d.socket, "PROMPTS")["prompts"] as? [[String: Any]]
        XCTAssertEqual(open?.filter { $0["uid"] as? Int == Int(Self.alice) }.count, 0, "closed: \(open ?? [])")
        XCTAssertFalse(decisionsText(d).contains("[User 4201"), decisionsText(d))
        XCTAssertEqual(try dismissing.ask("QUERY")["reason"] as? String, "awaiting-decision")
        let (again, _) = try waitForNotification(bus, count: 7)
        try emit(bus, ["closed", String(again), "2"])
        try out.waitForText("notification \(again) for prompt ")
        dismissing.close()

        // Expiry closes it; an action after that is refused and stores nothing.
        let late = try HeldAsker(self, asUser(Self.alice, ["socat", "-t", "60", "-", "UNIX-CONNECT:\(d.socket)"]))
        XCTAssertEqual(try late.ask("QUERY")["reason"] as? String, "awaiting-decision")
        let (seventh, _) = try waitForNotification(bus, count: 8)
        try waitUntil("notification \(seventh) is closed by its expiry", timeout: 8) {
            (try self.closed(bus).contains(seventh), "\(try self.calls(bus))")
        }
        try out.waitForText("expired unanswered: notification \(seventh) closed")
        try emit(bus, ["action", String(seventh), "allow"])
        try out.waitForText("Allow refused: prompt ")
        // Said where it was asked (issue 36, 11: a refused answer closed the notification silently).
        try waitUntil("a notification says it was not stored") {
            let n = try self.notifications(bus)
            return (n.contains { $0[3] as? String == "“Allow” was not stored for maps" }, "\(n.map { $0[3] })")
        }
        XCTAssertTrue(out.allText.contains("is not open: it expired, was answered or withdrawn"), out.allText)
        XCTAssertFalse(decisionsText(d).contains("[User 4201"), decisionsText(d))
        XCTAssertEqual(try late.ask("QUERY")["sources"].map { ($0 as? [String: Any])?["wwan"] as? String }, "policy")
    }

    /// Issue 36, 11 and 21: the agent takes its notifications with it (SIGTERM; a killed one's are closed by the
    /// next agent), a notification server that restarts is shown the open prompts again, and only the server's own
    /// connection is heard: an ActionInvoked any peer sends straight to the agent answers nothing. Before: each agent
    /// left its notifications (the next added a copy, a click on the stale one stored nothing), the restarted server
    /// lost the prompt, and the forged Allow was stored.
    func testTheAgentTakesItsNotificationsWithItAndHearsOnlyTheServer() throws {
        let d = try makeDesk(Self.policy.replacingOccurrences(of: "PromptTimeoutSec=3", with: "PromptTimeoutSec=60"))
        let bus = try session(d, Self.alice)
        let runtime = try makeTempDir()
        chown(runtime, Self.alice, Self.alice)
        chmod(runtime, 0o700)
        var mock = try notificationMock(d, bus, Self.alice)

        // SIGTERM: its notification goes with it; the prompt stays open.
        var (agent, out) = try notifyAgent(d, bus, Self.alice, runtime: runtime)
        let (first, _) = try blockedUntilNotified(d, bus, count: 1)
        agent.signal(SIGTERM)
        XCTAssertEqual(agent.wait(timeout: 5), 0, out.allText)
        XCTAssertTrue(try closed(bus).contains(first), "closed at its stop")
        try out.waitForText("stopping: the notifications of open prompts are closed")

        // The next agent shows it again; killed, it leaves it; the one after closes it and shows it once more.
        (agent, out) = try notifyAgent(d, bus, Self.alice, runtime: runtime)
        let (second, _) = try waitForNotification(bus, count: 2)
        agent.signal(SIGKILL)
        _ = agent.wait(timeout: 5)
        XCTAssertFalse(try closed(bus).contains(second), "a killed agent closes nothing itself")
        (agent, out) = try notifyAgent(d, bus, Self.alice, runtime: runtime)
        let (third, _) = try waitForNotification(bus, count: 3)
        XCTAssertTrue(try closed(bus).contains(second), "the stale one is closed")
        try out.waitForText("closed 1 notification(s) a stopped agent left")

        // The server restarts: the open prompt is shown by the new one.
        mock.killAndReap()
        try out.waitForText("the notification server is gone")
        mock = try notificationMock(d, bus, Self.alice)
        try out.waitForText("the notification server restarted: showing 1 open prompt(s) again")
        let (fourth, _) = try waitForNotification(bus, count: 1)
        _ = third

        // A forged click, sent straight to the agent by another peer (the second time after a forged
        // NameOwnerChanged naming that peer the server: issue 48, it was believed and the click stored), then the
        // server's own dismissal: only the dismissal is heard.
        try emit(bus, ["forge", String(fourth), "allow"])
        try emit(bus, ["forge", String(fourth), "allow", "owner"])
        try emit(bus, ["closed", String(fourth), "2"])
        try out.waitForText("notification \(fourth) for prompt ")
        XCTAssertFalse(out.allText.contains("maps: Allow"), out.allText)
        XCTAssertFalse(decisionsText(d).contains("[User 4201"), decisionsText(d))
        XCTAssertTrue(try d.bed.probe(uid: Self.alice, link: "wwan0").blocked)
        _ = mock
    }

    /// Issue 36, 10: a server that took over 5 s to show one notification made the agent exit 6 ("Connection timed
    /// out"), leaving the rest. Notifications are asked without waiting: the agent stays, a prompt answered while its
    /// notification was on its way is closed as soon as it comes, and the next prompt is shown.
    func testASlowServerHoldsUpNothing() throws {
        let d = try makeDesk(Self.policy.replacingOccurrences(of: "PromptTimeoutSec=3", with: "PromptTimeoutSec=60"))
        let bus = try session(d, Self.alice)
        _ = try notificationMock(d, bus, Self.alice)
        try emit(bus, ["slow", "6"])
        let (agent, out) = try notifyAgent(d, bus, Self.alice)
        try waitUntil("a blocked connect of alice's app raises its prompt", timeout: 10) {
            let p = try d.bed.probe(uid: Self.alice, link: "wwan0")
            let open = try self.request(d.socket, "PROMPTS")["prompts"] as? [Any]
            return (open?.count == 1, "\(p)")
        }
        // Answered on a terminal while the server still takes its time.
        XCTAssertEqual(try ctlAs(Self.alice, d, ["decide", "maps", "wwan", "allow"]).status, 0)
        try waitUntil("the late notification is closed as soon as it comes", timeout: 15) {
            (try self.closed(bus).contains(101), "\(try self.calls(bus))")
        }
        XCTAssertNil(agent.poll(), "the agent stays: \(out.allText)")
        XCTAssertEqual(try ctlAs(Self.alice, d, ["forget", "maps"]).stdout, "forgotten\n")
        let (second, _) = try blockedUntilNotified(d, bus, count: 2)
        XCTAssertEqual(second, 2)
        try out.waitForText("notification 102")
    }

    /// Issue 36, 12: with `UserDecisions=no` a user's agent can answer nothing: one running is told at the reload
    /// and exits 7, a new one exits 7 at once (it exited 1, which the user unit retried until it failed), and the
    /// unit does not restart on 7.
    func testAUsersAgentGoesWhenUsersNoLongerDecide() throws {
        let d = try makeDesk()
        let bus = try session(d, Self.alice)
        _ = try notificationMock(d, bus, Self.alice)
        let (agent, out) = try notifyAgent(d, bus, Self.alice)
        _ = try writeConfig(Self.policy + "UserDecisions=no\n", in: d.dir)
        XCTAssertEqual(try request(d.socket, "RELOAD")["ok"] as? Bool, true)
        XCTAssertEqual(agent.wait(timeout: 5), 7, out.allText)
        try out.waitForText("permission-denied: users no longer answer for their own apps ([Defaults] UserDecisions=no)")
        let again = try Subprocess.run(asUser(Self.alice, [netpermctl, "--socket", d.socket, "agent", "--notify"], bus: bus),
                                       timeout: 10)
        XCTAssertEqual(again.status, 7, again.summary)
        let unit = try String(contentsOfFile: Repository.path("systemd/netpermd-agent.service"), encoding: .utf8)
        XCTAssertTrue(unit.contains("\nRestartPreventExitStatus=7\n"), unit)
    }

    /// Issue 36, 8: a host on the wwan side connecting to alice's server made the server's SYN-ACK rejected (a
    /// request socket: no uid) and asked "Allow maps to use WWAN?" for everyone. An incoming connection raises no
    /// prompt: it is refused, and the log says so once.
    func testAConnectionFromElsewhereAsksNobody() throws {
        let d = try makeDesk(Self.policy.replacingOccurrences(of: "PromptTimeoutSec=3", with: "PromptTimeoutSec=60"))
        // The admin's agent: the one a packet with no uid would ask.
        let admin = try HeldAsker(self, ["socat", "-t", "60", "-", "UNIX-CONNECT:\(d.socket)"])
        XCTAssertEqual(try admin.ask("SUBSCRIBE prompts")["privileged"] as? Bool, true)
        let server = try Subprocess.spawn(["nsenter", "--net=/run/netns/\(d.bed.ns.name)"] + asUser(Self.alice, [
            "/usr/bin/python3", "-c",
            "import socket,time\nl=socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                + "l.bind(('0.0.0.0', 7900)); l.listen(8)\nwhile True: l.accept()[0].close()",
        ]), stdin: .devNull, stdout: .devNull, stderr: .devNull)
        addTeardownBlock { server.killAndReap() }
        try waitUntil("alice's server listens") {
            let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(d.bed.ns.name)", "ss", "-Hltn", "sport", "=", ":7900"])
            return (r.lines.count == 1, r.summary)
        }
        let connect = "import socket\ns=socket.socket(); s.settimeout(0.5)\ntry: s.connect(('10.2.0.1', 7900)); print('ok')\n"
            + "except OSError as e: print(type(e).__name__)"
        try waitUntil("the daemon hears the refused SYN-ACK", timeout: 10) {
            let r = try Subprocess.run(["ip", "netns", "exec", d.bed.peer.name, "/usr/bin/python3", "-c", connect])
            XCTAssertNotEqual(r.stdout, "ok\n", "WWAN=ask and undecided: the server is not reachable over wwan")
            let log = (try? String(contentsOfFile: d.dir + "/netpermd.log", encoding: .utf8)) ?? ""
            return (log.contains("maps: a connection from elsewhere over wwan was refused"), r.summary)
        }
        XCTAssertEqual((try request(d.socket, "PROMPTS")["prompts"] as? [Any])?.count, 0, "nobody is asked")
        let snapshot = try JSONValue.object(try XCTUnwrap(admin.replies.nextLine(timeout: 5)))
        XCTAssertEqual(snapshot["event"] as? String, "snapshot")
        // A connection's events and replies come in order: a prompt event, had the refusal raised one, would come
        // before the reply to a PING sent after the log said so.
        let next = try admin.ask("PING")
        XCTAssertEqual(next["ok"] as? Bool, true, "the PING's reply, no prompt event before it: \(next)")
    }

    // MARK: - dunst

    /// A real notification server: dunst (Debian's) under xvfb-run on alice's bus shows the prompt (dunst's
    /// history has it once it is answered). A click on the notification (dunst's `action`: with no default action
    /// it opens its menu of the buttons) grants nothing until a button is chosen in dunst's own menu (its `dmenu`,
    /// here a script that picks the line the test names).
    func testDunstShowsThePromptAndOnlyItsMenusButtonAnswersIt() throws {
        let d = try makeDesk(Self.policy.replacingOccurrences(of: "[Enforcement]\nMode=block\n", with: ""))
        let bus = try session(d, Self.alice)
        let log = d.dir + "/dunst.log"
        let menu = d.dir + "/menu", choice = d.dir + "/choice", shownMenus = d.dir + "/menus"
        try "".write(toFile: choice, atomically: true, encoding: .utf8)
        try """
            #!/bin/sh
            # SPDX-License-Identifier: LGPL-2.1-or-later
            # dunst's menu: every line it offers is logged; the line holding the chosen text is picked, else a
            # line naming no action (as a person closing the menu: dunst 1.9 never runs it again after no answer).
            lines=$(cat)
            printf '%s\\n--\\n' "$lines" >> \(shownMenus)
            want=$(cat \(choice))
            [ -n "$want" ] && printf '%s\\n' "$lines" | grep -F -- "$want" | head -n 1 || echo "none"
            exit 0
            """.write(toFile: menu, atomically: true, encoding: .utf8)
        chmod(menu, 0o755)
        try "".write(toFile: shownMenus, atomically: true, encoding: .utf8)
        chmod(shownMenus, 0o666)
        chmod(choice, 0o644)
        let config = d.dir + "/dunstrc"
        try "[global]\ndmenu = \(menu)\n".write(toFile: config, atomically: true, encoding: .utf8)
        try dunst(d, bus, config: config, log: log)
        showOnFailure("dunst's menus and log") {
            ((try? String(contentsOfFile: shownMenus, encoding: .utf8)) ?? "") + ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        }
        let (_, out) = try notifyAgent(d, bus, Self.alice)
        XCTAssertTrue(out.allText.contains("prompts go to dunst 1."), out.allText)
        func dunstctl(_ args: [String]) throws -> CommandResult {
            try Subprocess.check(asUser(Self.alice, ["dunstctl"] + args, bus: bus))
        }

        let app = try HeldAsker(self, asUser(Self.alice, ["socat", "-t", "60", "-", "UNIX-CONNECT:\(d.socket)"]))
        XCTAssertEqual(try app.ask("QUERY")["reason"] as? String, "awaiting-decision")
        try waitUntil("dunst shows it") {
            let n = try dunstctl(["count", "displayed"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            return (n == "1", n)
        }
        // A click on the body: dunst offers the buttons, none is chosen, nothing is granted.
        _ = try dunstctl(["action", "0"])
        try waitUntil("dunst offered its menu") {
            let m = (try? String(contentsOfFile: shownMenus, encoding: .utf8)) ?? ""
            return (m.contains("--"), m)
        }
        let offered = try String(contentsOfFile: shownMenus, encoding: .utf8)
        XCTAssertTrue(offered.contains("Allow once") && offered.contains("Wi-Fi only"), offered)
        XCTAssertEqual(try app.ask("QUERY")["reason"] as? String, "awaiting-decision", "a click grants nothing")
        XCTAssertFalse(out.allText.contains("maps: Allow once"), out.allText)

        // The menu's "Allow once".
        try "Allow once".write(toFile: choice, atomically: true, encoding: .utf8)
        // Until dunst has taken the last menu's line, it refuses another ("already running").
        try waitUntil("dunst takes the menu") {
            _ = try dunstctl(["context"])
            let m = (try? String(contentsOfFile: shownMenus, encoding: .utf8)) ?? ""
            return (m.components(separatedBy: "--").count > 2, m)
        }
        try out.waitForText("maps: Allow once (cellular data allowed until netpermd restarts or its policy changes, for \(Self.aliceName)'s own processes)")
        XCTAssertEqual(try app.ask("QUERY")["sources"].map { ($0 as? [String: Any])?["wwan"] as? String }, "user-once")
        try waitUntil("dunst's history has it") {
            let h = try dunstctl(["history"]).stdout
            return (h.contains("Allow “maps” to use cellular data?") && h.contains("run by \(Self.aliceName)) asks to use cellular data via wwan0"), h)
        }
        XCTAssertEqual(try dunstctl(["count", "displayed"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0")
    }

    // MARK: - One question

    /// WWAN=ask and Metered=ask on a cellular link (metered): the first blocked connect raises one prompt about
    /// both, one answer allows both, and the second connect passes. The admin's answer to alice's process is
    /// alice's: bob's maps is still refused (issue 36, 7: one click opened it for everyone).
    func testWWANAndMeteredAskOnceAndTheSecondConnectPasses() throws {
        let d = try makeDesk(Self.policy.replacingOccurrences(of: "WWAN=ask\n", with: "WWAN=ask\nMetered=ask\n"))
        let agent = try LiveConnection(path: d.socket)
        addTeardownBlock { agent.close() }
        try agent.subscribe("prompts")
        XCTAssertTrue(try d.bed.probe(uid: Self.alice, link: "wwan0").blocked)
        let prompt = try XCTUnwrap(try agent.objects(until: "a prompt") { $0["event"] as? String == "prompt" }.last)
        XCTAssertEqual(prompt["kinds"] as? [String], ["wwan", "metered"], "\(prompt)")
        let (_, open) = try agent.request("PROMPTS")
        XCTAssertEqual((open["prompts"] as? [Any])?.count, 1, "one question: \(open)")
        let (_, answer) = try agent.request("ANSWER \(try JSONValue.int(prompt, "id")) allow")
        XCTAssertEqual((answer["answered"] as? [String: Any])?["kinds"] as? [String], ["wwan", "metered"], "\(answer)")
        XCTAssertEqual((answer["answered"] as? [String: Any])?["for_uid"] as? Int, Int(Self.alice), "\(answer)")
        XCTAssertTrue(try d.bed.probe(uid: Self.alice, link: "wwan0").passed, "the second connect passes")
        XCTAssertTrue(decisionsText(d).contains("[User \(Self.alice) maps]\nWWAN=allow\nMetered=allow\n"), decisionsText(d))
        XCTAssertTrue(try d.bed.probe(uid: Self.bob, link: "wwan0").blocked, "bob's maps was not answered for")
    }

    // MARK: - The settings app

    /// Where netpermd-settings is installed, each notification has a "Settings" action too, and it starts the app
    /// (here a stand-in on the agent's PATH that says it ran), answering nothing: the prompt stays.
    func testTheSettingsActionOpensTheSettingsApp() throws {
        let d = try makeDesk(Self.policy)
        let bus = try session(d, Self.alice)
        _ = try notificationMock(d, bus, Self.alice)
        let bin = try makeTempDir()
        XCTAssertEqual(chmod(bin, 0o777), 0)
        let marker = bin + "/ran"
        try "#!/bin/sh\necho \"$(id -u)\" > \(marker)\n".write(toFile: bin + "/netpermd-settings", atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(bin + "/netpermd-settings", 0o755), 0)
        let (_, reader) = try notifyAgent(d, bus, Self.alice, path: "\(bin):/usr/bin:/bin")
        let (id, args) = try blockedUntilNotified(d, bus, count: 1)
        XCTAssertEqual(args[5] as? [String], ["allow", "Allow", "deny", "Wi-Fi only", "once", "Allow once", "settings", "Settings"])
        try emit(bus, ["action", String(id), "settings"])
        try waitUntil("the settings app ran, as alice", timeout: 5) {
            let ran = (try? String(contentsOfFile: marker, encoding: .utf8)) ?? ""
            return (ran == "\(Self.alice)\n", ran)
        }
        try reader.waitForText("opening the settings app")
        XCTAssertFalse(try closed(bus).contains(id), "the prompt is still shown: Settings answers nothing")
        XCTAssertTrue(try d.bed.probe(uid: Self.alice, link: "wwan0").blocked)
    }
}
