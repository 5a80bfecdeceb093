// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 48: `agent --notify` under a flood of prompts. Each prompt was a critical, resident notification of its
/// own (another user's reached the admin's screen 34 s late, queued behind ~100; dunst died under 228), closed one at
/// a time with calls that waited up to 5 s each (18 stayed on screen 50 s after their prompts had gone), and prompts
/// already withdrawn were shown. Now at most three questions are shown, fairly among uids, and one notification says
/// how many others wait; nothing waits on the server. Every app here is a copy of socat under a name of its own
/// (`[Defaults]` makes each executable's name an app).
extension DesktopAgentTests {
    static let floodPolicy = """
        [Interface wwan0]
        Kind=wwan

        [Defaults]
        WWAN=ask
        PromptTimeoutSec=120

        """

    /// What the server's calls say was on its screen: a Notify that replaces none opens the next id (both servers
    /// number them 1, 2, ... in the order they take them), a CloseNotification of one open closes it.
    struct ShownNow: CustomStringConvertible {
        var open: [Int: String] = [:]
        /// The most open at once, after any call.
        var most = 0
        /// The summaries of the notifications that said how many wait, each time one was shown or replaced.
        var counts: [String] = []
        var newCounts = 0
        var description: String { "open \(open.keys.sorted().map { "\($0): \(open[$0]!)" }), most \(most), counts \(counts)" }
    }

    func screen(_ bus: PrivateBus) throws -> ShownNow {
        var s = ShownNow()
        var next = 1
        for call in try calls(bus) {
            let args = call["args"] as? [Any] ?? []
            switch call["method"] as? String {
            case "Notify":
                let title = args[3] as? String ?? ""
                let replaces = args[1] as? Int ?? 0
                if title.contains(" more app") {
                    s.counts.append(title)
                    if replaces == 0 { s.newCounts += 1 }
                }
                if replaces == 0 {
                    s.open[next] = title
                    next += 1
                } else {
                    s.open[replaces] = title
                }
            case "CloseNotification":
                if let id = args.first as? Int { s.open[id] = nil }
            default: break
            }
            s.most = max(s.most, s.open.count)
        }
        return s
    }

    /// Copies of socat named `names`, in a directory of their own that any user may run them from.
    func programs(_ names: [String]) throws -> String {
        let dir = try makeTempDir()
        chmod(dir, 0o755)
        for n in names {
            let path = dir + "/" + n
            // A hard link where /tmp shares socat's file system: the name the process runs by is the link's.
            if link("/usr/bin/socat", path) != 0 { try FileManager.default.copyItem(atPath: "/usr/bin/socat", toPath: path) }
            chmod(path, 0o755)
        }
        return dir
    }

    /// Every program in `dir` as `uid`, each asking once (`QUERY`) and staying: a prompt each. They share one pid
    /// namespace, so the returned process's end takes them all (and their prompts) at once.
    func flood(_ d: Desk, _ uid: UInt32, _ dir: String) throws -> ChildProcess {
        let script = #"for f in "$0"/*; do (echo QUERY; exec sleep 600) | "$f" - "UNIX-CONNECT:$1" >/dev/null 2>&1 & done; wait"#
        let p = try Subprocess.spawn(d.users.argv(uid, ["sh", "-c", script, dir, d.socket]),
                                     stdin: .devNull, stdout: .devNull, stderr: .devNull)
        addTeardownBlock { p.killAndReap() }
        return p
    }

    func waitForPrompts(_ d: Desk, of uid: UInt32, count n: Int) throws {
        try waitUntil("\(n) prompts of uid \(uid) are open", timeout: 30, interval: 0.2) {
            let open = (try self.request(d.socket, "PROMPTS")["prompts"] as? [[String: Any]] ?? [])
                .filter { $0["uid"] as? Int == Int(uid) }
            return (open.count == n, "\(open.count) open")
        }
    }

    /// Support/slow-notifications.py on `bus` as `uid` (root: 0), once it owns its name.
    func slowServer(_ d: Desk, _ bus: PrivateBus, _ uid: UInt32, _ args: [String]) throws -> ChildProcess {
        let log = d.dir + "/slow-\(uid).log"
        let argv = ["/usr/bin/python3", Repository.path("Tests/IntegrationTests/Support/slow-notifications.py")] + args
        let server = try Subprocess.spawn(uid == 0 ? ["env", bus.environment] + argv : d.users.argv(uid, argv, environment: [bus.environment]),
                                          stdin: .devNull, stdout: .appendFile(log), stderr: .appendFile(log))
        addTeardownBlock { server.killAndReap() }
        try bus.waitForName("org.freedesktop.Notifications", of: server, log: log)
        showOnFailure("slow notification server") { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        return server
    }

    /// 40 prompts of one user: three questions and one notification that says how many others wait, never more; once
    /// the daemon has withdrawn them all, every notification is gone within seconds. Before: 40 notifications.
    func testAFloodIsThreeQuestionsAndOneThatCountsTheRest() throws {
        let d = try makeDesk(Self.floodPolicy)
        let bus = try session(d, Self.alice)
        _ = try notificationMock(d, bus, Self.alice)
        _ = try notifyAgent(d, bus, Self.alice)
        let apps = try programs((1...40).map { String(format: "flood%02d", $0) })
        let askers = try flood(d, Self.alice, apps)
        try waitForPrompts(d, of: Self.alice, count: 40)

        var s = ShownNow()
        try waitUntil("one notification says 37 more wait", timeout: 10, interval: 0.2) {
            s = try self.screen(bus)
            return (s.counts.last == "37 more apps are waiting" && s.open.count == 4, "\(s)")
        }
        XCTAssertLessThanOrEqual(s.most, 4, "at most three questions and the count, at any time: \(s)")
        XCTAssertEqual(s.newCounts, 1, "one notification counts them, replaced as the count changes: \(s)")
        XCTAssertEqual(s.open.values.filter { $0.hasPrefix("Allow “flood") }.count, 3, "\(s)")

        // Every asker exits: every prompt is withdrawn, and every notification closed within seconds.
        askers.killAndReap()
        try waitForPrompts(d, of: Self.alice, count: 0)
        try waitUntil("every notification is closed", timeout: 5, interval: 0.2) {
            s = try self.screen(bus)
            return (s.open.isEmpty, "\(s)")
        }
        XCTAssertLessThanOrEqual(s.most, 4, "\(s)")
    }

    /// A server that takes 3 s to close a notification (as dunst did under a flood): the agent waits for it no more,
    /// and an answer given meanwhile reaches the daemon at once. Before: each close held the agent up to 5 s, and
    /// the click waited behind it.
    func testAnAnswerGoesAtOnceWhileTheServerTakesItsTimeToClose() throws {
        let d = try makeDesk(Self.floodPolicy)
        let bus = try session(d, Self.alice)
        _ = try slowServer(d, bus, Self.alice, ["--close-delay", "3"])
        let (_, out) = try notifyAgent(d, bus, Self.alice)
        let apps = try programs(["leaving", "staying"])
        var askers: [HeldAsker] = []
        for name in ["leaving", "staying"] {
            let a = try HeldAsker(self, asUser(Self.alice, [apps + "/" + name, "-t", "60", "-", "UNIX-CONNECT:\(d.socket)"]))
            let q = try a.ask("QUERY")
            XCTAssertEqual(q["reason"] as? String, "awaiting-decision", "\(q)")
            XCTAssertEqual(q["app"] as? String, name, "\(q)")
            askers.append(a)
        }
        let (_, second) = try waitForNotification(bus, count: 2)
        let staying = (second[3] as? String)?.contains("staying") == true ? 2 : 1
        let leaving = 3 - staying

        askers[0].close()
        try out.waitForText("was withdrawn (its asker has exited): notification \(leaving) closed")
        // The server takes 3 s over that close; the person allows the other meanwhile.
        try emit(bus, ["action", String(staying), "allow"])
        try waitUntil("the answer is stored at once", timeout: 1.5) {
            (decisionsText(d).contains("[User 4201 staying]\nWWAN=allow\n"), decisionsText(d))
        }
        try waitUntil("both notifications are closed, as the server takes the calls", timeout: 10, interval: 0.2) {
            let s = try self.screen(bus)
            return (s.open.isEmpty, "\(s)")
        }
    }

    /// An admin's agent sees every user's prompts: alice's 100, then bob's one. Bob's question is shown within
    /// seconds, while the server draws one notification each quarter of a second. Before: it came after alice's 100
    /// (25 s).
    func testOneUsersFloodBuriesNoOtherUsersQuestion() throws {
        let d = try makeDesk(Self.floodPolicy)
        // The admin's (root's) own session bus and notification server.
        let bus = try PrivateBus(.session, scratch: try makeTempDir())
        addTeardownBlock { bus.stop() }
        _ = try slowServer(d, bus, 0, ["--notify-delay", "0.25"])
        let (_, out) = try notifyAgent(d, bus, 0)
        XCTAssertTrue(out.allText.contains("answers are for the asking uid's processes"), out.allText)
        let apps = try programs((1...100).map { String(format: "alice%03d", $0) })
        _ = try flood(d, Self.alice, apps)
        try waitForPrompts(d, of: Self.alice, count: 100)

        let bobs = try programs(["bobsapp"])
        let bob = try HeldAsker(self, asUser(Self.bob, [bobs + "/bobsapp", "-t", "60", "-", "UNIX-CONNECT:\(d.socket)"]))
        XCTAssertEqual(try bob.ask("QUERY")["reason"] as? String, "awaiting-decision")
        var s = ShownNow()
        try waitUntil("bob's question is on the admin's screen", timeout: 5, interval: 0.2) {
            s = try self.screen(bus)
            return (s.open.values.contains("Allow “bobsapp” to use cellular data?"), "\(s)")
        }
        XCTAssertLessThanOrEqual(s.most, 4, "\(s)")
        try waitUntil("the count says 98 more wait", timeout: 5, interval: 0.2) {
            s = try self.screen(bus)
            return (s.counts.last == "98 more apps are waiting", "\(s)")
        }
    }

    /// Five prompts: three shown, two waiting; the two are withdrawn before their turn, and are never shown, not
    /// even once the three have gone. Before: all five were shown at once.
    func testAPromptWithdrawnBeforeItsTurnIsNeverShown() throws {
        let d = try makeDesk(Self.floodPolicy)
        let bus = try session(d, Self.alice)
        _ = try notificationMock(d, bus, Self.alice)
        let (_, out) = try notifyAgent(d, bus, Self.alice)
        let names = (1...5).map { "early\($0)" } + ["later"]
        let apps = try programs(names)
        var askers: [HeldAsker] = []
        // One after another, so that the first three are the oldest.
        for name in names.prefix(5) {
            let a = try HeldAsker(self, asUser(Self.alice, [apps + "/" + name, "-t", "60", "-", "UNIX-CONNECT:\(d.socket)"]))
            XCTAssertEqual(try a.ask("QUERY")["reason"] as? String, "awaiting-decision")
            askers.append(a)
        }
        var s = ShownNow()
        try waitUntil("three are shown, and that two more wait", timeout: 5, interval: 0.2) {
            s = try self.screen(bus)
            return (s.counts.last == "2 more apps are waiting" && s.open.count == 4, "\(s)")
        }
        askers[3].close()
        askers[4].close()
        try waitUntil("the count goes: none waits", timeout: 5, interval: 0.2) {
            s = try self.screen(bus)
            return (s.open.count == 3 && s.open.values.allSatisfy { !$0.contains(" more app") }, "\(s)")
        }
        for a in askers.prefix(3) { a.close() }
        try waitUntil("the three are closed", timeout: 5, interval: 0.2) {
            s = try self.screen(bus)
            return (s.open.isEmpty, "\(s)")
        }
        // The next prompt is shown: the agent went on, and had nothing of early4's or early5's left to show.
        let later = try HeldAsker(self, asUser(Self.alice, [apps + "/later", "-t", "60", "-", "UNIX-CONNECT:\(d.socket)"]))
        XCTAssertEqual(try later.ask("QUERY")["reason"] as? String, "awaiting-decision")
        try waitUntil("the next prompt is shown", timeout: 5, interval: 0.2) {
            s = try self.screen(bus)
            return (s.open.values.contains("Allow “later” to use cellular data?"), "\(s)")
        }
        let titles = try notifications(bus).compactMap { $0[3] as? String }
        XCTAssertFalse(titles.contains { $0.contains("early4") || $0.contains("early5") }, "\(titles)\n\(out.allText)")
    }
}

extension DesktopAgentTests {
    /// The same flood on a real dunst (under Xvfb): dunst holds at most the three questions and the count, shown or
    /// queued, and none once the prompts are withdrawn. Before: all 60, and with 228 dunst died.
    func testDunstUnderAFloodHoldsFourNotifications() throws {
        let d = try makeDesk(Self.floodPolicy)
        let bus = try session(d, Self.alice)
        let log = d.dir + "/dunst.log"
        let config = d.dir + "/dunstrc"
        try "[global]\n".write(toFile: config, atomically: true, encoding: .utf8)
        let server = try dunst(d, bus, config: config, log: log)
        showOnFailure("dunst's log") { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        _ = try notifyAgent(d, bus, Self.alice)
        /// What dunst holds: shown, and queued to be shown.
        func held() throws -> (displayed: Int, waiting: Int) {
            let count = { (what: String) throws -> Int in
                Int(try Subprocess.check(self.asUser(Self.alice, ["dunstctl", "count", what], bus: bus)).stdout
                    .trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
            }
            return (try count("displayed"), try count("waiting"))
        }

        let askers = try flood(d, Self.alice, try programs((1...60).map { String(format: "many%02d", $0) }))
        try waitForPrompts(d, of: Self.alice, count: 60)
        var most = 0
        try waitUntil("dunst shows three questions and the count", timeout: 10, interval: 0.2) {
            let h = try held()
            most = max(most, h.displayed + h.waiting)
            return (h.displayed + h.waiting == 4, "\(h)")
        }
        XCTAssertLessThanOrEqual(most, 4)
        askers.killAndReap()
        try waitForPrompts(d, of: Self.alice, count: 0)
        try waitUntil("dunst holds none", timeout: 5, interval: 0.2) {
            let h = try held()
            most = max(most, h.displayed + h.waiting)
            return (h.displayed + h.waiting == 0, "\(h)")
        }
        XCTAssertLessThanOrEqual(most, 4)
        XCTAssertNil(server.poll(), "dunst is still running")
    }
}
