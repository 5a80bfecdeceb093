// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import NetpermProtocol
import XCTest

/// RELOAD and SIGHUP: the service manager is told, a good policy takes over (sessions re-matched, links
/// reclassified), a bad one is refused and the old one stays, and the admin group is looked up only when needed.
final class EngineReloadTests: XCTestCase {
    private let policy = Policies.curlAndBackup

    private let path = "/etc/netpermd/netpermd.conf"

    private func harness(accounts: AccountResolver = FakeAccounts(),
                         settings: Engine.Settings = Engine.Settings(daemonUID: 0, logLevel: .debug)) -> EngineHarness {
        EngineHarness(policy: policy, links: [Links.eth, Links.wwan], settings: settings, accounts: accounts)
    }

    func testReloadIsPrivileged() {
        let h = harness()
        XCTAssertEqual(h.requestError(h.connect(Peers.curl), "RELOAD", .permissionDenied),
                       "RELOAD needs root or membership of group 'netperm'")
        XCTAssertFalse(h.steps.contains("load-policy"))
    }

    /// RELOADING=1, the files read, the new generation in force, READY=1 with STATUS=, then the reply.
    func testGoodReload() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        h.policyFiles = [(path, policy + "\n[App x]\nUser=1\n")]
        let mark = h.steps.count
        XCTAssertEqual(h.send(admin, "reload"), [#"{"ok":true,"generation":2,"apps":3,"warnings":0,"findings":[]}"#])
        let steps = h.steps[mark...].filter { !$0.hasPrefix("log") }
        XCTAssertEqual(steps, ["hold \(admin)", "notify reloading", "load-policy",
                               "notify ready(status: \"2 links, via eth0 (ethernet), 3 apps, policy gen 2\")",
                               "reply \(admin)", "resume \(admin)"])
        XCTAssertEqual(h.logged(containing: "policy generation 2: 3 apps").count, 1)
        XCTAssertEqual(h.request(admin, "STATUS")["policy"], .object([("generation", 2), ("apps", 3), ("error", .null),
                                                                     ("warnings", 0), ("findings", .array([]))]))
    }

    /// A bad policy: `policy-invalid` with the first error and how many more, every error logged, and the old
    /// policy still in force.
    func testBadReloadKeepsTheOldPolicy() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        let bad = "[App curl]\nExecutable=/usr/bin/curl\nWWAN=deny\nWiFi=maybe\nEthernet=never\n"
        h.policyFiles = [(path, bad)]
        let expected = Config.parse(files: h.policyFiles, accounts: FakeAccounts())
        XCTAssertEqual(expected.errorCount, 2)
        let message = h.requestError(admin, "RELOAD", .policyInvalid)
        XCTAssertEqual(message, expected.failure)
        XCTAssertTrue(message.hasPrefix("\(path):4: ") && message.hasSuffix(" (and 1 more error)"), message)
        XCTAssertFalse(h.connections[admin]!.held)
        for e in expected.errors { XCTAssertTrue(h.log.contains { $0 == (.err, e.description) }, e.description) }
        XCTAssertEqual(h.logged(containing: "policy reload failed, keeping generation 1: \(message)").count, 1)
        let q = h.request(admin, "QUERY curl")
        XCTAssertEqual(q["permissions"]?["wwan"], "allow", "the old policy")
        XCTAssertEqual(h.request(admin, "STATUS")["policy"],
                       .object([("generation", 1), ("apps", 2), ("error", .string(message)), ("warnings", 0),
                                ("findings", .array([]))]))
    }

    /// Issue 23: a typo key was only in the log. RELOAD's reply and STATUS count and show the warnings of the policy
    /// in force, as `netpermctl check` finds them; a failed reload keeps those of the policy still in force.
    func testReloadAndStatusShowThePolicysWarnings() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        h.policyFiles = [(path, policy + "\nWWLAN=deny\n")]
        let finding = JSON.object([("file", .string(path)), ("line", 8), ("section", "[App backup]"),
                                   ("severity", "warning"),
                                   ("message", "unknown key 'WWLAN' (did you mean WWAN=?); ignored")])
        let reply = h.request(admin, "RELOAD")
        XCTAssertEqual(reply, .object([("ok", true), ("generation", 2), ("apps", 2), ("warnings", 1),
                                       ("findings", .array([finding]))]))
        XCTAssertEqual(h.request(admin, "STATUS")["policy"]?["warnings"], 1)
        XCTAssertEqual(h.request(admin, "STATUS")["policy"]?["findings"], .array([finding]))

        h.policyFiles = [(path, policy + "\nWWLAN=deny\nWiFi=maybe\n")]
        _ = h.requestError(admin, "RELOAD", .policyInvalid)
        XCTAssertEqual(h.request(admin, "STATUS")["policy"]?["findings"], .array([finding]), "still in force")

        // Beyond the parser's limit: every one counted, the first 100 shown.
        h.policyFiles = [(path, policy + "\n" + (0..<150).map { "Unknown\($0)=1" }.joined(separator: "\n") + "\n")]
        let many = h.request(admin, "RELOAD")
        XCTAssertEqual(many["warnings"], 150)
        XCTAssertEqual(many["findings"]?.arrayValue?.count, 100)
        h.policyFiles = [(path, policy)]
        XCTAssertEqual(h.request(admin, "RELOAD")["warnings"], 0)
        XCTAssertEqual(h.request(admin, "STATUS")["policy"]?["findings"], .array([]))
    }

    /// Warnings never fail a load: each is logged at warning priority, and counted in the summary.
    func testWarningsAreLogged() {
        let h = harness()
        h.reload(policy: policy + "\nColour=blue\n")
        let warnings = h.log.filter { $0.0 == .warning }.map(\.1)
        XCTAssertEqual(warnings.count, 1)
        XCTAssertTrue(warnings.first?.hasPrefix("\(path):8: warning: ") == true, warnings.first ?? "")
        XCTAssertEqual(h.logged(containing: "policy generation 2: 2 apps, 1 warning").count, 1)
        h.reload(policy: policy + "\nColour=blue\nShade=dark\n")
        XCTAssertEqual(h.logged(containing: "policy generation 3: 2 apps, 2 warnings").count, 1)
    }

    /// Beyond the parser's limit, one line says how many more there were.
    func testProblemsBeyondTheLimitAreCounted() {
        let h = harness()
        let keys = (0..<150).map { "Unknown\($0)=1" }.joined(separator: "\n")
        h.reload(policy: policy + "\n" + keys + "\n")
        XCTAssertEqual(h.log.filter { $0.0 == .warning && $0.1.contains(": warning: ") }.count, 100)
        XCTAssertEqual(h.logged(containing: "\(path): 50 more problems not listed").count, 1)
        XCTAssertEqual(h.logged(containing: "policy generation 2: 2 apps, 150 warnings").count, 1)
    }

    /// SIGHUP (or the files changing): the same reload, answered to nobody, heard by subscribers.
    func testReloadInput() {
        let h = harness()
        let sub = h.connect(Peers.curl)
        _ = h.subscribe(sub, "policy")
        let mark = h.notifications.count
        h.reload(policy: policy + "\n[App x]\nUser=1\n")
        XCTAssertEqual(Array(h.notifications[mark...]),
                       [.reloading, .ready(status: "2 links, via eth0 (ethernet), 3 apps, policy gen 2")])
        XCTAssertEqual(h.takeEvents(sub).map { $0["generation"] }, [2])
    }

    /// Loads run away from the loop. A RELOAD made while the files are being read may follow an edit the read
    /// missed, so it waits for a second read; any number of them share that one.
    func testReloadsDuringALoadWaitForTheNextOne() {
        let h = harness()
        h.policyLoadIsManual = true
        let a = h.connect(Peers.admin)
        let b = h.connect(Peers.root)
        let c = h.connect(Peers.root)
        let gone = h.connect(Peers.root)
        XCTAssertEqual(h.send(a, "RELOAD"), [])
        XCTAssertEqual(h.pendingPolicyLoads, 1)
        for x in [b, c, gone] { XCTAssertEqual(h.send(x, "RELOAD"), []) }
        h.feed(.reload)
        XCTAssertEqual(h.pendingPolicyLoads, 1, "one load at a time")
        h.disconnect(gone)
        h.completePolicyLoad()
        XCTAssertEqual(h.take(a), [#"{"ok":true,"generation":2,"apps":2,"warnings":0,"findings":[]}"#])
        XCTAssertEqual(h.take(b), [], "asked while the first read was under way")
        XCTAssertEqual(h.pendingPolicyLoads, 1, "the second read, for all who asked meanwhile")
        h.completePolicyLoad()
        XCTAssertEqual(h.take(b), [#"{"ok":true,"generation":3,"apps":2,"warnings":0,"findings":[]}"#])
        XCTAssertEqual(h.take(c), [#"{"ok":true,"generation":3,"apps":2,"warnings":0,"findings":[]}"#])
        XCTAssertEqual(h.connections[gone]!.lines, [], "one that left is not answered")
        XCTAssertEqual(h.pendingPolicyLoads, 0, "nothing more asked, nothing more read")
        XCTAssertEqual(h.notifications.filter { $0 == .reloading }.count, 2, "RELOADING=1 for each read")
    }

    /// 2,000 SIGHUPs in a burst while a load is under way: two reads in all.
    func testASignalStormCostsTwoReads() {
        let h = harness()
        h.policyLoadIsManual = true
        for _ in 0..<2000 { h.feed(.reload) }
        XCTAssertEqual(h.pendingPolicyLoads, 1)
        h.completePolicyLoad()
        XCTAssertEqual(h.pendingPolicyLoads, 1)
        h.completePolicyLoad()
        XCTAssertEqual(h.pendingPolicyLoads, 0)
        XCTAssertEqual(h.engine.state.policyGeneration, 3)
    }

    // MARK: Sessions re-matched

    /// A caller's app and privilege follow the new policy.
    func testCallersAreMatchedAgain() {
        let h = harness()
        let maps = h.connect(Peers.maps)
        XCTAssertEqual(h.request(maps, "QUERY")["matched_by"], "default")
        let wheel = h.connect(makePeer(uid: 1002, gids: [1002, 10], exe: "/usr/bin/netpermctl", pid: 88))
        h.requestError(wheel, "METRICS", .permissionDenied)
        h.reload(policy: "[Defaults]\nAdminGroup=wheel\n" + policy + "\n[App maps]\nExecutable=/usr/bin/maps\nWWAN=allow\n")
        let q = h.request(maps, "QUERY")
        XCTAssertEqual(q["matched_by"], "executable")
        XCTAssertEqual(q["permissions"]?["wwan"], "allow")
        XCTAssertEqual(h.request(wheel, "METRICS")["ok"], true)
        XCTAssertEqual(h.requestError(h.connect(Peers.admin), "METRICS", .permissionDenied),
                       "METRICS needs root or membership of group 'wheel'")
        h.reload(policy: policy)
        h.requestError(wheel, "METRICS", .permissionDenied)
    }

    /// A reload reclassifies the links it already knows ([Interface] sections) without a new dump.
    func testReloadReclassifiesLinks() {
        let h = harness()
        let sub = h.connect(Peers.curl)
        _ = h.subscribe(sub, "links")
        h.reload(policy: policy + "\n[Interface eth*]\nKind=wwan\n")
        let events = h.takeEvents(sub, named: "link")
        XCTAssertEqual(events.map { $0["change"] }, ["changed"])
        XCTAssertEqual(events.first?["link"]?["kind"], "wwan")
        XCTAssertEqual(events.first?["link"]?["classified_by"], "config:[Interface eth*]")
        XCTAssertEqual(events.first?["link"]?["metered"], true)
        XCTAssertEqual(h.logged(containing: "eth0: kind ethernet -> wwan (config:[Interface eth*])").count, 1)
        XCTAssertEqual(h.notifications.last, .ready(status: "2 links, via eth0 (wwan), 2 apps, policy gen 2"))
    }

    /// App events after a reload only for the apps whose verdict changed.
    func testReloadSendsEventsOnlyForChangedApps() {
        let h = harness()
        let sub = h.connect(Peers.root)
        _ = h.subscribe(sub, "apps")
        h.reload(policy: policy.replacingOccurrences(of: "WWAN=deny", with: "WWAN=deny\nEthernet=deny"))
        let events = h.takeEvents(sub, named: "app")
        XCTAssertEqual(events.map { $0["app"] }, ["backup"])
        XCTAssertEqual(events.first?["reason"], "denied")
        XCTAssertEqual(events.first?["denied_kinds"], .array(["wwan", "ethernet"]))
    }

    // MARK: AdminGroup= lookups

    /// The group is looked up when a policy is read (a policy that cannot be used needs none), never while requests
    /// are answered, whoever asks; a missing group is said once per generation.
    func testAdminGroupIsLookedUpWhenThePolicyIsRead() {
        let accounts = CountingAccounts()
        let h = harness(accounts: accounts, settings: Engine.Settings(daemonUID: 500, logLevel: .debug))
        XCTAssertEqual(accounts.groupLookups, ["netperm"], "with the policy")
        let root = h.connect(Peers.root)
        XCTAssertEqual(h.request(root, "METRICS")["ok"], true)
        let daemonUser = h.connect(makePeer(uid: 500, exe: "/usr/bin/netpermctl"))
        XCTAssertEqual(h.request(daemonUser, "METRICS")["ok"], true, "the daemon's own user is privileged")
        let curl = h.connect(Peers.curl)
        let admin = h.connect(Peers.admin)
        XCTAssertEqual(h.request(admin, "METRICS")["ok"], true)
        h.requestError(curl, "METRICS", .permissionDenied)
        XCTAssertEqual(accounts.groupLookups, ["netperm"])
        h.reload(policy: "[App x]\nWWAN=allow\n")
        XCTAssertEqual(accounts.groupLookups, ["netperm"], "a policy with errors is not used")
        h.reload(policy: "[Defaults]\nAdminGroup=nosuch\n" + policy)
        XCTAssertEqual(accounts.groupLookups, ["netperm", "nosuch"])
        h.requestError(admin, "METRICS", .permissionDenied)
        _ = h.connect(Peers.maps)
        XCTAssertEqual(accounts.groupLookups, ["netperm", "nosuch"])
        XCTAssertEqual(h.logged(containing: "group 'nosuch' does not exist; only root may ask about other apps").count, 1)
        XCTAssertEqual(h.request(root, "METRICS")["ok"], true)
    }
}
