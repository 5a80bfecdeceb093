// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import XCTest

/// `ElementChanges.parse`: what `Ruleset.update(from:)` writes for elements and chains that go is read back
/// command for command; anything else (a chain's rules, a new chain, another table, text it never writes) is left
/// to libnftables.
final class ElementChangesTests: XCTestCase {
    private let t = "inet netpermd"

    func testElementsAndChainDeletionsAreReadBack() throws {
        let c = try XCTUnwrap(ElementChanges.parse("""
            flush map \(t) links
            add element \(t) links { "wwan0" : goto kind_wwan, "wl-an.1" : goto metered_wifi }
            delete element \(t) uid_wwan { 1000, 1001 }
            delete element \(t) unit2_metered { "unified/system.slice/cron.service" }
            add element \(t) uid_wwan { 1000 : goto deny, 1001 : goto ask_6ec5564f_wwan, 7 : accept }
            add element \(t) unit3_wifi { "../../../proc/self/fd/12" : return }
            add element \(t) tag_uid { 1000 : 0x6ec5564f }
            delete element \(t) conn_wwan { 0x6eb611af }
            delete chain \(t) ask_6eb611af_wwan

            """))
        XCTAssertEqual(c.commands, [
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

    func testAnythingElseIsLeftToLibnftables() {
        for script in [
            "", "\n",
            "add chain \(t) ask_6ec5564f_wwan\n",
            "flush chain \(t) owned_wifi\n",
            "add rule \(t) ask_6ec5564f_wwan goto deny\n",
            "delete element \(t) uid_wwan { 1000 }\nadd rule \(t) x goto deny\n",
            "add element inet other uid_wwan { 1000 : accept }\n",
            "add element \(t) uid_wwan { 1000 : drop }\n",
            "add element \(t) uid_wwan { 1000 : goto a b }\n",
            "add element \(t) uid_wwan { 1000 }\n",
            "add element \(t) uid_wwan { }\n",
            "delete element \(t) uid_wwan { 1000, }\n",
            "delete element \(t) uid_wwan { x1000 }\n",
            "delete element \(t) uid_wwan { 99999999999 }\n",
            "delete element \(t) uid wwan { 1000 }\n",
            "delete table \(t)\n",
        ] {
            XCTAssertNil(ElementChanges.parse(script), script)
        }
    }

    /// Every transaction of a real update either reads back into as many commands as it has lines, or holds chain
    /// rules (the first and the lookups') and is left to libnftables.
    func testAnUpdatesTransactionsReadBack() throws {
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
        XCTAssertEqual(u.transactions.count, 2, "\(u.transactions)")
        let change = try XCTUnwrap(ElementChanges.parse(u.transactions[0]), u.transactions[0])
        XCTAssertEqual(change.commands.count, u.transactions[0].split(separator: "\n").count)
        XCTAssertEqual(ElementChanges.parse(u.transactions[1])?.commands, [.deleteChain(old.askChains[0].name)])
        let links = new.withLinks([Links.lo, Links.eth]).update(from: new)
        XCTAssertEqual(ElementChanges.parse(try XCTUnwrap(links?.transactions.first))?.commands.first, .flush(map: "links"))
    }
}
