// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// netpermctl's output formats: the links table and one link in detail.
extension NetpermctlTests {
    func testLinksTableFitsAHundredColumns() throws {
        let f = try makeFixture()
        // The longest name the kernel allows (IFNAMSIZ - 1), as USB Ethernet adapters get, with four addresses.
        let long = "enx00e04c680001"
        try f.ns.addVethPair(long, peer: "enxpeer")
        let addresses = ["192.168.100.200/24", "192.168.101.200/24", "192.168.102.200/24", "192.168.103.200/24"]
        for a in addresses { try f.ns.ip("addr", "add", a, "dev", long) }
        try f.ns.ip("route", "add", "default", "via", "192.168.100.1", "dev", long, "metric", "20600")
        try f.ns.ip("addr", "add", "10.1.0.1/24", "dev", "wlan0")
        try f.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "600")
        try waitForLinks(f.socket, "\(long) usable with its addresses, wlan0 usable") { l in
            l[name: long]?.usable == true && l[name: long]?.addresses.count == 4 && l[name: "wlan0"]?.usable == true
        }
        let r = try ctl(["--socket", f.socket, "links"])
        XCTAssertEqual(r.status, 0, r.summary)
        for line in r.lines {
            XCTAssertLessThanOrEqual(line.count, 100, "a line wider than 100 columns:\n\(r.stdout)")
        }
        let row = try XCTUnwrap(r.lines.first { $0.split(separator: " ").dropFirst().first == Substring(long) },
                                r.stdout)
        let cells = row.split(separator: " ").map(String.init)
        XCTAssertEqual(Array(cells.suffix(6)), ["routable", "ipv4", "20600", "yes"] + [cells.suffix(2).first!, "+3"], row)
        XCTAssertTrue(addresses.contains(cells[cells.count - 2]), "the first address is one of the link's: \(row)")
        XCTAssertEqual(cells.count, 10, row)

        // The largest metric there is: the address would overflow, so the row says how many there are.
        try f.ns.ip("route", "replace", "default", "via", "192.168.100.1", "dev", long, "metric", "4294967295")
        try f.ns.ip("route", "del", "default", "via", "192.168.100.1", "dev", long, "metric", "20600")
        try waitForLinks(f.socket, "\(long)'s metric is 4294967295") { $0[name: long]?.metric == 4294967295 }
        let wide = try ctl(["--socket", f.socket, "links"])
        for line in wide.lines {
            XCTAssertLessThanOrEqual(line.count, 100, "a line wider than 100 columns:\n\(wide.stdout)")
        }
        XCTAssertTrue(wide.lines.contains {
            $0.contains(" \(long) ") && $0.hasSuffix(" 4294967295  yes     4 addresses") }, wide.stdout)
    }

    func testLinksIfaceShowsOneLinkInDetail() throws {
        let f = try makeFixture()
        try f.ns.ip("addr", "add", "10.1.0.1/24", "dev", "wlan0")
        try f.ns.ip("addr", "add", "10.1.1.1/24", "dev", "wlan0")
        try f.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "100")
        let links = try waitForLinks(f.socket, "wlan0 usable with two addresses") { l in
            l[name: "wlan0"]?.usable == true && l[name: "wlan0"]?.addresses.count == 2
        }
        let wlan0 = try XCTUnwrap(links[name: "wlan0"])
        let r = try ctl(["--socket", f.socket, "links", "wlan0"])
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.lines, [
            "\(wlan0.index): wlan0",
            "kind:          wifi (classified by config:[Interface wlan0])",
            "metered:       no (by default)",
            "state:         routable",
            "admin:         up",
            "carrier:       on",
            "operstate:     up",
            "addresses:     \(wlan0.addresses[0])",
            "               \(wlan0.addresses[1])",
            "default route: ipv4 yes, ipv6 no, metric 100",
            "usable:        yes",
        ], r.stdout)
        XCTAssertEqual(Set(wlan0.addresses), ["10.1.0.1/24", "10.1.1.1/24"])

        // Not usable, and why: its peer is down, so no carrier; and it has no default route.
        try f.ns.ip("link", "set", "wwan0p", "down")
        let afterDown = try waitForLinks(f.socket, "wwan0 without carrier") { $0[name: "wwan0"]?.carrier == false }
        let wwan0 = try XCTUnwrap(afterDown[name: "wwan0"])
        let down = try ctl(["--socket", f.socket, "links", "wwan0"])
        XCTAssertEqual(down.status, 0, down.summary)
        for line in ["state:         no-carrier", "carrier:       off", "addresses:     -",
                     "default route: ipv4 no, ipv6 no", "usable:        no (no carrier, no default route)"] {
            XCTAssertTrue(down.lines.contains(line), "expected '\(line)' in:\n\(down.stdout)")
        }
        XCTAssertEqual(down.lines.first, "\(wwan0.index): wwan0", down.stdout)

        // Admin down comes first among the reasons.
        try f.ns.ip("link", "set", "wwan0", "down")
        try waitForLinks(f.socket, "wwan0 admin down") { $0[name: "wwan0"]?.adminUp == false }
        let off = try ctl(["--socket", f.socket, "links", "wwan0"])
        XCTAssertTrue(off.lines.contains("state:         off"), off.stdout)
        XCTAssertTrue(off.lines.contains("usable:        no (admin down, no carrier, no default route)"), off.stdout)

        // --json: the daemon's object for that link.
        let json = try ctl(["--socket", f.socket, "--json", "links", "wlan0"])
        XCTAssertEqual(json.status, 0, json.summary)
        let o = try JSONValue.object(try XCTUnwrap(json.lines.first))
        XCTAssertEqual(try DaemonLink(o).description, wlan0.description, json.stdout)
        XCTAssertEqual(json.lines.count, 1, json.stdout)

        // A name the daemon does not know is an error, decided here from LINKS.
        for args in [["links", "nosuch0"], ["--json", "links", "nosuch0"]] {
            let missing = try ctl(["--socket", f.socket] + args)
            XCTAssertEqual(missing.status, 1, missing.summary)
            XCTAssertEqual(missing.stdout, "", missing.summary)
            XCTAssertEqual(missing.stderr, "netpermctl: no link named 'nosuch0'\n", missing.summary)
        }
    }
}

// MARK: - -t, --terse

extension NetpermctlTests {
    static let updaterPolicy = "[App updater]\nExecutable=/nonexistent/updater\nWWAN=deny\n"

    func testTerseOutputs() throws {
        let f = try makeAppFixture(policy: Self.updaterPolicy)
        try f.addAddress("wlan0")
        try f.addDefaultRoute("wlan0", metric: 100)
        let links = try waitForLinks(f.socket, "wlan0 usable") { $0[name: "wlan0"]?.usable == true }
        try waitForVerdict(f.socket, "updater", "ok via wlan0") { $0.reason == "ok" }
        let wlan0 = try XCTUnwrap(links[name: "wlan0"])

        let status = try ctl(["--socket", f.socket, "-t", "status"])
        XCTAssertEqual(status.status, 0, status.summary)
        XCTAssertEqual(status.lines, ["version:0.1.0", "ready:yes", "agents:0", "links:\(links.count)", "available:yes",
                                      "primary:wlan0", "primary-kind:wifi", "primary-over:", "policy-generation:1",
                                      "policy-apps:1", "policy-error:", "policy-warnings:0", "enforcement-mode:off",
                                      "enforcement-state:off", "enforcement-error:", "steering-state:",
                                      "steering-error:", "usage-counting:no", "usage-state:off", "usage-error:"],
                       status.stdout)

        // Tables: no header, one line per row, nine fields each.
        let table = try ctl(["--socket", f.socket, "links", "--terse"])
        XCTAssertEqual(table.status, 0, table.summary)
        XCTAssertEqual(table.lines.count, links.count, "no header: \(table.stdout)")
        XCTAssertTrue(table.lines.allSatisfy { TerseRecords.fields($0).count == 9 }, table.stdout)
        XCTAssertTrue(table.lines.contains("\(wlan0.index):wlan0:wifi:no:routable:ipv4:100:yes:10.1.0.1/24"),
                      table.stdout)
        let wwan0 = try XCTUnwrap(links[name: "wwan0"])
        XCTAssertTrue(table.lines.contains("\(wwan0.index):wwan0:wwan:yes:carrier:::no:"), table.stdout)

        // One link: key:value, with the ':' of the classification escaped.
        let one = try ctl(["--socket", f.socket, "-t", "links", "wlan0"])
        XCTAssertEqual(one.status, 0, one.summary)
        XCTAssertEqual(one.lines, [
            "index:\(wlan0.index)", "name:wlan0", "kind:wifi", "classified-by:config\\:[Interface wlan0]", "over:", "metered:no",
            "metered-by:default", "state:routable", "admin-up:yes", "carrier:yes", "operstate:up", "default-route:ipv4",
            "metric:100", "usable:yes", "unusable-because:", "addresses:10.1.0.1/24", "ssid:", "bssid:",
            "roaming:", "roaming-by:", "connection:", "connection-type:",
        ], one.stdout)
        let wwan = try ctl(["--socket", f.socket, "-t", "links", "wwan0"])
        XCTAssertTrue(wwan.lines.contains("unusable-because:no-default-route"), wwan.stdout)

        let query = try ctl(["--socket", f.socket, "-t", "query", "updater"])
        XCTAssertEqual(query.status, 0, query.summary)
        XCTAssertEqual(query.lines, [
            "app:updater", "matched-by:name", "available:yes", "reason:ok", "via:wlan0", "via-kind:wifi",
            "via-metered:no", "via-over:", "denied-kinds:", "pending-kinds:", "wifi:allow", "wwan:deny", "ethernet:allow",
            "other:allow", "metered:allow", "wifi-source:policy", "wwan-source:policy", "ethernet-source:policy",
            "other-source:policy", "metered-source:policy",
            // Issue 23: where the kernel sends its traffic, the way out, and enforcement were only in the JSON.
            "egress-ipv4:wlan0", "egress-ipv4-blocked:", "egress-ipv4-usable:yes", "egress-ipv4-allowed:yes",
            "egress-ipv6:", "egress-ipv6-blocked:", "egress-ipv6-usable:", "egress-ipv6-allowed:", "bind-to:",
            "bind-to-kind:", "enforced:no", "enforced-why:mode-off",
            // Issue 27: the metered budget, empty without one.
            "budget:", "budget-used:", "budget-exhausted:", "budget-enforced:",
            "pid:", "uid:", "executable:", "unit:", "problem:",
            // Issue 35: roaming, at the end (scripts reading the lines above are unchanged).
            "via-roaming:no", "roaming:allow", "roaming-source:policy",
        ], query.stdout)
        // Asking about itself, netpermctl has an identity.
        let own = try ctl(["--socket", f.socket, "-t", "query"])
        XCTAssertEqual(own.status, 0, own.summary)
        XCTAssertTrue(own.lines.contains("executable:\(netpermctl)") || own.lines.contains {
            $0.hasPrefix("executable:") && $0.hasSuffix("/netpermctl") }, own.stdout)
        XCTAssertTrue(own.lines.contains("uid:0"), own.stdout)

        // wait -t: the verdict that let it go, as query -t prints it.
        let wait = try ctl(["--socket", f.socket, "-t", "wait", "--app", "updater", "--timeout", "5"])
        XCTAssertEqual(wait.status, 0, wait.summary)
        XCTAssertEqual(wait.stdout, query.stdout, wait.summary)

        let apps = try ctl(["--socket", f.socket, "-t", "apps"])
        XCTAssertEqual(apps.status, 0, apps.summary)
        XCTAssertEqual(apps.lines, ["updater:yes:ok:wlan0:wifi:no:::allow:deny:allow:allow:allow"], apps.stdout)

        let reload = try ctl(["--socket", f.socket, "-t", "reload"])
        XCTAssertEqual(reload.status, 0, reload.summary)
        let generation = try policyStatus(f.socket).generation
        XCTAssertEqual(reload.lines, ["policy-generation:\(generation)", "policy-apps:1", "policy-warnings:0"],
                       reload.stdout)

        // A failed reload: its error, with its ':' escaped, in status -t.
        _ = try writeConfig(IntegrationTestCase.standardConfig + "\n[App updater]\nWWAN=sometimes\n", in: f.dir)
        XCTAssertEqual(try ctl(["--socket", f.socket, "-t", "reload"]).status, 1)
        let error = try XCTUnwrap(try policyStatus(f.socket).error)
        let broken = try ctl(["--socket", f.socket, "-t", "status"])
        let errorLine = broken.lines.first { $0.hasPrefix("policy-error:") }
        XCTAssertEqual(errorLine, "policy-error:" + error.replacingOccurrences(of: ":", with: "\\:"), broken.stdout)
        XCTAssertEqual(errorLine.map(TerseRecords.fields), ["policy-error", error], "unescaped, it is the error")

        let both = try ctl(["--socket", f.socket, "--json", "-t", "status"])
        XCTAssertEqual(both.status, 2, both.summary)
        XCTAssertEqual(both.stderr, "netpermctl: --json and --terse do not go together\nusage: netpermctl status\n"
            + "try 'netpermctl help status'\n", both.summary)
    }

    /// prompts, decide and forget with -t: an app set to ask asks, an agent is there to be asked.
    func testTersePromptsDecideForget() throws {
        let ns = try makeNamespace()
        try ns.addVethPair("wwan0", peer: "wwan0p")
        let dir = try makeTempDir()
        let asker = try copyExecutable(Subprocess.resolve("socat"), to: dir, as: "asker")
        let config = try writeConfig("[Interface wwan0]\nKind=wwan\n\n[App asker]\nExecutable=\(asker)\nWWAN=ask\n",
                                     in: dir)
        let socket = dir + "/netpermd.sock"
        _ = try startDaemon(in: ns, socket: socket, config: config)
        try ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        try ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0")
        try waitForLinks(socket, "wwan0 is usable") { $0[name: "wwan0"]?.usable == true }

        let none = try ctl(["--socket", socket, "-t", "prompts"])
        XCTAssertEqual(none.status, 0, none.summary)
        XCTAssertEqual(none.stdout, "", "no header, no rows: \(none.summary)")

        // With an agent subscribed, the app's own QUERY raises a prompt that stays open while the app runs.
        let agent = try EvSubscriber(try EvChannel.connect(socket, name: "agent"), topics: "prompts")
        let app = try HeldAsker(self, [asker, "-t", "60", "-", "UNIX-CONNECT:\(socket)"])
        XCTAssertEqual(try app.ask("QUERY")["reason"] as? String, "awaiting-decision")
        let prompt = try agent.nextEvent(timeout: 5)
        XCTAssertEqual(prompt["event"] as? String, "prompt", "\(prompt)")
        let id = try JSONValue.int(prompt, "id")
        let open = try ctl(["--socket", socket, "-t", "prompts"])
        XCTAssertEqual(open.status, 0, open.summary)
        XCTAssertEqual(open.lines, ["\(id):asker:wwan:wwan0:yes:\(asker)::0"], open.stdout)

        let decide = try ctl(["--socket", socket, "-t", "decide", "asker", "wwan", "allow", "--once"])
        XCTAssertEqual(decide.status, 0, decide.summary)
        XCTAssertEqual(Array(decide.lines.prefix(14)), [
            "app:asker", "kind:wwan", "decision:allow", "once:yes", "overridden-by-policy:no", "for-uid:", "available:yes",
            "reason:ok", "via:wwan0", "via-kind:wwan", "via-metered:yes", "via-over:", "denied-kinds:", "pending-kinds:",
        ], decide.stdout)
        XCTAssertTrue(decide.lines.contains("wwan:allow") && decide.lines.contains("wwan-source:once"), decide.stdout)
        XCTAssertEqual(decide.lines.count, 24, decide.stdout)

        let forget = try ctl(["--socket", socket, "-t", "forget", "asker"])
        XCTAssertEqual(forget.status, 0, forget.summary)
        XCTAssertEqual(forget.lines, ["forgotten:yes", "app:asker", "kind:", "for-uid:"], forget.stdout)
        let again = try ctl(["--socket", socket, "-t", "forget", "asker", "wwan"])
        XCTAssertEqual(again.lines, ["forgotten:no", "app:asker", "kind:wwan", "for-uid:"], again.stdout)
        let decisions = try ctl(["--socket", socket, "-t", "decisions"])
        XCTAssertEqual(decisions.lines, [], decisions.stdout)
        XCTAssertEqual(try ctl(["--socket", socket, "decide", "asker", "wwan", "deny"]).status, 0)
        XCTAssertEqual(try ctl(["--socket", socket, "-t", "decisions"]).lines, ["asker:wwan:deny:no:"])
        XCTAssertEqual(try ctl(["--socket", socket, "decisions"]).lines.map { $0.split(separator: " ").map(String.init) },
                       [["APP", "KIND", "DECISION", "UNTIL", "FOR"], ["asker", "wwan", "deny", "stored", "everyone"]])
    }
}

// MARK: - what the JSON has, for people and scripts (issue 23)

extension NetpermctlTests {
    /// The kernel routes by wwan0 (its metric is lower), which updater may not use while wlan0 is usable:
    /// routed-elsewhere. People see why and where to bind, whether it is enforced, and maps' undecided `ask` with no
    /// agent as that, not as the deny it counts as; scripts get egress, bind-to and enforcement too.
    func testQueryShowsWhatTheJSONHas() throws {
        let f = try makeAppFixture(policy: Self.updaterPolicy + "\n[App maps]\nExecutable=/nonexistent/maps\nWWAN=ask\n")
        for (link, metric) in [("wlan0", 600), ("wwan0", 100)] {
            try f.addAddress(link)
            try f.addDefaultRoute(link, metric: metric)
        }
        try waitForVerdict(f.socket, "updater", "routed elsewhere") { $0.reason == "routed-elsewhere" }

        let human = try ctl(["--socket", f.socket, "query", "updater"])
        XCTAssertEqual(human.status, 0, human.summary)
        XCTAssertEqual(human.lines, [
            "app:          updater (matched by name)",
            "network:      no: its traffic would leave by wwan0 (wwan, metered), which it may not use; it could bind "
                + "to wlan0 (wifi)",
            "why:          updater may not use wwan: its policy denies it (the kernel routes its traffic by wwan0; it may "
                + "use wlan0)",
            "permissions:  wifi=allow wwan=deny ethernet=allow other=allow metered=allow roaming=allow",
            "enforced:     no (mode-off)",
        ], human.stdout)
        let maps = try ctl(["--socket", f.socket, "query", "maps"])
        XCTAssertTrue(maps.lines.contains("permissions:  wifi=allow wwan=ask (no agent) ethernet=allow other=allow "
                                          + "metered=allow roaming=allow"), maps.stdout)
        XCTAssertFalse(maps.stdout.contains("wwan=deny"), maps.stdout)
        let apps = try ctl(["--socket", f.socket, "apps"])
        XCTAssertTrue(apps.lines.contains { $0.hasPrefix("maps ") && $0.contains(" ask (no agent) ") }, apps.stdout)
        XCTAssertEqual(try ctl(["--socket", f.socket, "decide", "maps", "wwan", "allow", "--once"]).status, 0)
        let decided = try ctl(["--socket", f.socket, "query", "maps"])
        XCTAssertTrue(decided.stdout.contains(" wwan=allow (once) "), decided.stdout)

        let terse = try ctl(["--socket", f.socket, "-t", "query", "updater"])
        for field in ["reason:routed-elsewhere", "egress-ipv4:wwan0", "egress-ipv4-blocked:", "egress-ipv4-usable:yes",
                      "egress-ipv4-allowed:no", "egress-ipv6:", "bind-to:wlan0", "bind-to-kind:wifi", "enforced:no",
                      "enforced-why:mode-off"] {
            XCTAssertTrue(terse.lines.contains(field), "\(field) in:\n\(terse.stdout)")
        }
    }
}

// MARK: - monitor

extension NetpermctlTests {
    /// Lines from a running netpermctl until one satisfies `stop` (bounded); returns them all.
    private func lines(_ c: EvPipedCommand, until what: String, timeout: Double = 5,
                       _ stop: (String) -> Bool) throws -> [String] {
        var seen: [String] = []
        let deadline = monotonicNow() + timeout
        while true {
            let remaining = deadline - monotonicNow()
            guard remaining > 0, let line = try? c.channel.readLine(timeout: remaining) else {
                throw HarnessError("\(c.channel.name): no line \(what) within \(timeout) s; seen:\n"
                    + seen.joined(separator: "\n") + "\nstderr: \(c.stderr)")
            }
            seen.append(line)
            if stop(line) { return seen }
        }
    }

    /// The text after "[SEQ] ", and SEQ.
    private static func unnumbered(_ line: String) -> (seq: Int, text: String)? {
        guard line.hasPrefix("["), let close = line.firstIndex(of: "]"),
              let seq = Int(line[line.index(after: line.startIndex)..<close]) else { return nil }
        return (seq, String(line[line.index(close, offsetBy: 2)...]))
    }

    /// Issue 36, point 21: `netpermctl monitor APP` for an app the policy does not have printed nothing, for ever. It
    /// says so and fails, in every output mode, as `query` does.
    func testMonitorOfAnUnknownAppSaysSo() throws {
        let f = try makeAppFixture(policy: Self.updaterPolicy, peersApart: true)
        for mode in [[], ["-t"], ["--json"]] {
            let r = try ctl(["--socket", f.socket] + mode + ["monitor", "nosuch"], timeout: 10)
            XCTAssertEqual(r.status, 1, "\(mode): \(r.summary)")
            XCTAssertEqual(r.stderr, "netpermctl: no [App nosuch] in the policy that you may follow (not-found)\n", "\(mode)")
        }
    }

    func testMonitorSaysWhatChanged() throws {
        let f = try makeAppFixture(policy: Self.updaterPolicy, peersApart: true)
        try f.addAddress("wlan0")
        try f.addAddress("wwan0")
        try f.addDefaultRoute("wlan0", metric: 100)
        try f.addDefaultRoute("wwan0", metric: 200)
        try waitForVerdict(f.socket, "updater", "ok via wlan0") { $0.reason == "ok" && $0.via == "wlan0/wifi/false" }
        let wlan0 = try XCTUnwrap(try links(f.socket)[name: "wlan0"])

        let human = try EvPipedCommand([netpermctl, "--socket", f.socket, "monitor", "updater"],
                                       stderrPath: "\(f.dir)/monitor.err", name: "monitor")
        addTeardownBlock { human.stop() }
        let terse = try EvPipedCommand([netpermctl, "--socket", f.socket, "-t", "monitor", "updater"],
                                       stderrPath: "\(f.dir)/monitor-t.err", name: "monitor -t")
        addTeardownBlock { terse.stop() }

        // The snapshot: the state every later line is told against.
        let snapshot = try lines(human, until: "ending the snapshot") { $0.hasPrefix("  policy:") }
        XCTAssertEqual(snapshot.first, "[1] snapshot:", snapshot.joined(separator: "\n"))
        for line in ["  wlan0 (wifi): metered no, metered by default, admin up, carrier on, operstate up, default route ipv4 metric 100, "
                        + "usable yes, addresses 10.1.0.1/24",
                     "  app updater: yes, via wlan0 (wifi)", "  policy: generation 1, 1 app"] {
            XCTAssertTrue(snapshot.contains(line), "'\(line)' in:\n" + snapshot.joined(separator: "\n"))
        }
        let terseSnapshot = try lines(terse, until: "ending the snapshot") { $0.hasPrefix("1:policy:") }
        XCTAssertEqual(terseSnapshot.last, "1:policy::policy-generation::1:policy-apps::1:policy-error::")
        let wlan0Line = "1:link:wlan0:index::\(wlan0.index):name::wlan0:kind::wifi:"
        XCTAssertTrue(terseSnapshot.contains { $0.hasPrefix(wlan0Line) },
                      terseSnapshot.joined(separator: "\n"))
        XCTAssertTrue(terseSnapshot.contains { $0.hasPrefix("1:app:updater:available::yes:reason::ok:via::wlan0:") },
                      terseSnapshot.joined(separator: "\n"))

        // wlan0 loses its carrier: the link says what changed, and the app what that did to it.
        try f.setPeer(of: "wlan0", up: false)
        let appLine = "app updater: yes, via wlan0 (wifi) -> no: denied on wwan"
        let afterCarrier = try lines(human, until: "for the updater") { $0.hasSuffix(appLine) }
        let linkLines = afterCarrier.compactMap(Self.unnumbered).map(\.text).filter { $0.hasPrefix("wlan0 (wifi): ") }
        XCTAssertTrue(linkLines.contains {
            $0.hasPrefix("wlan0 (wifi): carrier on -> off") && $0.hasSuffix(", usable yes -> no") },
                      afterCarrier.joined(separator: "\n"))
        let terseCarrier = try lines(terse, until: "for the updater") { $0.contains(":app:updater:") }
        XCTAssertTrue(terseCarrier.contains { $0.contains(":link:wlan0:") && $0.contains(":carrier:yes:no:")
            && $0.contains(":state:routable:no-carrier:") && $0.contains(":usable:yes:no:") },
                      terseCarrier.joined(separator: "\n"))
        XCTAssertEqual(terseCarrier.last.flatMap { $0.split(separator: ":", maxSplits: 1).last.map(String.init) },
                       "app:updater:available:yes:no:reason:ok:denied:via:wlan0::via-kind:wifi::via-metered:no:",
                       "only what changed: wwan was a denied kind already")

        // A link that comes and goes (a veth pair: two links, both admin down).
        try f.ns.ip("link", "add", "extra0", "type", "veth", "peer", "name", "extra0p")
        let added = try lines(human, until: "adding extra0") { $0.contains("link added: extra0 (") }
        XCTAssertEqual(added.last.flatMap(Self.unnumbered)?.text, "link added: extra0 (other): metered no, metered by default, admin down, "
            + "carrier off, operstate down, default route none, usable no, no addresses")
        XCTAssertTrue(try lines(terse, until: "adding extra0") { $0.contains(":link-added:extra0:") }.last?
            .contains(":name::extra0:kind::other:") == true)
        try f.ns.ip("link", "del", "extra0")
        let removed = try lines(human, until: "removing extra0") { $0.contains("link removed: extra0 (") }
        XCTAssertEqual(removed.last.flatMap(Self.unnumbered)?.text, "link removed: extra0 (other)")
        let terseRemoved = try lines(terse, until: "removing extra0") { $0.hasSuffix(":link-removed:extra0") }
        XCTAssertEqual(terseRemoved.last?.split(separator: ":").dropFirst().joined(separator: ":"),
                       "link-removed:extra0")

        // The policy: reloaded, broken, fixed.
        XCTAssertEqual(try ctl(["--socket", f.socket, "reload"]).status, 0)
        let reloaded = try lines(human, until: "the reload") { $0.contains("policy") }
        XCTAssertEqual(reloaded.last.flatMap(Self.unnumbered)?.text, "policy: generation 1 -> 2, 1 app")
        XCTAssertEqual(try lines(terse, until: "the reload") { $0.contains(":policy:") }.last?
            .split(separator: ":", maxSplits: 1).last, "policy::policy-generation:1:2")

        _ = try writeConfig(IntegrationTestCase.standardConfig + "\n[App updater]\nWWAN=sometimes\n", in: f.dir)
        let failed = try lines(human, until: "the failed reload") { $0.contains("policy") }
        let error = try XCTUnwrap(try policyStatus(f.socket).error)
        XCTAssertEqual(failed.last.flatMap(Self.unnumbered)?.text,
                       "policy reload failed (still generation 2): \(error)")
        XCTAssertEqual(try lines(terse, until: "the failed reload") { $0.contains(":policy:") }.last?
            .split(separator: ":", maxSplits: 1).last.map(String.init),
                       "policy::policy-error::" + error.replacingOccurrences(of: ":", with: "\\:"))

        _ = try writeConfig(IntegrationTestCase.standardConfig + "\n" + Self.updaterPolicy, in: f.dir)
        let fixed = try lines(human, until: "the good edit") { $0.contains("policy") }
        XCTAssertEqual(fixed.last.flatMap(Self.unnumbered)?.text, "policy: generation 2 -> 3, 1 app, error cleared")
        XCTAssertEqual(try lines(terse, until: "the good edit") { $0.contains(":policy:") }.last?
            .split(separator: ":", maxSplits: 1).last.map(String.init),
                       "policy::policy-generation:2:3:policy-error:"
                        + error.replacingOccurrences(of: ":", with: "\\:") + ":")
        XCTAssertEqual(human.stderr, "")
        XCTAssertEqual(terse.stderr, "")
    }
}
