// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol
import XCTest

/// The privacy report in the engine (docs/PRIVACY.md): the counting table's rules for it, tags turned into apps,
/// per-person opt-in, who reads and clears what through REPORT, RESET-REPORT and KEEP-REPORT, metrics per app only,
/// saving, and off deleting the file.
final class EngineReportTests: XCTestCase {
    final class Wall: @unchecked Sendable {
        var now: Double = 1_796_083_200   // 2026-12-01 00:00 UTC
    }

    static let policy = """
        [Usage]
        Count=yes
        [Report]
        Enabled=yes
        [Defaults]
        WWAN=allow
        [App maps]
        User=1000
        [App web]
        User=1001
        [App sync]
        Unit=sync.service
        """

    let wall = Wall()
    let wwan = ReportLink(kind: .wwan, metered: true)
    let alice = makePeer(uid: 1000, exe: "/usr/bin/maps")
    let bob = makePeer(uid: 1001, exe: "/usr/bin/web")

    func harness(_ policy: String = EngineReportTests.policy, fileExists: Bool = false,
                 kept: ReportBook = ReportBook()) -> EngineHarness {
        let wall = self.wall
        return EngineHarness(policy: policy, links: [Links.lo, Links.wlan, Links.wwan],
                             settings: Engine.Settings(daemonUID: 0, logLevel: .debug, wallClock: { wall.now }),
                             report: kept, reportFileExists: fileExists)
    }

    func tag(_ h: EngineHarness, _ app: String) -> UInt32 { h.engine.usage.tagged.tags[app]! }

    func sight(_ h: EngineHarness, _ app: String, _ address: String, link: ReportLink? = nil, port: UInt16 = 443) {
        h.feed(.reportSighted([.opened(tag: tag(h, app), address: address, port: port, proto: 6, link: link ?? wwan)], lost: 0))
    }

    func destinations(_ reply: JSON) -> [String] {
        (reply["apps"]?.arrayValue ?? []).flatMap { a in
            (a["destinations"]?.arrayValue ?? []).map { "\(a["app"]!.stringValue!) \($0["host"]!.stringValue!)" }
        }
    }

    func testTheCountingTableCarriesTheReportsRulesOnlyWhileOn() throws {
        let h = harness()
        let script = try XCTUnwrap(h.usageScripts.last)
        XCTAssertTrue(script.contains("add rule inet netpermd_usage sent_wwan_metered ct state new ct mark and 0xff800000 "
                                      + "== 0x6e800000 ct label set 121 ct label set 125 ct label set 127"), script)
        XCTAssertTrue(script.contains("add rule inet netpermd_usage prerouting udp sport 53 meta mark 0 ct mark and "
                                      + "0xff800000 == 0x6e800000 meta mark set ct mark log prefix \"netpermd:dns\" "
                                      + "group 28273 snaplen 1500 meta mark set 0"), script)
        XCTAssertEqual(h.reportEffects, ["watch-report true"])
        sight(h, "sync", "192.0.2.1")
        wall.now += 60
        h.advance(bySeconds: 60)
        XCTAssertEqual(h.reportEffects.count, 2)
        h.reload(policy: Self.policy.replacingOccurrences(of: "Enabled=yes", with: "Enabled=no"))
        let off = try XCTUnwrap(h.usageScripts.last)
        XCTAssertTrue(off.contains("flush chain inet netpermd_usage prerouting"), off)
        XCTAssertFalse(off.contains("ct label set") || off.contains("netpermd:dns"), off)
        XCTAssertEqual(Array(h.reportEffects.dropFirst(2)), ["remove-report", "watch-report false"], "off deletes the file")
    }

    /// Off at start with a file left by an earlier run: the file goes.
    func testOffDeletesAFileLeftBehind() throws {
        let file = "version 1\nperson 1000\nentry 20788 sync - wwan m a.example 192.0.2.1 443 6 1 2 3 0 0 0 0\n"
        let left = harness(Self.policy.replacingOccurrences(of: "Enabled=yes", with: ""), fileExists: true,
                           kept: try ReportBook.parse(file, path: "report"))
        XCTAssertEqual(left.reportEffects, ["remove-report"])
        XCTAssertEqual(destinations(left.request(left.connect(), "REPORT")), [], "what the file held is forgotten too")
        // On with the file kept: what it held is read back.
        let back = harness(fileExists: true, kept: try ReportBook.parse(file, path: "report"))
        XCTAssertEqual(destinations(back.request(back.connect(), "REPORT")), ["sync a.example"])
        let off = harness(Self.policy.replacingOccurrences(of: "Enabled=yes", with: ""))
        XCTAssertEqual(off.reportEffects, [])
        // Nothing is kept while it is off, a person's choice neither.
        let a = off.connect(alice)
        XCTAssertEqual(off.request(a, "KEEP-REPORT yes")["yours"], false)
        XCTAssertEqual(off.request(a, "REPORT")["enabled"], false)
        XCTAssertEqual(off.reportEffects, [])
    }

    /// Each person reads only their own apps, once they turned it on; root reads all; names come from the app's own
    /// answers; METRICS carries apps, never destinations.
    func testWhoReadsWhat() {
        let h = harness()
        let root = h.connect(), a = h.connect(alice), b = h.connect(bob)
        h.feed(.reportSighted([.answer(tag: tag(h, "sync"), DNSAnswer(name: "backup.example", addresses: ["192.0.2.5"]))],
                              lost: 0))
        sight(h, "sync", "192.0.2.5")
        sight(h, "maps", "192.0.2.6")
        XCTAssertEqual(destinations(h.request(root, "REPORT")), ["sync backup.example"], "a person's app waits for them")
        XCTAssertEqual(h.request(a, "KEEP-REPORT yes")["yours"], true)
        XCTAssertEqual(h.request(b, "KEEP-REPORT yes")["yours"], true)
        // Bob's app receives an answer naming the address Alice's app reaches: hers stays an address.
        h.feed(.reportSighted([.answer(tag: tag(h, "web"), DNSAnswer(name: "evil.example", addresses: ["192.0.2.6"]))],
                              lost: 0))
        sight(h, "maps", "192.0.2.6")
        sight(h, "web", "192.0.2.6", link: ReportLink(kind: .wifi))
        XCTAssertEqual(destinations(h.request(root, "REPORT")),
                       ["maps 192.0.2.6", "sync backup.example", "web evil.example"])
        XCTAssertEqual(destinations(h.request(a, "REPORT")), ["maps 192.0.2.6"])
        XCTAssertEqual(destinations(h.request(b, "REPORT")), ["web evil.example"])
        XCTAssertEqual(h.requestError(b, "REPORT maps", .notFound).prefix(29), "no [App maps] whose report yo")
        XCTAssertEqual(h.requestError(b, "REPORT sync", .notFound).prefix(29), "no [App sync] whose report yo")
        XCTAssertEqual(h.requestError(b, "RESET-REPORT maps", .notFound).prefix(13), "no [App maps]")
        let entry = h.request(a, "REPORT maps")["apps"]?.arrayValue?.first?["destinations"]?.arrayValue?.first
        XCTAssertEqual(entry?["connections"], 1)
        XCTAssertEqual(entry?["kind"], "wwan")
        XCTAssertEqual(entry?["metered"], true)
        XCTAssertEqual(entry?["named"], false)
        let metrics = h.request(root, "METRICS")["metrics"]?.stringValue ?? ""
        XCTAssertTrue(metrics.contains("netpermd_report_connections_total{app=\"sync\"} 1"), metrics)
        for secret in ["backup.example", "evil.example", "192.0.2."] { XCTAssertFalse(metrics.contains(secret), secret) }
        // Alice clears hers; Bob's stay.
        XCTAssertEqual(h.request(a, "RESET-REPORT")["ok"], true)
        XCTAssertEqual(destinations(h.request(root, "REPORT")), ["sync backup.example", "web evil.example"])
        XCTAssertTrue(h.reportEffects.last?.hasPrefix("save-report") == true, "a clearing is written at once")
        XCTAssertFalse(h.reportEffects.last!.contains("maps"), h.reportEffects.last!)
        // Bob turns his off: his go too, and his app is no longer recorded.
        h.request(b, "KEEP-REPORT no")
        sight(h, "web", "192.0.2.7")
        XCTAssertEqual(destinations(h.request(root, "REPORT")), ["sync backup.example"])
    }

    func testRefusedWhileAskingAndSavedAfterAMinute() throws {
        let h = harness(Self.policy.replacingOccurrences(of: "WWAN=allow", with: "WWAN=ask"))
        let root = h.connect()
        h.feed(.blocked(app: "sync", kind: .wwan, uid: 0, ifindex: Links.wwan.index, destination: "[2001:db8::9]:8443"))
        let d = h.request(root, "REPORT")["apps"]?.arrayValue?.first?["destinations"]?.arrayValue?.first
        XCTAssertEqual(d?["host"], "2001:db8::9")
        XCTAssertEqual(d?["port"], 8443)
        XCTAssertEqual(d?["connections"], 0)
        XCTAssertEqual(d?["refused"]?["ask"], 1)
        XCTAssertFalse(h.reportEffects.contains { $0.hasPrefix("save-report") })
        wall.now += 60
        h.advance(bySeconds: 60)
        let saved = try XCTUnwrap(h.reportEffects.last)
        XCTAssertTrue(saved.contains("entry 20788 sync - wwan m 2001:db8::9 2001:db8::9 8443 0 "), saved)
    }

    /// What the rules logged as refused (ReportRefusals) is recorded with its reason, under the name the app resolved;
    /// an untagged mark, another prefix, a link the engine does not know: nothing.
    func testRefusalsTheRulesLoggedAreRecordedWithTheirReason() throws {
        let h = harness()
        let root = h.connect()
        for p in [alice, bob] { XCTAssertEqual(h.request(h.connect(p), "KEEP-REPORT yes")["yours"], true) }
        // An IPv4 TCP SYN to 192.0.2.9:443 and an IPv6 UDP datagram to [2001:db8::7]:53, as NFLOG copies them.
        var v4 = [UInt8](repeating: 0, count: 40)
        v4[0] = 0x45; v4[9] = 6; v4[16...19] = [192, 0, 2, 9]; v4[22] = 1; v4[23] = 187
        var v6 = [UInt8](repeating: 0, count: 48)
        v6[0] = 0x60; v6[6] = 17; v6[24] = 0x20; v6[25] = 0x01; v6[26] = 0x0d; v6[27] = 0xb8; v6[39] = 7; v6[43] = 53
        let maps = tag(h, "maps"), web = tag(h, "web")
        func logged(_ prefix: String, _ mark: UInt32?, _ p: [UInt8], _ index: Int32? = Links.wwan.index) -> ReportSighting? {
            ReportRefusals.sighting(prefix: prefix, mark: mark, outIndex: index, payload: p)
        }
        XCTAssertEqual(logged("netpermd:refused:denied", maps, v4),
                       .refused(tag: maps, address: "192.0.2.9", port: 443, proto: 6, ifindex: Links.wwan.index, reason: .denied))
        XCTAssertEqual(logged("netpermd:refused:budget", web, v6),
                       .refused(tag: web, address: "2001:db8::7", port: 53, proto: 17, ifindex: Links.wwan.index, reason: .budget))
        XCTAssertNil(logged("netpermd:refused:denied", 0x1234, v4), "not a tag")
        XCTAssertNil(logged("netpermd:refused:later", maps, v4), "no such reason")
        XCTAssertNil(logged("netpermd:refused:denied", maps, Array(v4.prefix(12))), "too short")
        h.feed(.reportSighted([.answer(tag: maps, DNSAnswer(name: "tiles.example", addresses: ["192.0.2.9"]))], lost: 0))
        h.feed(.reportSighted([logged("netpermd:refused:denied", maps, v4)!, logged("netpermd:refused:denied", maps, v4)!,
                               logged("netpermd:refused:budget", web, v6)!,
                               logged("netpermd:refused:budget", web, v6, 999)!], lost: 0))
        let r = h.request(root, "REPORT")
        XCTAssertEqual(destinations(r), ["maps tiles.example", "web 2001:db8::7"], "\(r)")
        let ds = (r["apps"]?.arrayValue ?? []).flatMap { $0["destinations"]?.arrayValue ?? [] }
        XCTAssertEqual(ds.map { $0["refused"]!["denied"]!.intValue! }, [2, 0])
        XCTAssertEqual(ds.map { $0["refused"]!["budget"]!.intValue! }, [0, 1], "the unknown link's is not recorded")
        XCTAssertEqual(ds.map { $0["connections"]!.intValue! }, [0, 0])
        XCTAssertEqual(ds.map { $0["protocol"]!.stringValue! }, ["tcp", "udp"])
        XCTAssertEqual(ds.map { $0["kind"]!.stringValue! }, ["wwan", "wwan"])
        XCTAssertEqual(ds.map { $0["refused"]!["first"]!.intValue! }, [1_796_083_200, 1_796_083_200])
        XCTAssertEqual(ds.map { $0["refused"]!["last"]!.intValue! }, [1_796_083_200, 1_796_083_200])
    }

    /// A user's own unit's refusals (ReportRefusals: logged with its cgroup's mark from both tables' `report_units`)
    /// are its app's for its uid, as its connections are, denied and over budget alike, and waiting for an answer
    /// by its socket's uid; its uid's app gets none of them. A mark no unit has, or two have, is nobody's.
    func testAUsersUnitsRefusalsAreItsAppsForItsUid() throws {
        let h = harness(Self.policy + "\n[Enforcement]\nMode=block\n")
        let home = "user.slice/user-1000.slice/user@1000.service/app.slice/"
        let other = "user.slice/user-1001.slice/user@1001.service/app.slice/"
        let hers: UInt64 = 0x3_0000_2A05, his: UInt64 = 0x3_0000_2A06
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: [
            UnitCgroup(path: home + "app-gnome-org.gnome.Maps-1.scope", level: 5, unit: "app-gnome-org.gnome.Maps-1.scope",
                       id: hers, user: true),
            UnitCgroup(path: other + "app-gnome-org.gnome.Maps-2.scope", level: 5, unit: "app-gnome-org.gnome.Maps-2.scope",
                       id: his, user: true),
        ])))
        let elements = "{ \"\(home)app-gnome-org.gnome.Maps-1.scope\" : 0x00002a05, "
            + "\"\(other)app-gnome-org.gnome.Maps-2.scope\" : 0x00002a06 }"
        XCTAssertTrue(h.usageScripts.joined().contains("add element inet netpermd_usage report_units " + elements),
                      h.usageScripts.joined())
        XCTAssertTrue(h.scripts.joined().contains("add element inet netpermd report_units " + elements), h.scripts.joined())
        for p in [alice, bob] { XCTAssertEqual(h.request(h.connect(p), "KEEP-REPORT yes")["yours"], true) }
        var v4 = [UInt8](repeating: 0, count: 40)
        v4[0] = 0x45; v4[9] = 6; v4[16...19] = [192, 0, 2, 9]; v4[22] = 1; v4[23] = 187
        var v6 = [UInt8](repeating: 0, count: 48)
        v6[0] = 0x60; v6[6] = 17; v6[24] = 0x20; v6[25] = 0x01; v6[26] = 0x0d; v6[27] = 0xb8; v6[39] = 7; v6[43] = 53
        func logged(_ prefix: String, _ mark: UInt32, _ p: [UInt8]) -> ReportSighting {
            ReportRefusals.sighting(prefix: prefix, mark: mark, outIndex: Links.wwan.index, payload: p)!
        }
        XCTAssertEqual(logged("netpermd:refused:denied:unit", 0x2A05, v4),
                       .refused(tag: 0, address: "192.0.2.9", port: 443, proto: 6, ifindex: Links.wwan.index, reason: .denied,
                                unit: 0x2A05))
        h.feed(.reportSighted([logged("netpermd:refused:denied:unit", 0x2A05, v4),
                               logged("netpermd:refused:budget:unit", 0x2A05, v6),
                               logged("netpermd:refused:denied:unit", 0x2A06, v6),
                               logged("netpermd:refused:denied:unit", 0x2A07, v4)], lost: 0))
        h.feed(.blocked(app: "org.gnome.Maps", kind: .wwan, uid: 1001, ifindex: Links.wwan.index,
                        destination: "192.0.2.10:443"))
        func rows(_ r: JSON) -> [String] {
            (r["apps"]?.arrayValue ?? []).flatMap { a in
                (a["destinations"]?.arrayValue ?? []).map { d in
                    let refused = ["denied", "ask", "budget"].map { "\(d["refused"]?[$0]?.intValue ?? 0)" }.joined(separator: "/")
                    return "\(a["app"]!.stringValue!) \(a["uid"]?.intValue ?? -1) \(d["host"]!.stringValue!) \(refused)"
                }
            }.sorted()
        }
        XCTAssertEqual(rows(h.request(h.connect(), "REPORT")), [
            "org.gnome.Maps 1000 192.0.2.9 1/0/0", "org.gnome.Maps 1000 2001:db8::7 0/0/1",
            "org.gnome.Maps 1001 192.0.2.10 0/1/0", "org.gnome.Maps 1001 2001:db8::7 1/0/0",
        ], "each unit's for its own uid; nothing its uid's app's, nothing of the mark no unit has")
        XCTAssertEqual(ReportUnits.unit(mark: 0x2A05, among: [hers, his]), hers)
        XCTAssertNil(ReportUnits.unit(mark: 0x2A05, among: [hers, 0x4_0000_2A05]), "two units: nobody's")
        XCTAssertNil(ReportUnits.unit(mark: 0x2A07, among: [hers, his]))
    }

    /// The budget's refusals are logged by the counting table only while the report is on.
    func testTheBudgetsRefusalsAreLoggedOnlyWhileOn() throws {
        let budget = Self.policy.replacingOccurrences(of: "User=1000", with: "User=1000\nMeteredBudget=1M")
        let h = harness(budget)
        let script = try XCTUnwrap(h.usageScripts.last)
        XCTAssertTrue(script.contains("add set inet netpermd_usage report_refused { type mark; size 65535; "
                                      + "flags dynamic,timeout; timeout 1m; }"), script)
        XCTAssertTrue(script.contains("add limit inet netpermd_usage report_total { rate 200/second burst 100 packets; }"),
                      script)
        XCTAssertTrue(script.contains("add rule inet netpermd_usage over_out jump refused_log"), script)
        XCTAssertTrue(script.contains("add rule inet netpermd_usage refused_log meta mark set socket cgroupv2 level 6 map "
                                      + "@report_units goto refused_unit"), script)
        XCTAssertTrue(script.contains("add rule inet netpermd_usage refused_log ct mark and 0xff800000 == 0x6e800000 meta mark "
                                      + "set ct mark update @report_refused { ct mark limit rate 10/second burst 20 packets } "
                                      + "limit name \"report_total\" log prefix \"netpermd:refused:budget\" "
                                      + "group 28273 snaplen 64"), script)
        XCTAssertTrue(script.contains("add rule inet netpermd_usage refused_unit update @report_refused { meta mark limit rate "
                                      + "10/second burst 20 packets } limit name \"report_total\" log prefix "
                                      + "\"netpermd:refused:budget:unit\" group 28273 snaplen 64"), script)
        h.reload(policy: budget.replacingOccurrences(of: "Enabled=yes", with: "Enabled=no"))
        let off = try XCTUnwrap(h.usageScripts.last)
        XCTAssertTrue(off.contains("flush chain inet netpermd_usage over_out"), off)
        XCTAssertTrue(off.contains("flush chain inet netpermd_usage refused_log"), off)
        XCTAssertFalse(off.contains("netpermd:refused"), off)
    }
}
