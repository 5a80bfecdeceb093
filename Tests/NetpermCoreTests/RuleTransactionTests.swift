// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import XCTest

/// `RuleTransaction`: one list of commands, two spellings: nft's text (what libnftables runs and the golden tests
/// compare) and the element changes the edge sends as nf_tables messages, when every command is an element's or a
/// chain's deletion; anything else (a chain's rules, a new chain, a whole table) is left to libnftables.
final class RuleTransactionTests: XCTestCase {
    private let t = "inet netpermd"

    func testElementsAndChainDeletionsHaveBothSpellings() throws {
        let ask = Ruleset.AskChain.ID(tag: 0x6EC5_564F, kind: .wwan)
        let tx = RuleTransaction([
            .flushMap("links"),
            .addElements(map: "links", [.init(key: .ifname("wwan0"), verdict: .chain("kind_wwan")),
                                        .init(key: .ifname("wl-an.1"), verdict: .chain("metered_wifi"))]),
            .deleteElements(map: "uid_wwan", [.uid(1000), .uid(1001)]),
            .deleteElements(map: "unit2_metered", [.cgroup("unified/system.slice/cron.service", 7)]),
            .addElements(map: "uid_wwan", [.init(key: .uid(1000), verdict: .deny), .init(key: .uid(1001), verdict: .ask(ask)),
                                           .init(key: .uid(7), verdict: .accept)]),
            .addElements(map: "unit3_wifi", [.init(key: .cgroup("../../../proc/self/fd/12", 8), verdict: .pass)]),
            .addElements(map: "tag_uid", [.init(key: .uid(1000), verdict: .mark(0x6EC5_564F))]),
            .deleteElements(map: "conn_wwan", [.tag(0x6EB6_11AF)]),
            .deleteChain("ask_6eb611af_wwan"),
        ])
        XCTAssertEqual(tx.text, """
            flush map \(t) links
            add element \(t) links { "wwan0" : goto kind_wwan, "wl-an.1" : goto metered_wifi }
            delete element \(t) uid_wwan { 1000, 1001 }
            delete element \(t) unit2_metered { "unified/system.slice/cron.service" }
            add element \(t) uid_wwan { 1000 : goto deny, 1001 : goto ask_6ec5564f_wwan, 7 : accept }
            add element \(t) unit3_wifi { "../../../proc/self/fd/12" : return }
            add element \(t) tag_uid { 1000 : 0x6ec5564f }
            delete element \(t) conn_wwan { 0x6eb611af }
            delete chain \(t) ask_6eb611af_wwan

            """)
        XCTAssertEqual(tx.elements?.commands, [
            .flush(map: "links"),
            .add(map: "links", elements: [.init(key: .ifname("wwan0"), value: .goto("kind_wwan")),
                                          .init(key: .ifname("wl-an.1"), value: .goto("metered_wifi"))]),
            .delete(map: "uid_wwan", keys: [.number(1000), .number(1001)]),
            .delete(map: "unit2_metered", keys: [.cgroup("unified/system.slice/cron.service")]),
            .add(map: "uid_wwan", elements: [.init(key: .number(1000), value: .goto("deny")),
                                             .init(key: .number(1001), value: .goto("ask_6ec5564f_wwan")),
                                             .init(key: .number(7), value: .accept)]),
            .add(map: "unit3_wifi", elements: [.init(key: .cgroup("../../../proc/self/fd/12"), value: .pass)]),
            .add(map: "tag_uid", elements: [.init(key: .number(1000), value: .mark(0x6EC5_564F))]),
            .delete(map: "conn_wwan", keys: [.number(0x6EB6_11AF)]),
            .deleteChain("ask_6eb611af_wwan"),
        ])
    }

    func testChainRulesAndWholeTablesAreLeftToLibnftables() {
        for commands: [RuleCommand] in [
            [.addChain("ask_6ec5564f_wwan")],
            [.flushChain("owned_wifi")],
            [.addRule(chain: "ask_6ec5564f_wwan", "goto deny")],
            [.deleteElements(map: "uid_wwan", [.uid(1000)]), .addRule(chain: "x", "goto deny")],
        ] {
            let tx = RuleTransaction(commands)
            XCTAssertNil(tx.elements, tx.text)
        }
        XCTAssertNil(RuleTransaction([]).elements)
        XCTAssertNil(RuleTransaction(whole: "delete table \(t)\n").elements)
    }

    /// Every transaction of a real update either goes as element changes, one command a line of its text, or holds
    /// chain rules (the first and the lookups') and is left to libnftables.
    func testAnUpdatesTransactionsAsElements() throws {
        let cgroups = UnitCgroups(nftRoot: "unified", units: [
            UnitCgroup(path: "system.slice/cron.service", level: 2, unit: "cron.service"),
        ])
        func build(_ policy: String) throws -> Ruleset {
            let config = try parsePolicy(policy)
            return Ruleset.build(apps: config.apps, permissions: { config.permissions(for: $0) },
                                 links: [Links.lo, Links.eth, Links.wwan], cgroups: cgroups)
        }
        let old = try build("[App phone]\nUser=1000\nWWAN=ask\n[App cron]\nUnit=cron.service\nEthernet=deny\n"
            + "[App other]\nUser=2000\nWiFi=deny\n")
        let new = try build("[App phone]\nUser=1000\nWWAN=deny\n[App cron]\nUnit=cron.service\nEthernet=allow\n"
            + "[App other]\nUser=2000\nWiFi=deny\n")
        let u = try XCTUnwrap(new.update(from: old))
        XCTAssertEqual(u.transactions.count, 3, "\(u.transactions)")
        for i in 0..<2 {
            let change = try XCTUnwrap(u.changes[i].elements, u.transactions[i])
            XCTAssertEqual(change.commands.count, u.transactions[i].split(separator: "\n").count)
        }
        XCTAssertEqual(u.changes[2].elements?.commands, [.deleteChain(old.askChains[0].name)])
        let links = new.withLinks([Links.lo, Links.eth]).update(from: new)
        XCTAssertEqual(try XCTUnwrap(links?.changes.first).elements?.commands.first, .flush(map: "links"))
    }
}
