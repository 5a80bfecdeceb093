// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol
import XCTest

/// NetworkManager's metered flag and ModemManager's roaming as sources of a link's classification, and `roaming` as
/// a dimension of the policy on top of the kind (docs/CLASSIFICATION.md "Sources", docs/POLICY.md "Roaming").
final class NetworkSourcesTests: XCTestCase {
    let wlan = LinkFacts(index: 3, name: "wlan0", arphrd: ARPHRD.ether, rtnlKind: nil, adminUp: true, carrier: true,
                         operstate: "up")
    let wwan = LinkFacts(index: 4, name: "wwan0", arphrd: ARPHRD.none, rtnlKind: nil, adminUp: true, carrier: true,
                         operstate: "up")
    let wifiSysfs = SysfsFacts(devtype: "wlan")

    func nm(_ metered: NetworkManagerDevice.Metered, type: UInt32 = 2) -> NetworkManagerDevice {
        NetworkManagerDevice(metered: metered, deviceType: type, connectionID: "Pixel", connectionType: "802-11-wireless")
    }

    // MARK: Sources, in order

    func testNetworkManagerComesAfterTheConfigAndBeforeTheGuesses() throws {
        func metered(_ m: NetworkManagerDevice.Metered?, sysfs: SysfsFacts? = nil, config: Bool? = nil,
                     link: LinkFacts? = nil) -> (Bool, MeteredSource) {
            let overrides = config.map { [InterfaceOverride(glob: try! Glob("*"), kind: nil, metered: $0)] } ?? []
            let c = Classifier.classify(link ?? wlan, sysfs: sysfs ?? wifiSysfs, overrides: overrides, manager: m.map { nm($0) })
            return (c.metered, c.meteredBy)
        }
        XCTAssertTrue(metered(.guessYes) == (true, .networkManager), "a phone's hotspot NetworkManager guessed")
        XCTAssertTrue(metered(.yes) == (true, .networkManager))
        XCTAssertTrue(metered(.no) == (false, .networkManager))
        XCTAssertTrue(metered(.guessNo) == (false, .networkManager))
        XCTAssertTrue(metered(.unknown) == (false, .default), "unknown: the built-in guesses decide")
        XCTAssertTrue(metered(nil) == (false, .default), "no NetworkManager")
        XCTAssertTrue(metered(.yes, config: false) == (false, .config), "the person's word in the config first")
        XCTAssertTrue(metered(.no, sysfs: SysfsFacts(devtype: "wlan", dhcpAndroidMetered: true)) == (false, .networkManager),
                      "NetworkManager's word beats the DHCP option netpermd reads itself")
        XCTAssertTrue(metered(.unknown, sysfs: SysfsFacts(devtype: "wlan", dhcpAndroidMetered: true)) == (true, .dhcp))
        XCTAssertTrue(metered(.guessNo, sysfs: SysfsFacts(devtype: "wwan"), link: wwan) == (false, .networkManager),
                      "a modem the person marked unmetered")
        XCTAssertTrue(metered(.unknown, sysfs: SysfsFacts(devtype: "wwan"), link: wwan) == (true, .kind))
        // NetworkManager's device type never changes the kind.
        let c = Classifier.classify(wlan, sysfs: SysfsFacts(), overrides: [], manager: nm(.unknown, type: 8))
        XCTAssertEqual(c.kind, .ethernet)
        XCTAssertEqual(NetworkManagerDevice.Metered(dbus: 3), .guessYes)
        XCTAssertEqual(NetworkManagerDevice.Metered(dbus: 99), .unknown)
        XCTAssertEqual(NetworkManagerDevice.kind(deviceType: 8), .wwan)
        XCTAssertNil(NetworkManagerDevice.kind(deviceType: 13), "a bridge says nothing of the kind")
    }

    func testRoamingFromModemManagerUnlessTheConfigSays() throws {
        func roaming(_ state: UInt32?, config: Bool? = nil, network: Bool? = nil) -> (Bool?, RoamingSource?) {
            let overrides = config.map { [InterfaceOverride(glob: try! Glob("wwan*"), kind: nil, metered: nil, roaming: $0)] } ?? []
            let c = Classifier.classify(wwan, sysfs: SysfsFacts(devtype: "wwan"), overrides: overrides,
                                        modem: state.map(ModemRegistration.init(dbus:)))
            return (c.roaming, c.roamingBy)
        }
        XCTAssertTrue(roaming(5) == (true, .modemManager))
        XCTAssertTrue(roaming(7) == (true, .modemManager), "roaming, SMS only")
        XCTAssertTrue(roaming(10) == (true, .modemManager))
        XCTAssertTrue(roaming(1) == (false, .modemManager))
        XCTAssertTrue(roaming(6) == (false, .modemManager))
        for searching: UInt32 in [0, 2, 3, 4, 8, 11, 42] { XCTAssertTrue(roaming(searching) == (nil, nil), "\(searching)") }
        XCTAssertTrue(roaming(nil) == (nil, nil), "no ModemManager")
        XCTAssertTrue(roaming(nil, config: true) == (true, .config), "a USB stick ModemManager does not drive")
        XCTAssertTrue(roaming(5, config: false) == (false, .config), "the config first")
        // [Network] says it for a Wi-Fi link while associated (a travel router's network).
        let travel = Classifier.classify(wlan, sysfs: wifiSysfs, overrides: [], wifi: WifiFacts(ssid: Array("Abroad".utf8)),
                                         networks: [NetworkOverride(glob: try Glob("Abroad"), kind: nil, metered: nil, roaming: true)])
        XCTAssertEqual(travel.roaming, true)
        XCTAssertEqual(travel.roamingBy, .config)
    }

    func testATunnelOverARoamingModemRoams() {
        let tun = LinkFacts(index: 9, name: "tun0", arphrd: ARPHRD.none, rtnlKind: "tun", adminUp: true, carrier: true,
                            operstate: "up")
        var snap = KernelSnapshot(links: [wwan, tun], defaultRoutes: [DefaultRouteFacts(index: 9, family: .ipv4, metric: 50),
                                                                      DefaultRouteFacts(index: 4, family: .ipv4, metric: 700)],
                                  egress: [.ipv4: .link(9)], sysfs: [4: SysfsFacts(devtype: "wwan")])
        snap.modems = ["wwan0": .roaming]
        let n = NetworkState(snapshot: snap) { f in
            Classifier.classify(f, sysfs: snap.sysfs[f.index] ?? SysfsFacts(), overrides: [], modem: snap.modems[f.name])
        }
        XCTAssertEqual(n.link(named: "tun0")?.over, "wwan0")
        XCTAssertEqual(n.link(named: "tun0")?.roaming, true)
        XCTAssertEqual(n.link(named: "tun0")?.roamingBy, .modemManager)
    }

    // MARK: Roaming as a dimension

    func roamingLink(_ roaming: Bool?) -> Link {
        var l = makeLink(4, "wwan0", .wwan, metric: 700)
        l.roaming = roaming
        l.roamingBy = roaming == nil ? nil : .modemManager
        return l
    }

    func testRoamingDenyKeepsAnAppOffARoamingLinkOnly() {
        let p = PermissionSet(wifi: .allow, wwan: .allow, ethernet: .allow, other: .allow, roaming: .deny)
        func verdict(_ roaming: Bool?) -> Verdict {
            Verdict.compute(app: "maps", matchedBy: .name, permissions: p,
                            network: NetworkState(routedLinks: [roamingLink(roaming)]), ready: true)
        }
        XCTAssertEqual(verdict(false).reason, .ok)
        XCTAssertEqual(verdict(nil).reason, .ok, "unknown is judged as home")
        let abroad = verdict(true)
        XCTAssertEqual(abroad.reason, .denied)
        XCTAssertEqual(abroad.kinds.denied, [.roaming])
        XCTAssertEqual(abroad.message, "maps may not use roaming links: its policy denies it")
        XCTAssertEqual(abroad.json["via"], .null)
        XCTAssertEqual(abroad.json["egress"]?["ipv4"]?["roaming"], true)
        XCTAssertEqual(abroad.json["permissions"]?["roaming"], "deny")
        // ask: pending, and the deny button leaves the rest.
        var ask = p
        ask.roaming = .ask
        let pending = Verdict.compute(app: "maps", matchedBy: .name, permissions: ask,
                                      network: NetworkState(routedLinks: [roamingLink(true)]), ready: true)
        XCTAssertEqual(pending.reason, .awaitingDecision)
        XCTAssertEqual(pending.kinds.pending, [.roaming])
        XCTAssertEqual(PromptChoice.deny.label(kinds: [.roaming]), "Not while roaming")
        XCTAssertEqual(PromptChoice.deny.label(kinds: [.wwan, .metered, .roaming]), "Wi-Fi only")
        XCTAssertEqual(PromptChoice.deny.label(kinds: [.metered]), "Unmetered only")
    }

    func testRoamingInThePolicy() throws {
        let c = try parsePolicy("""
            [Defaults]
            Roaming=ask
            [App maps]
            User=1000
            Roaming=deny
            [App backup]
            User=1001
            [Interface wwan-stick*]
            Roaming=yes
            """)
        XCTAssertEqual(c.permissions(for: c.app(named: "maps")!).roaming, .deny)
        XCTAssertEqual(c.permissions(for: c.app(named: "backup")!).roaming, .ask, "[Defaults]")
        XCTAssertEqual(c.interfaces.first?.roaming, true)
        XCTAssertEqual(try parsePolicy("[App a]\nUser=5\n").permissions(for: try parsePolicy("[App a]\nUser=5\n").apps[0]).roaming,
                       .allow, "nothing changes for a policy without Roaming=")
        let bad = Config.parse(files: [(path: "/p", text: "[Interface x]\nRoaming=often\n")], accounts: FakeAccounts())
        XCTAssertEqual(bad.problems.map(\.description), ["/p:2: [Interface x]: bad value 'often' for Roaming= (expected yes or no)"])
    }

    // MARK: The engine

    let blockPolicy = """
        [Enforcement]
        Mode=block
        [App maps]
        User=1000
        WWAN=allow
        Roaming=deny
        """

    func testALinkTurningMeteredOrRoamingChangesItsChainInTheRules() throws {
        let h = EngineHarness(policy: blockPolicy, links: [Links.lo, Links.wlan, Links.wwan])
        XCTAssertTrue(h.rules.last?.contains(#""wlan0" : goto kind_wifi"#) == true, h.rules.last ?? "")
        XCTAssertTrue(h.rules.last?.contains(#""wwan0" : goto metered_wwan"#) == true)
        let n = h.scripts.count
        // NetworkManager says the Wi-Fi is metered: same kind, another chain.
        h.setLinks([Links.lo, Links.wlan, Links.wwan], managed: ["wlan0": nm(.guessYes)])
        XCTAssertEqual(h.scripts.count, n + 1, "the links map changes when only metered does")
        XCTAssertTrue(h.scripts.last?.contains(#""wlan0" : goto metered_wifi"#) == true, h.scripts.last ?? "")
        XCTAssertEqual(h.request(h.connect(), "LINKS")["links"]?.arrayValue?[1]["metered_by"], "networkmanager")
        XCTAssertEqual(h.request(h.connect(), "LINKS")["links"]?.arrayValue?[1]["connection"],
                       .object([("id", "Pixel"), ("type", "802-11-wireless")]))
        // ModemManager says the modem roams: its chain checks Roaming= first, and maps is denied.
        h.setLinks([Links.lo, Links.wlan, Links.wwan], managed: ["wlan0": nm(.guessYes)], modems: ["wwan0": .roaming])
        XCTAssertTrue(h.scripts.last?.contains(#""wwan0" : goto roaming_metered_wwan"#) == true, h.scripts.last ?? "")
        XCTAssertTrue(h.rules.last?.contains("uid_roaming {\n\t\ttype uid : verdict\n\t\telements = { 1000 : goto deny }") == true,
                      h.rules.last ?? "")
        let q = h.request(h.connect(), "QUERY maps")
        XCTAssertEqual(q["denied_kinds"], .array(["roaming"]))
        XCTAssertEqual(h.logged(containing: "wwan0: roaming unknown -> true (modemmanager)").count, 1)
        // Home again.
        h.setLinks([Links.lo, Links.wlan, Links.wwan], modems: ["wwan0": .home])
        XCTAssertTrue(h.scripts.last?.contains(#""wwan0" : goto metered_wwan"#) == true, h.scripts.last ?? "")
        XCTAssertEqual(h.request(h.connect(), "QUERY maps")["denied_kinds"], .array([]))
    }

    func testARoamingDecisionIsStoredAndApplied() {
        let h = EngineHarness(policy: "[App maps]\nUser=1000\nWWAN=allow\nRoaming=ask\n", links: [Links.lo, Links.wwan],
                              agents: true)
        h.setLinks([Links.lo, Links.wwan], modems: ["wwan0": .roaming])
        XCTAssertEqual(h.request(h.connect(), "QUERY maps")["pending_kinds"], .array(["roaming"]))
        let r = h.request(h.connect(), "DECIDE maps roaming allow")
        XCTAssertEqual(r["sources"]?["roaming"], "decision")
        XCTAssertEqual(r["available"], true)
        XCTAssertEqual(h.persisted.last?.decision("maps", .roaming).map(\.0), .allow)
        XCTAssertTrue(h.persisted.last?.encoded().contains("Roaming=allow") == true, h.persisted.last?.encoded() ?? "")
        XCTAssertEqual(h.request(h.connect(), "FORGET maps roaming")["ok"], true)
        XCTAssertEqual(h.request(h.connect(), "QUERY maps")["pending_kinds"], .array(["roaming"]))
    }

    func testADisagreementOfKindIsLoggedOnce() {
        let h = EngineHarness(policy: blockPolicy, links: [Links.lo, Links.eth])
        let modem = NetworkManagerDevice(metered: .unknown, deviceType: 8)
        h.setLinks([Links.lo, Links.eth], managed: ["eth0": modem])
        h.setLinks([Links.lo, Links.eth], managed: ["eth0": NetworkManagerDevice(metered: .no, deviceType: 8)])
        XCTAssertEqual(h.logged(containing: "eth0: NetworkManager takes it for wwan (device type 8), netpermd for ethernet").count, 1)
        XCTAssertEqual(h.request(h.connect(), "LINKS")["links"]?.arrayValue?[1]["kind"], "ethernet", "the kernel's facts stand")
    }

    func testRoamingIsCountedApart() {
        let home = UsageClass(kind: .wwan, metered: true), abroad = UsageClass(kind: .wwan, metered: true, roaming: true)
        XCTAssertEqual(abroad.name, "wwan_metered_roaming")
        XCTAssertEqual(UsageClass(name: "wwan_metered_roaming"), abroad)
        XCTAssertEqual(UsageClass.all.count, 16)
        var t = UsageTotals()
        t.add(home, .sent, bytes: 100, packets: 1)
        t.add(abroad, .received, bytes: 5000, packets: 4)
        XCTAssertEqual(t.roamingBytes, 5000)
        XCTAssertEqual(t.meteredBytes, 5100, "a metered budget counts both")
        XCTAssertEqual(UsageClass(link: roamingLink(true)), abroad)
        XCTAssertEqual(UsageClass(link: roamingLink(nil)), home)
    }

    func testSteeringKeepsARoamingLinkFromAnAppDeniedIt() {
        let everything = SteeringPlan.Allowance(PermissionSet(wifi: .allow, wwan: .allow, ethernet: .allow, other: .allow))
        XCTAssertEqual(everything, .everything, "no Roaming=: the marks and tables of before")
        let home = SteeringPlan.Allowance(PermissionSet(wifi: .allow, wwan: .allow, ethernet: .allow, other: .allow, roaming: .deny))
        XCTAssertTrue(home.allows(roamingLink(false)))
        XCTAssertFalse(home.allows(roamingLink(true)))
        XCTAssertTrue(SteeringPlan.isSteeringTable(home.table))
        XCTAssertTrue(everything.allows(roamingLink(true)))
    }
}
