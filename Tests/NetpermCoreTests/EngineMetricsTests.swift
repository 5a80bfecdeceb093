// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import XCTest

/// METRICS (docs/METRICS.md): the exposition text follows what the engine knows and what happened, every series
/// is there from the start (zeros included), and names and escapes are Prometheus'.
final class EngineMetricsTests: XCTestCase {
    private let policy = """
        [Defaults]
        PromptTimeoutSec=10
        [Enforcement]
        Mode=block
        [App maps]
        Executable=/usr/bin/maps
        WWAN=ask
        Metered=allow
        [App backup]
        Unit=backup.service
        WWAN=deny
        [App web]
        User=1000
        WWAN=allow
        Metered=allow
        """

    private func harness(clock: Double = 1_800_000_000) -> EngineHarness {
        EngineHarness(policy: policy, links: [Links.lo, Links.wwan],
                      settings: Engine.Settings(daemonUID: 0, logLevel: .debug, wallClock: { clock }))
    }

    /// Each sample line "NAME{LABELS} VALUE" of the reply, by "NAME{LABELS}".
    private func samples(_ h: EngineHarness, _ peer: PeerIdentity = Peers.root) throws -> [String: String] {
        let reply = h.request(h.connect(peer), "METRICS")
        let text = try XCTUnwrap(reply["metrics"]?.stringValue, "\(reply)")
        var out: [String: String] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let space = try XCTUnwrap(line.lastIndex(of: " "))
            out[String(line[..<space])] = String(line[line.index(after: space)...])
        }
        return out
    }

    /// Each `series: value` is what METRICS says now.
    private func expect(_ h: EngineHarness, _ expected: [String: String], _ why: String = "",
                        file: StaticString = #filePath, line: UInt = #line) throws {
        let m = try samples(h)
        for (series, value) in expected.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(m[series], value, "\(series) \(why)", file: file, line: line)
        }
    }

    func testCountsFollowLinksAppsPromptsAndEnforcement() throws {
        let h = harness()
        // Only wwan0 is usable: maps is asked (no agent: denied), backup denied, web may. Zeros are series too.
        try expect(h, [
            "netpermd_build_info{version=\"\(DaemonState.version)\"}": "1", "netpermd_ready": "1",
            "netpermd_start_time_seconds": "1800000000",
            "netpermd_links{kind=\"wwan\",metered=\"true\",usable=\"true\"}": "1",
            "netpermd_links{kind=\"loopback\",metered=\"false\",usable=\"false\"}": "1",
            "netpermd_links{kind=\"wifi\",metered=\"false\",usable=\"true\"}": "0",
            "netpermd_network_available": "1", "netpermd_policy_apps": "3",
            "netpermd_apps{reason=\"denied\"}": "2", "netpermd_apps{reason=\"ok\"}": "1",
            "netpermd_apps{reason=\"awaiting-decision\"}": "0",
            "netpermd_enforcement_mode{mode=\"block\"}": "1", "netpermd_enforcement_mode{mode=\"off\"}": "0",
            "netpermd_enforcement_state{state=\"enforcing\"}": "1",
            "netpermd_enforcement_rules_in_force_since_seconds": "1800000000",
            "netpermd_enforcement_rule_loads_total": "1",
            // The asker's own connection.
            "netpermd_connections_total": "1", "netpermd_connections_open": "1",
        ])

        // An agent comes: maps awaits a decision, and its QUERY raises a prompt; a rejected packet of maps (its
        // socket uid 1000's, as the asker's) while that prompt is open raises none.
        let agent = h.connectAgent()
        _ = h.request(h.connect(Peers.maps), "QUERY")
        h.feed(.blocked(app: "maps", kind: .wwan, uid: 1000, ifindex: nil))
        try expect(h, [
            "netpermd_apps{reason=\"awaiting-decision\"}": "1",
            "netpermd_prompts_raised_total{trigger=\"request\"}": "1",
            "netpermd_prompts_raised_total{trigger=\"rejected-packet\"}": "0",
            "netpermd_prompts_open": "1", "netpermd_agents{for=\"everyone\"}": "1", "netpermd_agents{for=\"user\"}": "0",
            "netpermd_subscribers": "1",
        ])
        h.advance(bySeconds: 11)
        try expect(h, ["netpermd_prompts_expired_total": "1", "netpermd_prompts_open": "0"])
        // After the quiet minute a rejected packet raises it again; the answer is counted, and stored, and changes
        // the rules (maps' connections are no longer asked about): one more load.
        h.advance(bySeconds: 61)
        h.feed(.blocked(app: "maps", kind: .wwan, uid: 1000, ifindex: nil))
        XCTAssertEqual(h.request(h.connect(), "DECIDE maps wwan allow")["ok"], true)
        try expect(h, [
            "netpermd_prompts_raised_total{trigger=\"rejected-packet\"}": "1",
            "netpermd_prompts_answered_total{decision=\"allow\"}": "1",
            "netpermd_prompts_answered_total{decision=\"deny\"}": "0",
            "netpermd_decisions{source=\"lasting\",decision=\"allow\"}": "1",
            "netpermd_apps{reason=\"ok\"}": "2", "netpermd_enforcement_rule_loads_total": "2",
        ])
        _ = agent

        // A broken reload: counted, the generation stays, the last reload is marked failed.
        h.reload(policy: policy + "\nWiFi=maybe\n")
        try expect(h, ["netpermd_policy_generation": "1", "netpermd_policy_reload_failures_total": "1",
                       "netpermd_policy_last_reload_successful": "0"])

        // The kernel refuses the rules (the change, then the whole table): counted, and nothing is in force.
        h.rulesError = EdgeError(.loadRules, errno: EPERM, "Operation not permitted")
        h.reload(policy: policy + "\n[App extra]\nUser=5\n")
        try expect(h, [
            "netpermd_policy_generation": "2", "netpermd_policy_last_reload_successful": "1",
            "netpermd_enforcement_state{state=\"failed\"}": "1",
            "netpermd_enforcement_rule_load_failures_total": "2",
            "netpermd_enforcement_rules_in_force_since_seconds": "0", "netpermd_enforcement_apps": "0",
        ])
    }

    /// What users deciding for their own apps adds: their agents and decisions apart from everyone's, and prompts
    /// withdrawn when their askers exit.
    func testUsersOwnAgentsDecisionsAndWithdrawnPrompts() throws {
        let h = harness()
        let own = h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermctl", pid: 90))
        _ = h.subscribe(own, "prompts")
        try expect(h, ["netpermd_agents{for=\"everyone\"}": "0", "netpermd_agents{for=\"user\"}": "1"])
        // maps of uid 1000 asks and exits: its prompt is withdrawn.
        _ = h.request(h.connect(Peers.maps), "QUERY")
        h.exit(pid: 500)
        try expect(h, ["netpermd_prompts_raised_total{trigger=\"request\"}": "1", "netpermd_prompts_withdrawn_total": "1",
                       "netpermd_prompts_open": "0"])
        // The user's own answers: one lasting, one once, counted apart from everyone's.
        XCTAssertEqual(h.request(own, "DECIDE maps wwan allow")["decided"]?["for_uid"], 1000)
        XCTAssertEqual(h.request(own, "DECIDE web wifi deny --once")["decided"]?["for_uid"], 1000)
        try expect(h, [
            "netpermd_decisions{source=\"user-lasting\",decision=\"allow\"}": "1",
            "netpermd_decisions{source=\"user-once\",decision=\"deny\"}": "1",
            "netpermd_decisions{source=\"lasting\",decision=\"allow\"}": "0",
            "netpermd_decisions{source=\"once\",decision=\"deny\"}": "0",
        ])
    }

    /// Like APPS: the policy's whole picture is for root and the admin group.
    /// Apps known by what they run: the edge's exec counts (most execs never reach the engine otherwise), the
    /// processes found, and the scopes' outcomes.
    func testExecsCountedFoundAndScopes() throws {
        let h = harness()
        try expect(h, ["netpermd_process_execs_total": "0", "netpermd_process_exec_app_programs_total": "0",
                       "netpermd_process_events_overruns_total": "0", "netpermd_process_exec_apps_found_total": "0",
                       "netpermd_process_exec_scopes_total{outcome=\"made\"}": "0",
                       "netpermd_process_exec_scopes_total{outcome=\"failed\"}": "0"], "from the start")
        h.feed(.execsCounted(ExecCounts(execs: 10_000, candidates: 3, overruns: 1)))
        h.scopesAreManual = true
        for pid in Int32(1)...2 {
            h.feed(.execFound(ExecFound(pid: pid, uid: 1000, app: "org.example.Maps", place: .dbusActivation, executable: nil)))
        }
        XCTAssertEqual(h.pendingScopes.count, 2)
        h.feed(.scopeMade(h.pendingScopes[0], error: nil))
        h.feed(.scopeMade(h.pendingScopes[1], error: EdgeError(.makeScope, "no manager")))
        try expect(h, ["netpermd_process_execs_total": "10000", "netpermd_process_exec_app_programs_total": "3",
                       "netpermd_process_events_overruns_total": "1", "netpermd_process_exec_apps_found_total": "2",
                       "netpermd_process_exec_scopes_total{outcome=\"made\"}": "1",
                       "netpermd_process_exec_scopes_total{outcome=\"failed\"}": "1"])
    }

    func testIsPrivileged() {
        let h = harness()
        _ = h.requestError(h.connect(Peers.maps), "METRICS", .permissionDenied)
        XCTAssertEqual(h.request(h.connect(Peers.admin), "METRICS")["ok"], true)
    }

    /// Every family has HELP and TYPE once, before its samples; counters and only counters end in _total.
    func testEveryFamilyIsDeclaredOnceBeforeItsSamples() throws {
        let h = harness()
        let text = try XCTUnwrap(h.request(h.connect(), "METRICS")["metrics"]?.stringValue)
        var declared: [String: String] = [:]
        var last: String?
        for line in text.split(separator: "\n").map(String.init) {
            let words = line.split(separator: " ").map(String.init)
            if line.hasPrefix("# HELP ") {
                XCTAssertNil(declared[words[2]], "declared twice: \(words[2])")
                last = words[2]
            } else if line.hasPrefix("# TYPE ") {
                XCTAssertEqual(words[2], last)
                declared[words[2]] = words[3]
                XCTAssertEqual(words[2].hasSuffix("_total"), words[3] == "counter", line)
            } else {
                let name = String(line.prefix { $0 != "{" && $0 != " " })
                XCTAssertEqual(name, last, "a sample outside its family: \(line)")
                XCTAssertTrue(name.hasPrefix("netpermd_"), line)
            }
        }
        XCTAssertGreaterThan(declared.count, 20)
        // Issue 31, point 15: OpenMetrics names a counter without its `_total`, so a gauge may not bear that name
        // (`netpermd_connections` beside `netpermd_connections_total`).
        for (name, type) in declared where type == "counter" {
            XCTAssertNil(declared[String(name.dropLast("_total".count))], "\(name) and a family of its base name")
        }
    }

    /// Issue 31, point 15: with 10,001 apps METRICS was 6.2 MB of 80,288 series, 8 per app. Past `MetricsApps=`
    /// apps the per-app usage series are written for the apps with a budget only, the others summed as one; at or
    /// under it, for every app.
    func testUsageSeriesAreBoundedByMetricsApps() throws {
        var policy = "[Usage]\nCount=yes\nMetricsApps=5\n[Enforcement]\nMode=block\n"
        for i in 0..<50 { policy += "[App a\(i)]\nUser=\(2000 + i)\n" + (i < 2 ? "MeteredBudget=1M\n" : "") }
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.wwan])
        let m = try samples(h)
        func apps(_ family: String) -> Set<String> {
            Set(m.keys.filter { $0.hasPrefix(family + "{") }.compactMap { key in
                key.split(separator: ",").first { $0.contains("app=\"") }.map { String($0.split(separator: "\"")[1]) }
            })
        }
        XCTAssertEqual(apps("netpermd_app_sent_bytes_total"), ["a0", "a1", "(unbudgeted)", "(other)"])
        XCTAssertEqual(apps("netpermd_app_metered_budget_bytes"), ["a0", "a1"])
        let small = EngineHarness(policy: policy.replacingOccurrences(of: "MetricsApps=5", with: "MetricsApps=50"),
                                  links: [Links.lo, Links.wwan])
        let all = try samples(small)
        XCTAssertEqual(Set(all.keys.filter { $0.hasPrefix("netpermd_app_sent_bytes_total{") }.compactMap {
            $0.split(separator: "\"").dropFirst().first.map(String.init)
        }).count, 51, "every app and (other)")
    }

    func testEscapes() {
        var m = MetricsText()
        m.family("netpermd_test", .gauge, "back\\slash\nnewline \"quoted\"")
        m.sample(1, ["app": "a\"b\\c\nd"])
        XCTAssertEqual(m.text, """
            # HELP netpermd_test back\\\\slash\\nnewline "quoted"
            # TYPE netpermd_test gauge
            netpermd_test{app="a\\"b\\\\c\\nd"} 1

            """)
        XCTAssertTrue(MetricsText.isName("netpermd_links"))
        XCTAssertFalse(MetricsText.isName("netpermd-links"))
        XCTAssertFalse(MetricsText.isName("NetpermdLinks"))
        XCTAssertFalse(MetricsText.isName("9links"))
    }
}
