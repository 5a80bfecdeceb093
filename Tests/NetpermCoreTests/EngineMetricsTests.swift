@testable import NetpermCore
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

    func testCountsFollowLinksAppsPromptsAndEnforcement() throws {
        let h = harness()
        var m = try samples(h)
        XCTAssertEqual(m["netpermd_build_info{version=\"\(DaemonState.version)\"}"], "1")
        XCTAssertEqual(m["netpermd_ready"], "1")
        XCTAssertEqual(m["netpermd_start_time_seconds"], "1800000000")
        XCTAssertEqual(m["netpermd_links{kind=\"wwan\",metered=\"true\",usable=\"true\"}"], "1", "\(m)")
        XCTAssertEqual(m["netpermd_links{kind=\"loopback\",metered=\"false\",usable=\"false\"}"], "1")
        XCTAssertEqual(m["netpermd_links{kind=\"wifi\",metered=\"false\",usable=\"true\"}"], "0", "zeros are series too")
        XCTAssertEqual(m["netpermd_network_available"], "1")
        XCTAssertEqual(m["netpermd_policy_apps"], "3")
        // Only wwan0 is usable: maps is asked (no agent: denied), backup denied, web may.
        XCTAssertEqual(m["netpermd_apps{reason=\"denied\"}"], "2")
        XCTAssertEqual(m["netpermd_apps{reason=\"ok\"}"], "1")
        XCTAssertEqual(m["netpermd_apps{reason=\"awaiting-decision\"}"], "0")
        XCTAssertEqual(m["netpermd_enforcement_mode{mode=\"block\"}"], "1")
        XCTAssertEqual(m["netpermd_enforcement_mode{mode=\"off\"}"], "0")
        XCTAssertEqual(m["netpermd_enforcement_state{state=\"enforcing\"}"], "1")
        XCTAssertEqual(m["netpermd_enforcement_rules_in_force_since_seconds"], "1800000000")
        XCTAssertEqual(m["netpermd_enforcement_rule_loads_total"], "1")
        XCTAssertEqual(m["netpermd_connections_total"], "1")
        XCTAssertEqual(m["netpermd_connections"], "1", "the asker's own connection")

        // An agent comes: maps awaits a decision, and its QUERY raises a prompt; a rejected packet of maps while
        // that prompt is open raises none.
        let agent = h.connectAgent()
        _ = h.request(h.connect(Peers.maps), "QUERY")
        h.feed(.blocked(app: "maps", kind: .wwan))
        m = try samples(h)
        XCTAssertEqual(m["netpermd_apps{reason=\"awaiting-decision\"}"], "1")
        XCTAssertEqual(m["netpermd_prompts_raised_total{trigger=\"request\"}"], "1")
        XCTAssertEqual(m["netpermd_prompts_raised_total{trigger=\"rejected-packet\"}"], "0")
        XCTAssertEqual(m["netpermd_prompts_open"], "1")
        XCTAssertEqual(m["netpermd_agents"], "1")
        XCTAssertEqual(m["netpermd_subscribers"], "1")
        h.advance(bySeconds: 11)
        m = try samples(h)
        XCTAssertEqual(m["netpermd_prompts_expired_total"], "1")
        XCTAssertEqual(m["netpermd_prompts_open"], "0")
        // After the quiet minute a rejected packet raises it again; the answer is counted, and stored.
        h.advance(bySeconds: 61)
        h.feed(.blocked(app: "maps", kind: .wwan))
        XCTAssertEqual(h.request(h.connect(), "DECIDE maps wwan allow")["ok"], true)
        m = try samples(h)
        XCTAssertEqual(m["netpermd_prompts_raised_total{trigger=\"rejected-packet\"}"], "1")
        XCTAssertEqual(m["netpermd_prompts_answered_total{decision=\"allow\"}"], "1")
        XCTAssertEqual(m["netpermd_prompts_answered_total{decision=\"deny\"}"], "0")
        XCTAssertEqual(m["netpermd_decisions{source=\"lasting\",decision=\"allow\"}"], "1")
        XCTAssertEqual(m["netpermd_apps{reason=\"ok\"}"], "2")
        XCTAssertEqual(m["netpermd_enforcement_rule_loads_total"], "1", "maps is matched by executable: not in the rules")
        _ = agent

        // A broken reload: counted, the generation stays, the last reload is marked failed.
        h.reload(policy: policy + "\nWiFi=maybe\n")
        m = try samples(h)
        XCTAssertEqual(m["netpermd_policy_generation"], "1")
        XCTAssertEqual(m["netpermd_policy_reload_failures_total"], "1")
        XCTAssertEqual(m["netpermd_policy_last_reload_successful"], "0")

        // The kernel refuses the rules: counted, and nothing is in force.
        h.rulesError = "Operation not permitted"
        h.reload(policy: policy + "\n[App extra]\nUser=5\n")
        m = try samples(h)
        XCTAssertEqual(m["netpermd_policy_generation"], "2")
        XCTAssertEqual(m["netpermd_policy_last_reload_successful"], "1")
        XCTAssertEqual(m["netpermd_enforcement_state{state=\"failed\"}"], "1")
        XCTAssertEqual(m["netpermd_enforcement_rule_load_failures_total"], "2", "the change, then the whole table")
        XCTAssertEqual(m["netpermd_enforcement_rules_in_force_since_seconds"], "0")
        XCTAssertEqual(m["netpermd_enforcement_apps"], "0")
    }

    /// Like APPS: the policy's whole picture is for root and the admin group.
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
