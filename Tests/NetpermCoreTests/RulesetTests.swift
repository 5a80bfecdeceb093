// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import XCTest

/// The nft ruleset built from a policy, links and unit cgroups: the exact text for a small case, who owns what,
/// and that 10,000 apps are map elements, not rules.
final class RulesetTests: XCTestCase {
    private let cgroups = UnitCgroups(nftRoot: "unified", units: [
        UnitCgroup(path: "system.slice/cron.service", level: 2, unit: "cron.service"),
        UnitCgroup(path: "system.slice/system-getty.slice/getty@tty1.service", level: 3, unit: "getty@tty1.service"),
    ])

    private func build(_ policy: String, links: [Link] = [Links.lo, Links.eth, Links.wwan],
                       cgroups: UnitCgroups? = nil) throws -> Ruleset {
        let config = try parsePolicy(policy)
        return Ruleset.build(apps: config.apps, permissions: { config.permissions(for: $0) }, links: links,
                             cgroups: cgroups ?? self.cgroups)
    }

    /// A cgroup the daemon holds a descriptor of is named to nft through it, whatever its path: nft resolves
    /// "/sys/fs/cgroup/" + the path given, and libnftables runs in the daemon.
    func testAHeldCgroupIsNamedThroughItsDescriptor() throws {
        let held = UnitCgroups(nftRoot: "unified", units: [
            UnitCgroup(path: "system.slice/cron.service", level: 2, unit: "cron.service", id: 7, handle: 1041),
            UnitCgroup(path: "a.slice/a-b.slice/a-b-c.slice/deep.service", level: 4, unit: "deep.service", id: 8),
        ])
        let r = try build("[App cron]\nUnit=cron.service\nWWAN=deny\n[App deep]\nUnit=deep.service\nWWAN=deny\n",
                          cgroups: held)
        XCTAssertTrue(r.text.contains(#""../../../proc/self/fd/1041" : goto deny"#), r.text)
        XCTAssertFalse(r.text.contains("system.slice/cron.service"), "never by its path")
        XCTAssertEqual(r.handles, [1041], "the descriptors travel beside the text")
        XCTAssertEqual(Self.handles(namedIn: r.text), r.handles, "and are those the text names")
        // A system unit at level 4 (a slice in a slice in a slice) has its map and its lookup.
        XCTAssertTrue(r.text.contains(#"map unit4_wwan {"# + "\n\t\ttype cgroupsv2 : verdict\n"
            + "\t\telements = { " + #""unified/a.slice/a-b.slice/a-b-c.slice/deep.service" : goto deny }"#), r.text)
        XCTAssertTrue(r.text.contains("socket cgroupv2 level 4 vmap @unit4_wwan"), r.text)
        XCTAssertEqual(r.notEnforced, [:])
    }

    /// The descriptors a script names (`../../../proc/self/fd/N`), read from its text: the test's own reading,
    /// against which `Ruleset.handles` is checked.
    static func handles(namedIn script: String) -> Set<Int32> {
        var found: Set<Int32> = []
        var rest = Substring(script)
        while let r = rest.firstRange(of: "../../../proc/self/fd/") {
            rest = rest[r.upperBound...]
            let digits = rest.prefix { $0.isASCII && $0.isNumber }
            if let n = Int32(digits) { found.insert(n) }
        }
        return found
    }

    func testTheTestsReadingOfDescriptors() {
        XCTAssertEqual(Self.handles(namedIn: ""), [])
        XCTAssertEqual(Self.handles(namedIn: #"{ "../../../proc/self/fd/3" : accept, "../../../proc/self/fd/12" : "#
            + #"goto deny }\#ndelete element x { "../../../proc/self/fd/3", "unified/a.slice/b.service" }"#
            + #" "../../../proc/self/fd/""#), [3, 12])
    }

    /// The uid of the user manager a path lies under: its first `user@UID.service` component, whatever the
    /// components around it (names of thousands of bytes, not text, slashes doubled).
    func testTheUserAUnitBelongsTo() {
        let long = String(repeating: "x", count: 3000)
        let cases: [(String, UInt32?)] = [
            ("user.slice/user-1000.slice/user@1000.service/app.slice/app-x-1.scope", 1000),
            ("user.slice/user-7.slice/user@7.service/app.slice/app-\(long).scope", 7),
            ("/user.slice//user@4294967295.service/", 4294967295), ("user@0.service", 0),
            ("user.slice/user-1.slice/user@1.service/app.slice/user@2.service", 1),
            ("system.slice/cron.service", nil), ("user@.service", nil), ("user@x.service/user@3.service", nil),
            ("user@4294967296.service", nil), ("a.slice/\u{FFFD}user@5.service", nil), ("", nil), ("/", nil),
            ("user@5.servicex/user@6.service", 6),
        ]
        for (path, uid) in cases { XCTAssertEqual(Ruleset.UnitOwner.userUID(path: path), uid, path) }
    }

    /// Which cgroups the rules follow: a system unit with only slices above it, levels 2 to 6; a user's unit
    /// below its manager with only slices between, levels 4 to 6; nothing deeper or inside another unit.
    func testWhichUnitsAreFollowed() {
        for path in ["/system.slice/cron.service", "/system.slice/system-getty.slice/getty@tty1.service",
                     "/a.slice/b.slice/c.slice/d.slice/e.slice/x.service", "/system.slice/docker.service/sub",
                     "/user.slice/user-1000.slice/user@1000.service/init.scope",
                     "/user.slice/user-1000.slice/user@1000.service/app.slice/app-x.slice/vte-1.scope",
                     "/user.slice/user-1000.slice/session-2.scope"] {
            XCTAssertTrue(UnitCgroups.isFollowed(path: path), path)
        }
        for path in ["/", "/init.scope", "/system.slice", "/a.slice/b.slice/c.slice/d.slice/e.slice/f.slice/x.service",
                     "/system.slice/docker.service/inner.scope", "/x/system.slice/cron.service",
                     "/user.slice/user-1000.slice/user@1000.service",
                     "/user.slice/user-1000.slice/user@1000.service/a.slice/b.slice/c.slice/x.scope",
                     "/user.slice/user-1000.slice/user@1000.service/x.service/y.scope"] {
            XCTAssertFalse(UnitCgroups.isFollowed(path: path), path)
        }
        XCTAssertEqual(PeerIdentity.unitAndManager(fromCgroup: "0::/a.slice/b.slice/c.slice/d.slice/e.slice/f.slice/x.service")?
            .followed, false)
        XCTAssertEqual(PeerIdentity.unitAndManager(fromCgroup: "0::/system.slice/a.slice/b.slice/x.service")?.followed, true)
    }

    func testGoldenText() throws {
        let r = try build("""
            [App phone]
            User=1000
            WWAN=deny
            [App cron]
            Unit=cron.service
            Ethernet=ask
            [App browser]
            Executable=/usr/bin/firefox
            """)
        try? r.text.write(toFile: "/tmp/golden.txt", atomically: true, encoding: .utf8)
        XCTAssertEqual(r.text, #"""
            table inet netpermd {}
            delete table inet netpermd
            table inet netpermd {
            	map links {
            		type ifname : verdict
            		elements = { "eth0" : goto kind_ethernet,
            			     "wwan0" : goto metered_wwan }
            	}
            	map uid_roaming {
            		type uid : verdict
            	}
            	map uid_metered {
            		type uid : verdict
            	}
            	map uid_wifi {
            		type uid : verdict
            	}
            	map uid_wwan {
            		type uid : verdict
            		elements = { 1000 : goto deny }
            	}
            	map uid_ethernet {
            		type uid : verdict
            	}
            	map uid_other {
            		type uid : verdict
            	}
            	map user4_roaming {
            		type cgroupsv2 : verdict
            	}
            	map user4_metered {
            		type cgroupsv2 : verdict
            	}
            	map user4_wifi {
            		type cgroupsv2 : verdict
            	}
            	map user4_wwan {
            		type cgroupsv2 : verdict
            	}
            	map user4_ethernet {
            		type cgroupsv2 : verdict
            	}
            	map user4_other {
            		type cgroupsv2 : verdict
            	}
            	map user5_roaming {
            		type cgroupsv2 : verdict
            	}
            	map user5_metered {
            		type cgroupsv2 : verdict
            	}
            	map user5_wifi {
            		type cgroupsv2 : verdict
            	}
            	map user5_wwan {
            		type cgroupsv2 : verdict
            	}
            	map user5_ethernet {
            		type cgroupsv2 : verdict
            	}
            	map user5_other {
            		type cgroupsv2 : verdict
            	}
            	map user6_roaming {
            		type cgroupsv2 : verdict
            	}
            	map user6_metered {
            		type cgroupsv2 : verdict
            	}
            	map user6_wifi {
            		type cgroupsv2 : verdict
            	}
            	map user6_wwan {
            		type cgroupsv2 : verdict
            	}
            	map user6_ethernet {
            		type cgroupsv2 : verdict
            	}
            	map user6_other {
            		type cgroupsv2 : verdict
            	}
            	map unit2_roaming {
            		type cgroupsv2 : verdict
            		elements = { "unified/system.slice/cron.service" : return }
            	}
            	map unit2_metered {
            		type cgroupsv2 : verdict
            		elements = { "unified/system.slice/cron.service" : return }
            	}
            	map unit2_wifi {
            		type cgroupsv2 : verdict
            		elements = { "unified/system.slice/cron.service" : accept }
            	}
            	map unit2_wwan {
            		type cgroupsv2 : verdict
            		elements = { "unified/system.slice/cron.service" : goto ask_6ee31989_wwan }
            	}
            	map unit2_ethernet {
            		type cgroupsv2 : verdict
            		elements = { "unified/system.slice/cron.service" : goto ask_6ee31989_ethernet }
            	}
            	map unit2_other {
            		type cgroupsv2 : verdict
            		elements = { "unified/system.slice/cron.service" : accept }
            	}
            	map unit3_roaming {
            		type cgroupsv2 : verdict
            	}
            	map unit3_metered {
            		type cgroupsv2 : verdict
            	}
            	map unit3_wifi {
            		type cgroupsv2 : verdict
            	}
            	map unit3_wwan {
            		type cgroupsv2 : verdict
            	}
            	map unit3_ethernet {
            		type cgroupsv2 : verdict
            	}
            	map unit3_other {
            		type cgroupsv2 : verdict
            	}
            	map unit4_roaming {
            		type cgroupsv2 : verdict
            	}
            	map unit4_metered {
            		type cgroupsv2 : verdict
            	}
            	map unit4_wifi {
            		type cgroupsv2 : verdict
            	}
            	map unit4_wwan {
            		type cgroupsv2 : verdict
            	}
            	map unit4_ethernet {
            		type cgroupsv2 : verdict
            	}
            	map unit4_other {
            		type cgroupsv2 : verdict
            	}
            	map unit5_roaming {
            		type cgroupsv2 : verdict
            	}
            	map unit5_metered {
            		type cgroupsv2 : verdict
            	}
            	map unit5_wifi {
            		type cgroupsv2 : verdict
            	}
            	map unit5_wwan {
            		type cgroupsv2 : verdict
            	}
            	map unit5_ethernet {
            		type cgroupsv2 : verdict
            	}
            	map unit5_other {
            		type cgroupsv2 : verdict
            	}
            	map unit6_roaming {
            		type cgroupsv2 : verdict
            	}
            	map unit6_metered {
            		type cgroupsv2 : verdict
            	}
            	map unit6_wifi {
            		type cgroupsv2 : verdict
            	}
            	map unit6_wwan {
            		type cgroupsv2 : verdict
            	}
            	map unit6_ethernet {
            		type cgroupsv2 : verdict
            	}
            	map unit6_other {
            		type cgroupsv2 : verdict
            	}
            	map tag_uid {
            		type uid : mark
            		elements = { 1000 : 0x6eb611af }
            	}
            	map tag_unit2 {
            		type cgroupsv2 : mark
            		elements = { "unified/system.slice/cron.service" : 0x6ee31989 }
            	}
            	map tag_unit3 {
            		type cgroupsv2 : mark
            	}
            	map tag_unit4 {
            		type cgroupsv2 : mark
            	}
            	map tag_unit5 {
            		type cgroupsv2 : mark
            	}
            	map tag_unit6 {
            		type cgroupsv2 : mark
            	}
            	map report_units {
            		type cgroupsv2 : mark
            	}
            	map conn_roaming {
            		type mark : verdict
            		elements = { 0x6ee31989 : return }
            	}
            	map conn_metered {
            		type mark : verdict
            		elements = { 0x6ee31989 : return }
            	}
            	map conn_wifi {
            		type mark : verdict
            		elements = { 0x6ee31989 : accept }
            	}
            	map conn_wwan {
            		type mark : verdict
            		elements = { 0x6eb611af : goto deny,
            			     0x6ed31d8f : goto ask_6ed31d8f_wwan,
            			     0x6ee31989 : goto ask_6ee31989_wwan }
            	}
            	map conn_ethernet {
            		type mark : verdict
            		elements = { 0x6ee31989 : goto ask_6ee31989_ethernet }
            	}
            	map conn_other {
            		type mark : verdict
            		elements = { 0x6ee31989 : accept }
            	}
            	chain refuse {
            		meta l4proto tcp counter reject with tcp reset
            		counter reject with icmpx admin-prohibited
            	}
            	limit report_total {
            		rate 200/second burst 100 packets
            	}
            	set report_refused {
            		type mark
            		size 65535
            		flags dynamic,timeout
            		timeout 1m
            	}
            	chain refused_log {
            		meta mark set socket cgroupv2 level 6 map @report_units goto refused_unit
            		meta mark set socket cgroupv2 level 5 map @report_units goto refused_unit
            		meta mark set socket cgroupv2 level 4 map @report_units goto refused_unit
            		ct mark and 0xff800000 == 0x6e800000 meta mark set ct mark update @report_refused { ct mark limit rate 10/second burst 20 packets } limit name "report_total" log prefix "netpermd:refused:denied" group 28273 snaplen 64
            	}
            	chain refused_unit {
            		update @report_refused { meta mark limit rate 10/second burst 20 packets } limit name "report_total" log prefix "netpermd:refused:denied:unit" group 28273 snaplen 64
            	}
            	chain deny {
            		jump refused_log
            		goto refuse
            	}
            	chain ask_6ee31989_wwan {
            		limit rate 5/second burst 5 packets log group 28272 prefix "netpermd:cron:wwan"
            		goto refuse
            	}
            	chain ask_6ee31989_ethernet {
            		limit rate 5/second burst 5 packets log group 28272 prefix "netpermd:cron:ethernet"
            		goto refuse
            	}
            	chain ask_6ed31d8f_wwan {
            		limit rate 5/second burst 5 packets log group 28272 prefix "netpermd:browser:wwan"
            		goto refuse
            	}
            	chain tag {
            		ct mark set meta skuid map @tag_uid
            		ct mark set socket cgroupv2 level 2 map @tag_unit2
            	}
            	chain tag_in {
            		ct mark set socket cgroupv2 level 2 map @tag_unit2
            	}
            	chain owned_roaming {
            		socket cgroupv2 level 2 vmap @unit2_roaming
            		tcp flags & (syn | ack) == syn | ack ct mark vmap @conn_roaming
            	}
            	chain roaming {
            		ct state new ct mark 0 jump tag
            		meta skuid 0-4294967295 goto owned_roaming
            		ct mark vmap @conn_roaming
            		socket cgroupv2 level 2 vmap @unit2_roaming
            	}
            	chain owned_metered {
            		socket cgroupv2 level 2 vmap @unit2_metered
            		tcp flags & (syn | ack) == syn | ack ct mark vmap @conn_metered
            	}
            	chain metered {
            		ct state new ct mark 0 jump tag
            		meta skuid 0-4294967295 goto owned_metered
            		ct mark vmap @conn_metered
            		socket cgroupv2 level 2 vmap @unit2_metered
            	}
            	chain owned_wifi {
            		socket cgroupv2 level 2 vmap @unit2_wifi
            		tcp flags & (syn | ack) == syn | ack ct mark vmap @conn_wifi
            	}
            	chain kind_wifi {
            		ct state new ct mark 0 jump tag
            		meta skuid 0-4294967295 goto owned_wifi
            		ct mark vmap @conn_wifi
            		socket cgroupv2 level 2 vmap @unit2_wifi
            	}
            	chain owned_wwan {
            		socket cgroupv2 level 2 vmap @unit2_wwan
            		tcp flags & (syn | ack) == syn | ack ct mark vmap @conn_wwan
            		meta skuid vmap @uid_wwan
            	}
            	chain kind_wwan {
            		ct state new ct mark 0 jump tag
            		meta skuid 0-4294967295 goto owned_wwan
            		meta l4proto igmp counter drop
            		icmpv6 type { mld-listener-report, mld-listener-done, mld2-listener-report } counter drop
            		ct mark vmap @conn_wwan
            		socket cgroupv2 level 2 vmap @unit2_wwan
            	}
            	chain owned_ethernet {
            		socket cgroupv2 level 2 vmap @unit2_ethernet
            		tcp flags & (syn | ack) == syn | ack ct mark vmap @conn_ethernet
            	}
            	chain kind_ethernet {
            		ct state new ct mark 0 jump tag
            		meta skuid 0-4294967295 goto owned_ethernet
            		ct mark vmap @conn_ethernet
            		socket cgroupv2 level 2 vmap @unit2_ethernet
            	}
            	chain owned_other {
            		socket cgroupv2 level 2 vmap @unit2_other
            		tcp flags & (syn | ack) == syn | ack ct mark vmap @conn_other
            	}
            	chain kind_other {
            		ct state new ct mark 0 jump tag
            		meta skuid 0-4294967295 goto owned_other
            		ct mark vmap @conn_other
            		socket cgroupv2 level 2 vmap @unit2_other
            	}
            	chain metered_wifi {
            		jump metered
            		goto kind_wifi
            	}
            	chain roaming_wifi {
            		jump roaming
            		goto kind_wifi
            	}
            	chain roaming_metered_wifi {
            		jump roaming
            		jump metered
            		goto kind_wifi
            	}
            	chain metered_wwan {
            		jump metered
            		goto kind_wwan
            	}
            	chain roaming_wwan {
            		jump roaming
            		goto kind_wwan
            	}
            	chain roaming_metered_wwan {
            		jump roaming
            		jump metered
            		goto kind_wwan
            	}
            	chain metered_ethernet {
            		jump metered
            		goto kind_ethernet
            	}
            	chain roaming_ethernet {
            		jump roaming
            		goto kind_ethernet
            	}
            	chain roaming_metered_ethernet {
            		jump roaming
            		jump metered
            		goto kind_ethernet
            	}
            	chain metered_other {
            		jump metered
            		goto kind_other
            	}
            	chain roaming_other {
            		jump roaming
            		goto kind_other
            	}
            	chain roaming_metered_other {
            		jump roaming
            		jump metered
            		goto kind_other
            	}
            	chain output {
            		type filter hook output priority filter; policy accept;
            		oifname vmap @links
            	}
            	chain input {
            		type filter hook input priority filter; policy accept;
            		ct state new tcp flags & (syn | ack) == syn ct mark 0 jump tag_in
            	}
            }

            """#)
        XCTAssertEqual(r.notEnforced, ["browser": .executableOnly])
        XCTAssertEqual([r.uids, r.cgroups, r.links], [1, 1, 2])
    }

    /// The first [App] naming a uid or a unit owns it, as in the daemon's own matching; later ones are shadowed.
    func testFirstAppWinsAndWhyOthersAreNotEnforced() throws {
        let r = try build("""
            [App first]
            User=1000
            WWAN=allow
            [App second]
            User=1000
            WWAN=deny
            [App gettys]
            Unit=getty@*.service
            WWAN=deny
            [App getty1]
            Unit=getty@tty1.service
            [App gone]
            Unit=absent.service
            [App mine]
            UserUnit=app-foo.scope
            """)
        XCTAssertFalse(r.text.contains("1000 : goto"), "first allows: no verdict for its uid")
        let first = try XCTUnwrap(ConnectionTags.assign(["first", "second", "gettys", "getty1", "gone", "mine"])["first"])
        XCTAssertTrue(r.text.contains("1000 : \(ConnectionTags.text(first))"), "the uid's connections are first's")
        XCTAssertTrue(r.text.contains(#""unified/system.slice/system-getty.slice/getty@tty1.service" : goto deny"#))
        XCTAssertEqual(r.notEnforced, ["second": .shadowed, "getty1": .shadowed, "gone": .cgroupAbsent,
                                       "mine": .cgroupAbsent])
    }

    /// Users' own units (below user@UID.service, levels 4-6) only narrow: their maps hold denials only, looked up
    /// deepest first before the system units' and the uid's, so a user unit whose app allows goes on to its uid's
    /// verdict (a user cannot name a unit out of `User=`'s WWAN=deny). A system unit's allow accepts, as before.
    /// `netpermctl run` scopes are their app's whatever its keys, at either manager.
    /// A user's own decision reaches that uid's sockets only: its uid element, and its own units' elements; another
    /// uid of the same app keeps the app's (still asked), and a system unit's sockets (anyone's) keep the app's.
    func testAUidsOwnDecisionIsItsElementsOnly() throws {
        let home = "user.slice/user-1000.slice/user@1000.service"
        let cgroups = UnitCgroups(nftRoot: "", units: [
            UnitCgroup(path: home + "/app.slice/app-maps-1.scope", level: 5, unit: "app-maps-1.scope", id: 51, user: true),
            UnitCgroup(path: "user.slice/user-1001.slice/user@1001.service/app.slice/app-maps-2.scope", level: 5,
                       unit: "app-maps-2.scope", id: 52, user: true),
            UnitCgroup(path: "system.slice/maps.service", level: 2, unit: "maps.service", id: 21),
        ])
        let config = try parsePolicy("""
            [App maps]
            User=1000 1001
            Unit=maps.service
            UserUnit=app-maps-*.scope
            WWAN=ask
            """)
        var own = config.permissions(for: config.apps[0])
        own.wwan = .allow
        let r = Ruleset.build(apps: config.apps, permissions: { config.permissions(for: $0) },
                              ownPermissions: { _, uid in uid == 1000 ? own : nil }, links: [Links.lo, Links.wwan],
                              cgroups: cgroups)
        func map(_ name: String) -> [String] {
            r.maps.first { $0.name == name }?.elements.map(\.text) ?? ["(no map \(name))"]
        }
        let ask = try XCTUnwrap(r.askChains.first?.name)
        XCTAssertEqual(map("uid_wwan"), ["1001 : goto \(ask)"], "uid 1000 allowed itself: no element")
        XCTAssertEqual(map("user5_wwan"), ["\"user.slice/user-1001.slice/user@1001.service/app.slice/app-maps-2.scope\" : goto \(ask)"])
        XCTAssertEqual(map("unit2_wwan"), ["\"system.slice/maps.service\" : goto \(ask)"], "a system unit keeps the app's")
        XCTAssertEqual(r.pendingChains, 1, "the app's one chain, for the uids still asked")
        // And steering marks what the uid itself allows.
        let plan = SteeringPlan.build(ruleset: r, apps: config.apps, permissions: { config.permissions(for: $0) },
                                      ownPermissions: { _, uid in uid == 1000 ? own : nil }, links: [Links.wwan])
        XCTAssertNil(plan.uidMarks[1000], "uid 1000 may use every link")
        XCTAssertNotNil(plan.uidMarks[1001])
    }

    func testUserUnitsOnlyNarrow() throws {
        let home = "user.slice/user-1000.slice/user@1000.service"
        let run = RunScope.unitName(app: "tool", tag: "77")!
        let cgroups = UnitCgroups(nftRoot: "", units: [
            UnitCgroup(path: home + "/app.slice/app-gnome-firefox-1234.scope", level: 5, unit: "app-gnome-firefox-1234.scope",
                       id: 51, user: true),
            UnitCgroup(path: home + "/app.slice/app-org.gnome.Terminal.slice/vte-spawn-9.scope", level: 6,
                       unit: "vte-spawn-9.scope", id: 61, user: true),
            UnitCgroup(path: home + "/app.slice/" + run, level: 5, unit: run, id: 52, user: true),
            UnitCgroup(path: home + "/init.scope", level: 4, unit: "init.scope", id: 41, user: true),
            UnitCgroup(path: "system.slice/" + run, level: 2, unit: run, id: 21),
            // A system unit's name under a user's manager is the user's, not the system's: Unit= does not take it.
            UnitCgroup(path: home + "/app.slice/cron.service", level: 5, unit: "cron.service", id: 53, user: true),
        ])
        let r = try build("""
            [App phone]
            User=1000
            WWAN=deny
            [App firefox]
            UserUnit=app-gnome-firefox-*.scope
            WWAN=allow
            Ethernet=deny
            [App terminal]
            UserUnit=vte-spawn-*.scope
            WWAN=ask
            [App tool]
            Executable=/usr/bin/tool
            WWAN=deny
            [App cron]
            Unit=cron.service
            WWAN=allow
            [App absent]
            UserUnit=nothing-*.scope
            """, cgroups: cgroups)
        func map(_ name: String) -> String {
            guard let start = r.text.range(of: "\tmap \(name) {\n") else { return "(no map \(name))" }
            return String(r.text[start.lowerBound..<r.text[start.upperBound...].range(of: "\t}\n")!.upperBound])
        }
        XCTAssertEqual(map("user5_wwan"), #"""
            	map user5_wwan {
            		type cgroupsv2 : verdict
            		elements = { "user.slice/user-1000.slice/user@1000.service/app.slice/app-netpermd-tool-77.scope" : goto deny }
            	}

            """#, "firefox allows WWAN: no element, so uid 1000's deny holds; the run scope of tool denies")
        XCTAssertEqual(map("user5_ethernet"), #"""
            	map user5_ethernet {
            		type cgroupsv2 : verdict
            		elements = { "user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-firefox-1234.scope" : goto deny }
            	}

            """#)
        XCTAssertEqual(map("user6_wwan"), #"""
            	map user6_wwan {
            		type cgroupsv2 : verdict
            		elements = { "user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-9.scope" : goto ask_\#(ConnectionTags.text(ConnectionTags.assign(["terminal"])["terminal"]!).dropFirst(2))_wwan }
            	}

            """#)
        XCTAssertEqual(map("unit2_wwan"), #"""
            	map unit2_wwan {
            		type cgroupsv2 : verdict
            		elements = { "system.slice/app-netpermd-tool-77.scope" : goto deny }
            	}

            """#, "root's run scope is a system unit")
        XCTAssertEqual(map("unit2_wifi"), #"""
            	map unit2_wifi {
            		type cgroupsv2 : verdict
            		elements = { "system.slice/app-netpermd-tool-77.scope" : accept }
            	}

            """#, "a system unit's allow accepts")
        XCTAssertFalse(r.text.contains("\"" + home + "/app.slice/cron.service\""), "cron.service of a user is not Unit=cron.service")
        XCTAssertFalse(r.text.contains("init.scope"), "no app names it")
        XCTAssertTrue(r.text.contains("""
            	chain owned_wwan {
            		socket cgroupv2 level 6 vmap @user6_wwan
            		socket cgroupv2 level 5 vmap @user5_wwan
            		socket cgroupv2 level 2 vmap @unit2_wwan
            		tcp flags & (syn | ack) == syn | ack ct mark vmap @conn_wwan
            		meta skuid vmap @uid_wwan
            	}
            	chain kind_wwan {
            		ct state new ct mark 0 jump tag
            		meta skuid 0-4294967295 goto owned_wwan
            		meta l4proto igmp counter drop
            		icmpv6 type { mld-listener-report, mld-listener-done, mld2-listener-report } counter drop
            		ct mark vmap @conn_wwan
            		socket cgroupv2 level 6 vmap @user6_wwan
            		socket cgroupv2 level 5 vmap @user5_wwan
            		socket cgroupv2 level 2 vmap @unit2_wwan
            	}
            """), "deepest first, users' units before the system's, the uid last; empty maps (user4, unit3) not looked "
            + "up; a socket with no owner by its tag, then its cgroup\n" + r.text)
        XCTAssertEqual(map("tag_unit2"), #"""
            	map tag_unit2 {
            		type cgroupsv2 : mark
            		elements = { "system.slice/app-netpermd-tool-77.scope" : \#(ConnectionTags.text(ConnectionTags.assign(["tool"])["tool"]!)) }
            	}

            """#, "users' units are not tagged; root's run scope is its app's")
        XCTAssertEqual(r.notEnforced, ["cron": .cgroupAbsent, "absent": .cgroupAbsent])
        XCTAssertEqual(r.unitIDs, [21, 51, 52, 61], "user units' ids too, by path")
    }

    /// Links changing alone give a script for their sets, and nothing else.
    func testLinkUpdate() throws {
        let policy = "[App a]\nUser=1\nWWAN=deny\n"
        let old = try build(policy, links: [Links.eth, Links.wwan])
        let new = try build(policy, links: [Links.eth, Links.wwan, makeLink(9, "wwan1", .wwan), makeLink(8, "wlan0", .wifi)])
        let u = try XCTUnwrap(new.update(from: old))
        XCTAssertEqual(u.transactions.joined(), """
            flush map inet netpermd links
            add element inet netpermd links { "eth0" : goto kind_ethernet, "wwan0" : goto metered_wwan, "wwan1" : goto metered_wwan, "wlan0" : goto kind_wifi }

            """)
        XCTAssertEqual(u.size, Ruleset.UpdateSize(links: true, elements: 0, chains: 0))
        XCTAssertEqual(try build(policy, links: []).update(from: old)?.transactions.joined(), "flush map inet netpermd links\n", "every link went")
        XCTAssertEqual(old.update(from: old)?.transactions.joined(), "", "nothing changed")
    }

    /// A permission changing (a decision, a policy edit) changes only its elements: a changed verdict is deleted
    /// and added again in the same transaction, every change that refuses more before every one that refuses less
    /// (RuleWindowTests), a new pending kind's chain is added before the element that names it, and a chain no element
    /// names any more is deleted after its elements.
    func testPermissionUpdateChangesOnlyElements() throws {
        let old = try build("""
            [App phone]
            User=1000
            WWAN=ask
            [App tv]
            User=1001 1002
            WiFi=deny
            WWAN=deny
            [App cron]
            Unit=cron.service
            Ethernet=deny
            WWAN=allow
            [App other]
            User=2000
            WiFi=deny
            """)
        let new = try build("""
            [App phone]
            User=1000
            WWAN=deny
            [App tv]
            User=1001 1002
            WiFi=allow
            WWAN=ask
            [App cron]
            Unit=cron.service
            Ethernet=allow
            WWAN=allow
            Metered=deny
            [App other]
            User=2000
            WiFi=deny
            """)
        let u = try XCTUnwrap(new.update(from: old))
        XCTAssertEqual(u.transactions, [#"""
            add chain inet netpermd ask_6ec5564f_wwan
            add rule inet netpermd ask_6ec5564f_wwan limit rate 5/second burst 5 packets log group 28272 prefix "netpermd:tv:wwan"
            add rule inet netpermd ask_6ec5564f_wwan goto refuse

            """#, #"""
            delete element inet netpermd uid_wwan { 1000, 1001, 1002 }
            delete element inet netpermd unit2_metered { "unified/system.slice/cron.service" }
            delete element inet netpermd conn_metered { 0x6ee31989 }
            delete element inet netpermd conn_wwan { 0x6eb611af, 0x6ec5564f }
            add element inet netpermd uid_wwan { 1000 : goto deny, 1001 : goto ask_6ec5564f_wwan, 1002 : goto ask_6ec5564f_wwan }
            add element inet netpermd unit2_metered { "unified/system.slice/cron.service" : goto deny }
            add element inet netpermd conn_metered { 0x6ee31989 : goto deny }
            add element inet netpermd conn_wwan { 0x6eb611af : goto deny, 0x6ec5564f : goto ask_6ec5564f_wwan }

            """#, #"""
            delete element inet netpermd uid_wifi { 1001, 1002 }
            delete element inet netpermd unit2_ethernet { "unified/system.slice/cron.service" }
            delete element inet netpermd conn_wifi { 0x6ec5564f }
            delete element inet netpermd conn_ethernet { 0x6ee31989 }
            add element inet netpermd unit2_ethernet { "unified/system.slice/cron.service" : accept }
            add element inet netpermd conn_ethernet { 0x6ee31989 : accept }

            """#, """
            delete chain inet netpermd ask_6eb611af_wwan

            """], "the new chain, then the elements that refuse more (uids', cron's cgroup's and the apps' tags'), then those "
           + "that refuse less, then the old chain")
        XCTAssertEqual(u.size, Ruleset.UpdateSize(links: false, elements: 21, chains: 2))
        // A map losing its last element: its lookup leaves its chains after the elements; gaining its first: the
        // lookups come in before, in their places.
        let denied = try build("[App other]\nUser=2000\nWiFi=deny\n"), allowed = try build("[App other]\nUser=2000\nWiFi=allow\n")
        let tag = ConnectionTags.text(ConnectionTags.assign(["other"])["other"]!)
        XCTAssertEqual(allowed.update(from: denied)?.transactions, [
            "delete element inet netpermd uid_wifi { 2000 }\ndelete element inet netpermd conn_wifi { \(tag) }\n",
            "flush chain inet netpermd owned_wifi\nflush chain inet netpermd kind_wifi\n"
                + "add rule inet netpermd kind_wifi ct state new ct mark 0 jump tag\n"])
        XCTAssertEqual(denied.update(from: allowed)?.transactions, [
            "flush chain inet netpermd owned_wifi\nadd rule inet netpermd owned_wifi meta skuid vmap @uid_wifi\n"
                + "flush chain inet netpermd kind_wifi\nadd rule inet netpermd kind_wifi ct state new ct mark 0 jump tag\n"
                + "add rule inet netpermd kind_wifi meta skuid 0-4294967295 goto owned_wifi\n"
                + "add rule inet netpermd kind_wifi ct mark vmap @conn_wifi\n",
            "add element inet netpermd uid_wifi { 2000 : goto deny }\nadd element inet netpermd conn_wifi { \(tag) : goto deny }\n"])
        // The way back is the mirror image.
        let back = try XCTUnwrap(old.update(from: new)).transactions
        XCTAssertEqual(back.count, 4)
        XCTAssertTrue(back.first?.hasPrefix("add chain inet netpermd ask_6eb611af_wwan\n") == true, "\(back)")
        XCTAssertEqual(back.last, "delete chain inet netpermd ask_6ec5564f_wwan\n")
    }

    /// Apps reordered in the policy change nothing: their pending chains are named by their tags, not their places.
    /// Tags are per name, distinct, and the same in every build.
    func testReorderingTheAppsChangesNothing() throws {
        let old = try build("[App a]\nUser=1\nWWAN=ask\n[App b]\nUser=2\nWWAN=ask\n")
        let new = try build("[App b]\nUser=2\nWWAN=ask\n[App a]\nUser=1\nWWAN=ask\n")
        XCTAssertEqual(new.update(from: old)?.transactions, [])
        XCTAssertEqual(new.text, old.text)
        let tags = ConnectionTags.assign(["a", "b"])
        XCTAssertTrue(new.text.contains("chain ask_\(ConnectionTags.text(tags["a"]!).dropFirst(2))_wwan {"), new.text)
        // FNV-1a of the name, 23 bits, under 0x6e800000.
        XCTAssertEqual(tags["a"], 0x6E80_0000 | (0xE40C_292C & 0x7F_FFFF))
        let many = ConnectionTags.assign((0..<20_000).map { "app\($0)" })
        XCTAssertEqual(Set(many.values).count, 20_000, "distinct, collisions moved on")
        XCTAssertTrue(many.values.allSatisfy { $0 & 0xFF80_0000 == 0x6E80_0000 })
        XCTAssertEqual(ConnectionTags.assign((0..<20_000).reversed().map { "app\($0)" }), many, "whatever the order")
    }

    /// nft names a cgroup by its path and resolves it when loading: the element of a cgroup that went, or was made
    /// again (a new id at the same path), cannot be deleted by its path, so it is left stale (its id is never used
    /// again) and counted; a cgroup appearing, or made again, is elements added. A stale element that names a
    /// pending chain makes it the whole table: the chain could then not be deleted.
    func testCgroupsThatGoLeaveStaleElements() throws {
        let policy = "[App cron]\nUnit=cron.service\nWWAN=deny\n"
        let with = UnitCgroups(nftRoot: "unified", units: [UnitCgroup(path: "system.slice/cron.service", level: 2,
                                                                       unit: "cron.service", id: 7)])
        let old = try build(policy, cgroups: UnitCgroups(nftRoot: "unified"))
        let came = try build(policy, cgroups: with)
        let u = try XCTUnwrap(came.update(from: old), "a cgroup appearing is elements added")
        XCTAssertEqual(u.size, Ruleset.UpdateSize(elements: 12, chains: 15),
                       "its 6 verdicts, its tag, its app's 5 allows by tag; and the chains' lookups, its maps no longer empty")
        XCTAssertEqual(u.transactions.count, 3, "the lookups first, then the elements that refuse, then those that pass")
        XCTAssertFalse(u.transactions.joined().contains("delete"), u.transactions.joined())
        XCTAssertTrue(u.transactions[1].contains(#"add element inet netpermd unit2_wwan { "unified/system.slice/cron.service" : goto deny }"#),
                      u.transactions[1])
        XCTAssertTrue(u.transactions[0].hasSuffix("flush chain inet netpermd input\nadd rule inet netpermd input "
                                                  + "ct state new tcp flags & (syn | ack) == syn ct mark 0 jump tag_in\n"),
                      u.transactions[0])
        XCTAssertTrue(u.transactions[2].contains(#"add element inet netpermd unit2_other { "unified/system.slice/cron.service" : accept }"#),
                      u.transactions[2])
        let went = try XCTUnwrap(old.update(from: came))
        XCTAssertFalse(went.transactions.joined().contains("cron.service"), "no cgroup element nft can be told of: the path no longer names the id")
        XCTAssertEqual(went.size, Ruleset.UpdateSize(elements: 5, chains: 15, stale: 7),
                       "its app's allows by tag go, its deny stays; the lookups of the maps now empty go, after the elements")
        XCTAssertEqual(went.transactions.count, 2)
        var again = with
        again.units[0].id = 8
        let remade = try XCTUnwrap(try build(policy, cgroups: again).update(from: came))
        XCTAssertEqual(remade.size, Ruleset.UpdateSize(elements: 7, stale: 7), "made again: the new id added, the old left")
        XCTAssertFalse(remade.transactions.joined().contains("delete"), remade.transactions.joined())
        XCTAssertEqual(try build("[App cron]\nUnit=cron.service\nWWAN=allow\n", cgroups: with).update(from: came)?.size,
                       Ruleset.UpdateSize(elements: 4, chains: 1),
                       "a permission of a cgroup that stays: its element and its tag's, deleted and added; no app is kept off "
                       + "wwan now, so its chain drops no membership reports")
        // Still there but no longer owned (the policy changed): its path still names its id, so it is deleted.
        let unowned = try XCTUnwrap(try build("[App other]\nUser=5\n", cgroups: with).update(from: came))
        XCTAssertEqual(unowned.size.stale, 0)
        XCTAssertTrue(unowned.transactions.joined().contains(#"delete element inet netpermd unit2_wwan { "unified/system.slice/cron.service" }"#),
                      unowned.transactions.joined())
        let pending = "[App cron]\nUnit=cron.service\nWWAN=ask\n"
        XCTAssertNil(try build(pending, cgroups: UnitCgroups(nftRoot: "unified")).update(from: try build(pending, cgroups: with)),
                     "the stale element would name cron's pending chain")
    }

    /// A whole table replaces one in force by a handover: the new rules in a table of their own, then the table
    /// replaced while that one holds, then that one removed; with none in force, one transaction (and the removal
    /// of a handover's table a killed daemon left, after it).
    func testAWholeLoadHandsOver() throws {
        let r = try build("[App a]\nUser=1\nWWAN=deny\n")
        let head = "table inet netpermd {}\ndelete table inet netpermd\ntable inet netpermd {\n"
        XCTAssertTrue(r.text.hasPrefix(head))
        let drop = "table inet netpermd_handover {}\ndelete table inet netpermd_handover\n"
        let steps = Ruleset.wholeLoad(r.text, tableInForce: true, handoverLeft: false)
        XCTAssertEqual(steps.count, 3)
        XCTAssertEqual(steps[0], drop + "table inet netpermd_handover {\n" + r.text.dropFirst(head.count))
        XCTAssertEqual(steps[1], r.text)
        XCTAssertEqual(steps[2], drop)
        XCTAssertEqual(Ruleset.wholeLoad(r.text, tableInForce: false, handoverLeft: false), [r.text])
        XCTAssertEqual(Ruleset.wholeLoad(r.text, tableInForce: false, handoverLeft: true), [r.text, drop])
        XCTAssertEqual(Ruleset.removal, "table inet netpermd {}\ndelete table inet netpermd\n" + drop)
    }

    /// A change touching more than about half of the table is loaded whole.
    func testLargeChangesLoadTheWholeTable() throws {
        var deny = "", allow = ""
        for i in 0..<100 {
            deny += "[App a\(i)]\nUser=\(1000 + i)\nWWAN=deny\n"
            allow += "[App a\(i)]\nUser=\(1000 + i)\nWWAN=\(i < 10 ? "allow" : "deny")\n"
        }
        let old = try build(deny), few = try build(allow)
        XCTAssertEqual(few.update(from: old)?.size.elements, 20, "each app's uid and tag")
        let all = try build(deny.replacingOccurrences(of: "WWAN=deny", with: "WWAN=allow"))
        XCTAssertNil(all.update(from: old))
    }

    /// Units by the thousand (a scan under churn): their new elements, and those of units gone (deleted through the
    /// descriptor the daemon holds), go a few hundred to a transaction after the chains, so that the kernel is never
    /// held long by one, what refuses before what passes; a verdict changing stays one transaction with its deletion.
    func testManyUnitsGoAFewHundredToATransaction() throws {
        let policy = "[App churn]\nUnit=churn-*.scope\nWWAN=deny\n"
        func units(_ ids: Range<Int>) -> UnitCgroups {
            UnitCgroups(nftRoot: "", units: ids.map {
                UnitCgroup(path: "a.slice/churn-\($0).scope", level: 2, unit: "churn-\($0).scope", id: UInt64($0), handle: Int32(1000 + $0))
            })
        }
        let none = try build(policy, cgroups: units(0..<1)), many = try build(policy, cgroups: units(0..<101))
        let up = try XCTUnwrap(many.update(from: none))
        XCTAssertEqual(up.size.elements, 700, "100 units, each its 6 dimensions and its tag")
        let counts = up.transactions.map { t in
            t.split(separator: "\n").reduce(0) { n, line in n + (line.hasPrefix("add element") ? line.split(separator: ",").count : 0) }
        }
        // Their denials and tags first (200), then their allows (500).
        XCTAssertEqual(counts, [200, 256, 244], "\(up.transactions.map { $0.prefix(80) })")
        XCTAssertTrue(up.changes.allSatisfy { $0.elements != nil }, "each one nf_tables batch")
        // All gone but the first: deleted through their descriptors, none left stale.
        let down = try XCTUnwrap(none.update(from: many))
        XCTAssertEqual(down.size, Ruleset.UpdateSize(elements: 700))
        XCTAssertEqual(down.transactions.count, 3)
        XCTAssertTrue(down.transactions[0].hasPrefix(#"delete element inet netpermd unit2_roaming { "../../../proc/self/fd/1001""#),
                      down.transactions[0].prefix(120).description)
    }

    /// The same rules with other links are what a build with those links gives, skipped names and all.
    func testWithLinksIsABuildWithThoseLinks() throws {
        let policy = "[App a]\nUser=1\nWWAN=ask\n[App cron]\nUnit=cron.service\nWiFi=deny\n"
        let quoted = UnitCgroups(nftRoot: "", units: cgroups.units
            + [UnitCgroup(path: "system.slice/q\"uote.service", level: 2, unit: "q\"uote.service")])
        let policyQ = policy + "[App q]\nUnit=q\"uote.service\n"
        let sets: [[Link]] = [
            [],
            [Links.lo, Links.eth, Links.wwan],
            [Links.eth, makeLink(5, "ww\"an", .wwan), makeLink(8, "wlan0", .wifi), makeLink(9, "wwan1", .wwan)],
            [makeLink(6, "wl*", .wifi)],
        ]
        for from in sets {
            let old = try build(policyQ, links: from, cgroups: quoted)
            XCTAssertEqual(old.skipped.last, "system.slice/q\"uote.service")
            for to in sets {
                XCTAssertEqual(old.withLinks(to), try build(policyQ, links: to, cgroups: quoted))
            }
        }
    }

    /// The kernel's membership reports (IGMP, MLD) are dropped out of wwan links while some app that owns a uid or a
    /// unit cgroup may not use them, by its kind or by Metered= (wwan links are metered), after the owner test (a
    /// chain with no tags to look up gains it); never on other kinds, whatever their denials, nor when every owner
    /// may use wwan. A change that starts dropping them writes the chain before the elements that deny.
    func testMembershipReportsAreDroppedOutOfWwanLinksOnly() throws {
        func chain(_ r: Ruleset, _ name: String) -> [String] {
            guard let start = r.text.range(of: "\tchain \(name) {\n") else { return ["(no chain \(name))"] }
            let body = r.text[start.upperBound...]
            return body[..<body.range(of: "\t}\n")!.lowerBound].split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let drops = Ruleset.reportDrops
        let metered = try build("[App a]\nUser=1\nWWAN=allow\nMetered=deny\n[App b]\nUser=2\nWWAN=allow\nMetered=allow\nWiFi=deny\n"
                                + "Ethernet=ask\n")
        XCTAssertEqual(chain(metered, "kind_wwan"), ["ct state new ct mark 0 jump tag", "meta skuid 0-4294967295 goto owned_wwan"] + drops)
        XCTAssertEqual(chain(metered, "owned_wwan"), [])
        for kind in ["wifi", "ethernet", "other"] {
            XCTAssertFalse(chain(metered, "kind_" + kind).contains(drops[0]), "no drops on \(kind): \(chain(metered, "kind_" + kind))")
        }
        XCTAssertFalse(chain(metered, "metered").contains(drops[0]), "Metered= is every kind's: its chain drops nothing")
        let allowed = try build("[App a]\nUser=1\nWWAN=allow\nMetered=allow\nWiFi=deny\n[App b]\nExecutable=/bin/b\nWWAN=deny\n")
        XCTAssertFalse(allowed.text.contains("igmp"), "every owner may use wwan (b owns nothing)")
        let denied = try build("[App a]\nUser=1\nWWAN=ask\nWiFi=deny\n[App b]\nExecutable=/bin/b\nWWAN=deny\n")
        let u = try XCTUnwrap(denied.update(from: allowed))
        XCTAssertEqual(u.transactions.count, 2, "the chains, then the elements: " + u.transactions.joined())
        XCTAssertTrue(u.transactions[0].contains("add rule inet netpermd kind_wwan " + drops[1] + "\n"), u.transactions[0])
        XCTAssertTrue(u.transactions[1].contains("add element inet netpermd uid_wwan"), u.transactions[1])
        XCTAssertNil(try build("[App a]\nUser=1\nWWAN=allow\nMetered=allow\nWiFi=deny\n").text.range(of: "igmp"))
        XCTAssertEqual(try XCTUnwrap(allowed.update(from: denied)).transactions.last?.contains("flush chain inet netpermd kind_wwan"), true,
                       "and stops after them")
    }

    /// Metered= is checked on metered links before their kind: a denial rejects, an allowed unit returns to the
    /// kind's check (its uid is not consulted), an allowed uid needs no element.
    func testMeteredIsCheckedBeforeTheKind() throws {
        let r = try build("""
            [App backup]
            User=1000
            Metered=deny
            [App cron]
            Unit=cron.service
            Metered=allow
            [App getty]
            Unit=getty@*.service
            Metered=ask
            """)
        XCTAssertTrue(r.text.contains("map uid_metered {\n\t\ttype uid : verdict\n\t\telements = { 1000 : goto deny }"), r.text)
        XCTAssertTrue(r.text.contains(#""unified/system.slice/cron.service" : return"#))
        let getty = ConnectionTags.text(ConnectionTags.assign(["phone", "cron", "getty"])["getty"]!).dropFirst(2)
        XCTAssertTrue(r.text.contains(#""unified/system.slice/system-getty.slice/getty@tty1.service" : goto ask_\#(getty)_metered"#))
        XCTAssertTrue(r.text.contains(#"log group 28272 prefix "netpermd:getty:metered""#), "Metered=ask is logged too")
        XCTAssertTrue(r.text.contains(#"elements = { "eth0" : goto kind_ethernet,"# + "\n\t\t\t     " + #""wwan0" : goto metered_wwan }"#),
                      "Links.wwan is metered, eth0 is not\n" + r.text)
        XCTAssertTrue(r.text.contains("\tchain metered_wwan {\n\t\tjump metered\n\t\tgoto kind_wwan\n\t}\n"),
                      "a metered link's chain checks Metered= first, then its kind")
    }

    /// An undecided `ask` is logged before it is rejected, in a chain per app and kind (the prefix names both);
    /// one chain however many uids and cgroups the app has; an app whose name would not fit a prefix is rejected
    /// unlogged; `deny` and `allow` log nothing.
    func testPendingKindsAreLoggedOncePerAppAndKind() throws {
        let long = "a" + String(repeating: "b", count: 120)
        let r = try build("""
            [App phone]
            User=1000 1001
            Unit=cron.service
            WWAN=ask
            WiFi=ask
            [App \(long)]
            User=2000
            WWAN=ask
            [App denied]
            User=3000
            WWAN=deny
            """)
        XCTAssertEqual(r.pendingChains, 2)
        let phone = ConnectionTags.text(ConnectionTags.assign(["phone", long, "denied"])["phone"]!).dropFirst(2)
        XCTAssertTrue(r.text.contains("elements = { 1000 : goto ask_\(phone)_wwan,\n\t\t\t     1001 : goto ask_\(phone)_wwan,"
                                      + "\n\t\t\t     2000 : goto deny,\n\t\t\t     3000 : goto deny }"), r.text)
        XCTAssertTrue(r.text.contains(#""unified/system.slice/cron.service" : goto ask_\#(phone)_wifi"#))
        XCTAssertEqual(r.text.components(separatedBy: "log group").count - 1, 2)
        XCTAssertTrue(r.text.contains(#"prefix "netpermd:phone:wifi""#))
        XCTAssertTrue(r.text.contains(#"prefix "netpermd:phone:wwan""#))
        XCTAssertFalse(r.text.contains(long + ":"), "a prefix of more than 127 bytes is not made")
    }

    /// The prefix names the app and kind, and is read back; anything else on the group is not taken for it.
    func testLogPrefix() {
        XCTAssertEqual(Ruleset.logPrefix(app: "org.gnome.Maps", kind: .wwan), "netpermd:org.gnome.Maps:wwan")
        let fits = "a" + String(repeating: "b", count: 127 - 9 - 1 - 8 - 1)
        XCTAssertEqual(Ruleset.logPrefix(app: fits, kind: .ethernet)?.utf8.count, 127)
        XCTAssertNil(Ruleset.logPrefix(app: fits + "b", kind: .ethernet))
        let parsed = Ruleset.parseLogPrefix("netpermd:org.gnome.Maps:metered")
        XCTAssertEqual(parsed?.app, "org.gnome.Maps")
        XCTAssertEqual(parsed?.kind, .metered)
        for bad in ["", "netpermd:", "netpermd:a", "netpermd:a:", "netpermd::wwan", "netpermd:a:cellular",
                    "netpermd:1a:wwan", "netpermd:a b:wwan", "ulogd:a:wwan", "netpermd:a:wwan\0", "netpermd:a:wwa"] {
            XCTAssertNil(Ruleset.parseLogPrefix(bad), bad)
        }
    }

    /// Names nft cannot take inside quotes are left out (and reported), never spliced into the script.
    func testUnsafeNamesAreSkipped() throws {
        let r = try build("[App a]\nUser=1\nWWAN=deny\n",
                          links: [makeLink(5, "ww\"an", .wwan), makeLink(6, "wl*", .wifi), makeLink(7, "wwan1", .wwan)])
        XCTAssertEqual(r.skipped, ["ww\"an", "wl*"])
        XCTAssertFalse(r.text.contains("ww\"an"))
        XCTAssertTrue(r.text.contains(#"elements = { "wwan1" : goto metered_wwan }"#), r.text)
        XCTAssertEqual(r.links, 1)
    }

    /// Without a cgroup v2 hierarchy no unit is matched; loopback-kind links are in no set.
    func testNoHierarchyAndLoopback() throws {
        let r = try build("[App cron]\nUnit=cron.service\n", links: [Links.lo], cgroups: UnitCgroups())
        XCTAssertEqual(r.notEnforced, ["cron": .cgroupAbsent])
        XCTAssertFalse(r.text.contains("elements = { \""), "no link, no cgroup")
        XCTAssertEqual(r.elements, 1, "cron's tag says it is pending on wwan (its scopes' connections, were there any)")
    }

    /// 10,000 apps are elements of a few maps: the number of rules does not grow, and building stays fast.
    func testTenThousandAppsAreElementsNotRules() throws {
        var policy = ""
        for i in 0..<10_000 { policy += "[App a\(i)]\nUser=\(20_000 + i)\nWWAN=\(i % 2 == 0 ? "deny" : "allow")\n" }
        let config = try parsePolicy(policy)
        let start = ContinuousClock.now
        let r = Ruleset.build(apps: config.apps, permissions: { config.permissions(for: $0) },
                              links: [Links.eth, Links.wwan], cgroups: cgroups)
        let took = ContinuousClock.now - start
        XCTAssertEqual(r.uids, 10_000)
        XCTAssertEqual(r.notEnforced.count, 0)
        func lines(_ s: String) -> Int { r.text.split(separator: "\n").filter { $0.contains(s) }.count }
        XCTAssertEqual(lines("vmap @"), 3, "the links, then wwan's uids and tags (the only maps with elements), however many apps")
        XCTAssertEqual(lines(" : goto deny"), 10_000, "one element per denied uid on wwan and one per its app's tag, none elsewhere")
        XCTAssertEqual(r.elements, 2 + 5_000 + 10_000 + 5_000, "two links, 5,000 denied uids, each uid's tag, 5,000 denied tags")
        XCTAssertLessThan(took, .seconds(2), "built in \(took)")
        // A link appearing: the links map made again and compared with the rules in force, far cheaper than a build
        // (it was a build, and a byte-by-byte comparison of the megabytes after the link sets).
        // The fastest of three: a moment's preemption on a busy machine must not fail it.
        var linkTook = Duration.seconds(3600)
        var script: String?
        for _ in 0..<3 {
            let linkStart = ContinuousClock.now
            let appeared = r.withLinks([Links.eth, Links.wwan, makeLink(9, "wwan1", .wwan)])
            script = appeared.update(from: r)?.transactions.joined()
            linkTook = min(linkTook, ContinuousClock.now - linkStart)
        }
        XCTAssertEqual(script, "flush map inet netpermd links\nadd element inet netpermd links { \"eth0\" : goto kind_ethernet, "
                       + "\"wwan0\" : goto metered_wwan, \"wwan1\" : goto metered_wwan }\n")
        XCTAssertLessThan(linkTook * 10, took, "a link change took \(linkTook), a build \(took)")
    }

    func testMountinfo() {
        let hybrid = """
            25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
            33 25 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
            34 33 0:29 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
            35 33 0:30 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup cgroup rw,xattr,name=systemd
            """
        XCTAssertEqual(UnitCgroups.unifiedMountPoint(mountinfo: hybrid), "/sys/fs/cgroup/unified")
        let unified = "30 24 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
        XCTAssertEqual(UnitCgroups.unifiedMountPoint(mountinfo: unified), "/sys/fs/cgroup")
        // A bind mount of a subtree is not the hierarchy's root.
        XCTAssertNil(UnitCgroups.unifiedMountPoint(mountinfo: "40 24 0:26 /system.slice /mnt/x rw - cgroup2 cgroup2 rw\n"))
        XCTAssertEqual(UnitCgroups.unifiedMountPoint(mountinfo: "40 24 0:26 / /mnt/my\\040cg rw - cgroup2 cgroup2 rw\n"),
                       "/mnt/my cg")
        XCTAssertEqual(UnitCgroups.nftRoot(forMountPoint: "/sys/fs/cgroup"), "")
        XCTAssertEqual(UnitCgroups.nftRoot(forMountPoint: "/sys/fs/cgroup/unified"), "unified")
        XCTAssertEqual(UnitCgroups.nftRoot(forMountPoint: "/mnt/cg"), "../../../mnt/cg")
        XCTAssertTrue(UnitCgroups.isMatchedUnit("cron.service"))
        XCTAssertTrue(UnitCgroups.isMatchedUnit("session-2.scope"))
        XCTAssertFalse(UnitCgroups.isMatchedUnit("user@1000.service"), "users' own managers: their units are theirs")
        XCTAssertFalse(UnitCgroups.isMatchedUnit("cgroup.procs"))
        XCTAssertTrue(UnitCgroups.isUserManager("user@1000.service"))
        XCTAssertTrue(UnitCgroups.isUnit("user@1000.service"), "followed: its units appear below it")
    }
}
