// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import XCTest

/// [Enforcement] Mode= in the config, and the engine's `loadRules`: emitted when the rules would change and only
/// then, retried when the kernel refuses them, removed on Mode=off and left in force at a stop; verdicts say
/// whether they are enforced.
final class EngineEnforcementTests: XCTestCase {
    private let policy = """
        [Enforcement]
        Mode=block
        [App phone]
        User=1000
        WWAN=ask
        [App browser]
        Executable=/usr/bin/firefox
        """

    func testModeParses() throws {
        XCTAssertEqual(try parsePolicy("").enforcement, .off)
        XCTAssertEqual(try parsePolicy("[Enforcement]\nMode=block\n").enforcement, .block)
        XCTAssertEqual(try parsePolicy("[Enforcement]\nMode=Off\n").enforcement, .off)
        let path = "/etc/netpermd/netpermd.conf"
        XCTAssertEqual(try parsePolicy("[Enforcement]\nMode=steer\n").enforcement, .steer)
        let bad = Config.parse(files: [(path, "[Enforcement]\nMode=on\nKind=wwan\n")])
        XCTAssertEqual(bad.problems.map(\.description), [
            "\(path):2: [Enforcement]: bad value 'on' for Mode= (expected off, block or steer)",
            "\(path):3: warning: [Enforcement]: unknown key 'Kind' (Kind= belongs in [Interface GLOB] or [Network SSID]); ignored",
        ])
    }

    /// Mode=off: one quiet removal at start-up (a table a killed daemon left), then nothing, whatever changes.
    func testModeOffRemovesQuietlyOnceAndNeverLoads() {
        let h = EngineHarness(policy: "[App phone]\nUser=1000\n", links: [Links.lo, Links.eth])
        XCTAssertEqual(h.rules, [Ruleset.removal])
        h.setLinks([Links.lo, Links.eth, Links.wwan])
        h.reload(policy: "[App phone]\nUser=1000\nWWAN=deny\n")
        XCTAssertEqual(h.rules, [Ruleset.removal])
        let q = h.request(h.connect(), "QUERY phone")
        XCTAssertEqual(q["enforced"], false)
        XCTAssertEqual(q["enforced_why"], "mode-off")
        XCTAssertEqual(h.request(h.connect(), "STATUS")["enforcement"], .object([("mode", "off"), ("state", "off")]))
    }

    /// Loaded once the first picture is in; a change of carrier rebuilds nothing; a link appearing, a decision,
    /// a reload each load new rules; Mode=off removes them; stopping leaves them in force.
    func testLoadsWhenTheRulesChangeAndOnlyThen() {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.eth])
        XCTAssertEqual(h.rules.count, 1)
        let phone = ConnectionTags.text(ConnectionTags.assign(["phone", "browser"])["phone"]!)
        XCTAssertTrue(h.rules[0].contains("1000 : goto ask_\(phone.dropFirst(2))_wwan"), "ask with no decision is rejected, links or not")
        XCTAssertTrue(h.rules[0].contains("""
                \tchain ask_\(phone.dropFirst(2))_wwan {
                \t\tlimit rate 5/second burst 5 packets log group 28272 prefix "netpermd:phone:wwan"
                \t\tgoto refuse
                \t}
                """), "after being logged (at most 5 a second)")
        XCTAssertFalse(h.rules[0].contains("wwan0"))
        var wwan = Links.wwan
        h.setLinks([Links.lo, Links.eth, wwan])
        XCTAssertEqual(h.rules.count, 2, "a new link is a new map element")
        XCTAssertTrue(h.rules[1].contains(#""wwan0" : goto metered_wwan }"#), h.rules[1])
        XCTAssertEqual(h.scripts[1], "flush map inet netpermd links\nadd element inet netpermd links { "
                       + "\"eth0\" : goto kind_ethernet, \"wwan0\" : goto metered_wwan }\n",
                       "only links changed: only the links map is loaded (wwan0 is metered)")
        wwan.status.carrier = false
        h.setLinks([Links.lo, Links.eth, wwan])
        XCTAssertEqual(h.rules.count, 2, "carrier is not in the rules")
        _ = h.connectAgent()
        XCTAssertEqual(h.rules.count, 2, "an agent arriving leaves undecided ask rejected: same text, no load")
        XCTAssertEqual(h.request(h.connect(), "DECIDE phone wwan allow --once")["ok"], true)
        XCTAssertEqual(h.rules.count, 3)
        XCTAssertEqual(h.transactionLists[2], [
            "delete element inet netpermd uid_wwan { 1000 }\ndelete element inet netpermd conn_wwan { \(phone) }\n",
            "flush chain inet netpermd owned_wwan\nflush chain inet netpermd kind_wwan\n"
                + "add rule inet netpermd kind_wwan ct state new ct mark 0 jump tag\n"
                + "add rule inet netpermd kind_wwan meta skuid 0-4294967295 goto owned_wwan\n"
                + "add rule inet netpermd kind_wwan ct mark vmap @conn_wwan\n"
                + "delete chain inet netpermd ask_\(phone.dropFirst(2))_wwan\n"],
                       "a decision changes only its elements, then the emptied map's lookup, wwan's report drops (no app is "
                       + "kept off it now) and its pending chain go")
        h.setLinks([Links.lo, Links.eth])
        XCTAssertEqual(h.scripts.last, "flush map inet netpermd links\nadd element inet netpermd links { \"eth0\" : goto kind_ethernet }\n",
                       "the last wwan (and metered) link went")
        h.setLinks([Links.lo, Links.eth, wwan])
        XCTAssertEqual(h.rules.count, 5)
        XCTAssertFalse(h.rules[2].contains("1000 : goto"))
        XCTAssertFalse(h.rules[2].contains("ask_\(phone.dropFirst(2))_wwan"), "decided: nothing to log")
        h.reload(policy: policy.replacingOccurrences(of: "Mode=block", with: "Mode=off"))
        XCTAssertEqual(h.rules.last, Ruleset.removal, "Mode=off on reload removes the table")
        XCTAssertEqual(h.rules.count, 6)
        h.reload(policy: policy)
        XCTAssertEqual(h.rules.count, 7)
        XCTAssertEqual(h.scripts.last, h.rules.last, "after Mode=off, the whole table")
        let loads = h.rules.count
        h.feed(.stopping)
        XCTAssertEqual(h.rules.count, loads, "a stop leaves the rules in force: the next start takes them over")
        XCTAssertEqual(h.logged(containing: "the rules stay in force until the next start").count, 1)
    }

    /// RELOAD is answered once the new policy's rules are handed over, as DECIDE is: a client that reloads and
    /// then connects meets the new rules.
    func testReloadAndDecideAreAnsweredAfterTheirRules() {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.wwan])
        let admin = h.connect()
        h.policyFiles = [("/etc/netpermd/netpermd.conf", policy.replacingOccurrences(of: "Mode=block", with: "Mode=off"))]
        var mark = h.steps.count
        XCTAssertEqual(h.request(admin, "RELOAD")["ok"], true)
        var after = Array(h.steps[mark...])
        XCTAssertLessThan(after.firstIndex(of: "remove-rules") ?? .max, after.firstIndex(of: "reply \(admin)") ?? -1, "\(after)")
        h.policyFiles = [("/etc/netpermd/netpermd.conf", policy)]
        XCTAssertEqual(h.request(admin, "RELOAD")["ok"], true)
        mark = h.steps.count
        XCTAssertEqual(h.request(admin, "DECIDE phone wwan allow --once")["ok"], true)
        after = Array(h.steps[mark...])
        XCTAssertLessThan(after.firstIndex(of: "update-rules") ?? .max, after.firstIndex(of: "reply \(admin)") ?? -1, "\(after)")
    }

    /// A link appearing or going, alone, builds only the `links` map, not every app's maps (a link appearing with
    /// 10,000 apps took 40-180 ms of building, BENCHMARKS.md figure 12); the rules are what a whole build gives.
    /// Anything else (a decision, links and a decision in one input) builds the whole ruleset.
    func testALinkChangeBuildsOnlyTheLinksMap() throws {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.eth])
        XCTAssertEqual(h.engine.enforcement.fullBuilds, 1)
        let config = try parsePolicy(policy)
        func whole(_ links: [Link]) -> String {
            Ruleset.build(apps: config.apps, permissions: {
                h.engine.state.decisions.apply(to: config.permissions(for: $0), app: $0.id).permissions
            }, links: links, cgroups: UnitCgroups()).text
        }
        let wwan1 = makeLink(9, "wwan1", .wwan)
        h.setLinks([Links.lo, Links.eth, Links.wwan, wwan1])
        XCTAssertEqual(h.engine.enforcement.fullBuilds, 1, "links alone: their map only")
        XCTAssertEqual(h.rules.last, whole([Links.lo, Links.eth, Links.wwan, wwan1]))
        XCTAssertTrue(h.scripts.last?.hasPrefix("flush map inet netpermd links\n") == true)
        h.setLinks([Links.lo, Links.wwan])
        XCTAssertEqual(h.engine.enforcement.fullBuilds, 1)
        XCTAssertEqual(h.rules.last, whole([Links.lo, Links.wwan]))
        XCTAssertEqual(h.request(h.connect(), "DECIDE phone wwan allow")["ok"], true)
        XCTAssertEqual(h.engine.enforcement.fullBuilds, 2, "a decision builds every app's maps")
        XCTAssertEqual(h.rules.last, whole([Links.lo, Links.wwan]))
        XCTAssertFalse(h.rules.last!.contains("ask_\(ConnectionTags.text(ConnectionTags.assign(["phone"])["phone"]!).dropFirst(2))_wwan"))
        h.setLinks([Links.lo, Links.eth, Links.wwan])
        XCTAssertEqual(h.engine.enforcement.fullBuilds, 2)
        XCTAssertEqual(h.rules.last, whole([Links.lo, Links.eth, Links.wwan]), "the decision stays in the rules")
    }

    /// A change made element by element that the kernel refuses (its table is not what the change was made
    /// against: another tool's change not yet repaired) is followed at once by the whole table, not by a retry a
    /// second later; a whole table refused is retried as before.
    func testARefusedUpdateLoadsTheWholeTableAtOnce() {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.wwan])
        XCTAssertEqual(h.steps.filter { $0.hasSuffix("-rules") }, ["load-rules"])
        h.rulesError = EdgeError(.loadRules, errno: ENOENT, "Could not process rule: No such file or directory")
        XCTAssertEqual(h.request(h.connect(), "DECIDE phone wwan allow --once")["ok"], true)
        XCTAssertEqual(h.steps.filter { $0.hasSuffix("-rules") }, ["load-rules", "update-rules", "load-rules"])
        XCTAssertEqual(h.rules.last, h.scripts.last)
        XCTAssertEqual(h.logged(containing: "changing only what differs failed").count, 1)
        XCTAssertEqual(h.request(h.connect(), "STATUS")["enforcement"]?["attempts"], 1, "the whole table's failure counts")
        h.rulesError = nil
        h.advance(byMicroseconds: 1_000_000)
        XCTAssertEqual(h.steps.filter { $0.hasSuffix("-rules") }.last, "load-rules", "the retry is the whole table")
        XCTAssertEqual(h.request(h.connect(), "STATUS")["enforcement"]?["state"], "enforcing")
    }

    /// A unit's cgroup appearing, going or made again changes the rules; only by elements added, those of a cgroup
    /// gone left stale (nft could not delete them by a path that no longer names their id), until so many are
    /// stale that the whole table is loaded.
    func testCgroupsChangeTheRules() {
        let h = EngineHarness(policy: policy + "\n[App cron]\nUnit=cron.service\nWWAN=deny\n", links: [Links.lo, Links.wwan])
        let q = { h.request(h.connect(), "QUERY cron") }
        XCTAssertEqual(q()["enforced_why"], "cgroup-absent")
        func cgroups(id: UInt64) -> UnitCgroups {
            UnitCgroups(nftRoot: "", units: [UnitCgroup(path: "system.slice/cron.service", level: 2, unit: "cron.service", id: id)])
        }
        let cron = cgroups(id: 7)
        h.feed(.cgroups(cron))
        XCTAssertTrue(h.rules.last?.contains(#""system.slice/cron.service" : goto deny"#) == true)
        XCTAssertEqual(h.transactionLists.last?.count, 3, "the lookups, then the elements that refuse, then those that pass")
        XCTAssertTrue(h.transactionLists.last?[1].hasPrefix("add element inet netpermd unit2_wwan") == true, h.scripts.last ?? "")
        XCTAssertTrue(h.transactionLists.last?.last?.hasPrefix("add element inet netpermd unit2_roaming") == true, h.scripts.last ?? "")
        XCTAssertEqual(q()["enforced"], true)
        XCTAssertNil(q()["enforced_why"])
        let n = h.rules.count
        h.feed(.cgroups(cron))
        XCTAssertEqual(h.rules.count, n, "the same cgroups: nothing to load")
        h.feed(.cgroups(cgroups(id: 8)))
        XCTAssertEqual(h.rules.count, n + 1, "made again at the same path (cron restarted): the same text, loaded again")
        XCTAssertEqual(h.rules.last, h.rules.dropLast().last)
        XCTAssertFalse(h.scripts.last?.contains("delete") ?? true, "the new id's elements added, the old left")
        XCTAssertEqual(h.logged(containing: "7 left stale").count, 1, "its 6 verdicts and its tag")
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: cgroups(id: 8).units
            + [UnitCgroup(path: "system.slice/other.service", level: 2, unit: "other.service", id: 9)])))
        XCTAssertEqual(h.rules.count, n + 1, "a cgroup no app owns changes nothing")
        h.feed(.cgroups(UnitCgroups(nftRoot: "")))
        XCTAssertEqual(h.rules.count, n + 2)
        XCTAssertFalse(h.scripts.last?.contains("cron.service") ?? true, "gone: no element nft can be told of")
        XCTAssertEqual(q()["enforced_why"], "cgroup-absent")
        // Restarted over and over: 7 stale elements each time, until past 1,024 the whole table clears them.
        var id: UInt64 = 100
        while h.scripts.last != h.rules.last, id < 400 {
            id += 1
            h.feed(.cgroups(cgroups(id: id)))
        }
        XCTAssertEqual(h.scripts.last, h.rules.last)
        // 14 stale before (made again, gone); id 101 appears, each later one leaves 7: 14 + 7 * 145 > 1,024.
        XCTAssertEqual(id, 101 + 145, "the restart that would leave more than 1,024 stale elements loads the whole table")
        h.feed(.cgroups(cgroups(id: id + 1)))
        XCTAssertNotEqual(h.scripts.last, h.rules.last, "and none are stale after it")
    }

    /// A process asking about its own app from a unit's cgroup hears whether that cgroup is in the rules: a
    /// `netpermctl run` scope just made is `cgroup-pending` (its app executable-only, or enforced through another
    /// scope) until the rules name it; asked by name, or by another process, the app's own fact holds.
    func testOwnCgroupPendingUntilTheRulesNameIt() {
        let h = EngineHarness(policy: policy + "\n[App tool]\nExecutable=/usr/bin/tool\nWWAN=deny\n", links: [Links.lo, Links.wwan])
        let scope = RunScope.unitName(app: "tool", tag: "77_a")!
        let other = RunScope.unitName(app: "tool", tag: "78_b")!
        let inside = h.connect(makePeer(uid: 0, exe: "/usr/bin/netpermctl", unit: scope, pid: 77))
        XCTAssertEqual(h.request(inside, "QUERY")["app"], "tool")
        XCTAssertEqual(h.request(inside, "QUERY")["enforced_why"], "cgroup-pending")
        XCTAssertEqual(h.request(h.connect(), "QUERY tool")["enforced_why"], "executable-only", "by name: the app's fact")
        func cgroups(_ units: [String]) -> UnitCgroups {
            UnitCgroups(nftRoot: "", units: units.enumerated().map {
                UnitCgroup(path: "system.slice/" + $1, level: 2, unit: $1, id: UInt64(100 + $0))
            })
        }
        h.feed(.cgroups(cgroups([other])))
        XCTAssertEqual(h.request(h.connect(), "QUERY tool")["enforced"], true, "enforced through the other scope")
        XCTAssertEqual(h.request(inside, "QUERY")["enforced_why"], "cgroup-pending", "but not this one yet")
        h.feed(.cgroups(cgroups([other, scope])))
        XCTAssertTrue(h.rules.last?.contains(#""system.slice/\#(scope)" : goto deny"#) == true)
        XCTAssertEqual(h.request(inside, "QUERY")["enforced"], true)
        XCTAssertNil(h.request(inside, "QUERY")["enforced_why"])
        h.rulesError = EdgeError(.loadRules, "refused")
        h.feed(.cgroups(cgroups([scope])))
        XCTAssertEqual(h.request(inside, "QUERY")["enforced_why"], "rules-failed", "nothing in force says so, not pending")
    }

    /// A process in a unit's cgroup that the rules do not follow (deeper than the levels they look up, or inside
    /// another unit's cgroup) used to hear `cgroup-pending` for ever: it hears `cgroup-unfollowed`, at once.
    func testOwnCgroupTheRulesDoNotFollowSaysSo() {
        let h = EngineHarness(policy: policy + "\n[App deep]\nUnit=deep.service\nWWAN=deny\n", links: [Links.lo, Links.wwan])
        var peer = makePeer(uid: 0, exe: "/usr/bin/tool", unit: "deep.service", pid: 77)
        peer.unitFollowed = false
        let inside = h.connect(peer)
        XCTAssertEqual(h.request(inside, "QUERY")["app"], "deep")
        XCTAssertEqual(h.request(inside, "QUERY")["enforced_why"], "cgroup-unfollowed")
        XCTAssertEqual(h.request(h.connect(), "QUERY deep")["enforced_why"], "cgroup-absent", "by name: the app's fact")
    }

    /// Verdicts per app: enforced by uid; an executable cannot be; an app no section covers is not.
    func testVerdictsSayWhetherEnforced() {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.wwan])
        XCTAssertEqual(h.request(h.connect(), "QUERY phone")["enforced"], true)
        let browser = h.request(h.connect(), "QUERY browser")
        XCTAssertEqual(browser["enforced"], false)
        XCTAssertEqual(browser["enforced_why"], "executable-only")
        let own = h.request(h.connect(makePeer(uid: 1001, exe: "/usr/bin/curl")), "QUERY")
        XCTAssertEqual(own["enforced_why"], "not-in-policy")
        let apps = h.request(h.connect(), "APPS")["apps"]?.arrayValue ?? []
        XCTAssertEqual(apps.map { $0["enforced"] }, [true, false])
        let status = h.request(h.connect(), "STATUS")["enforcement"]
        XCTAssertEqual(status?["state"], "enforcing")
        XCTAssertEqual(status?["apps"], 1)
        XCTAssertEqual(status?["uids"], 1)
    }

    /// A refused load is retried after 1, 2, 4 and 8 s, then left until the next change; STATUS and the verdicts
    /// say so.
    func testFailuresAreRetriedBounded() {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.eth], started: false)
        h.rulesError = EdgeError(.loadRules, errno: EPERM, "Operation not permitted")
        h.feed(.started)
        XCTAssertEqual(h.rules.count, 1)
        XCTAssertEqual(h.request(h.connect(), "QUERY phone")["enforced_why"], "rules-failed")
        let status = h.request(h.connect(), "STATUS")["enforcement"]
        XCTAssertEqual(status?["state"], "failed")
        XCTAssertEqual(status?["error"], "Operation not permitted")
        XCTAssertTrue(h.notifications.contains(.status("2 links, via eth0 (ethernet), 2 apps, policy gen 1, "
            + "enforcement failed: Operation not permitted")), "\(h.notifications)")
        for (wait, count) in [(999_999 as UInt64, 1), (1, 2), (2_000_000, 3), (4_000_000, 4), (8_000_000, 5),
                              (60_000_000, 5)] {
            h.advance(byMicroseconds: wait)
            XCTAssertEqual(h.rules.count, count, "after \(wait) µs more")
        }
        XCTAssertEqual(h.logged(containing: "giving up until the next change").count, 1)
        h.rulesError = nil
        h.setLinks([Links.lo, Links.eth, Links.wwan])
        XCTAssertEqual(h.rules.count, 6, "the next change tries again")
        XCTAssertEqual(h.request(h.connect(), "QUERY phone")["enforced"], true)
        XCTAssertEqual(h.request(h.connect(), "STATUS")["enforcement"]?["state"], "enforcing")
    }
}
