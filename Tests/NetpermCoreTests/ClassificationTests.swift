// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Foundation
import NetpermCore
import NetpermHost
import NetpermIO
import NetpermPolicy
import NetpermProtocol
import XCTest

/// Classification of real-shaped devices: sysfs facts are read from fixture trees through the same `Sysfs`
/// reader the daemon uses, so a change in either the reader or the rules shows up here.
final class ClassificationTests: XCTestCase {
    // MARK: helpers

    /// The fixture trees beside this file, in the source tree: SwiftPM does not copy them (their symlinks loop).
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    private func fixtureRoot(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let root = Self.fixtures.appendingPathComponent("sysfs-\(name)")
        var isDir: ObjCBool = false
        XCTAssertTrue(FileManager.default.fileExists(atPath: root.path, isDirectory: &isDir) && isDir.boolValue,
                      "no fixture tree \(root.path)", file: file, line: line)
        return root.path
    }

    private func link(_ name: String, _ arphrd: UInt32, kind rtnlKind: String? = nil, index: Int32 = 2) -> LinkFacts {
        LinkFacts(index: index, name: name, arphrd: arphrd, rtnlKind: rtnlKind, adminUp: true, carrier: true,
                  operstate: "up")
    }

    /// Reads the fixture's facts and classifies; also checks the fixture's `type` file agrees with the ARPHRD
    /// the test claims, so fixture and LinkFacts cannot silently drift apart.
    private func classifyFixture(_ fixture: String, _ facts: LinkFacts, overrides: [InterfaceOverride] = [],
                                 file: StaticString = #filePath, line: UInt = #line) throws
        -> (SysfsFacts, Classification)
    {
        let root = try fixtureRoot(fixture, file: file, line: line)
        let typeFile = "\(root)/class/net/\(facts.name)/type"
        let typeText = try String(contentsOfFile: typeFile, encoding: .utf8)
        XCTAssertEqual(UInt32(typeText.trimmingCharacters(in: .whitespacesAndNewlines)), facts.arphrd,
                       "fixture \(typeFile) disagrees with the test's arphrd", file: file, line: line)
        let sysfs = Sysfs(root: root).facts(forInterface: facts.name)
        return (sysfs, Classifier.classify(facts, sysfs: sysfs, overrides: overrides))
    }

    private func override(_ glob: String, kind: LinkKind? = nil, metered: Bool? = nil) throws -> InterfaceOverride {
        InterfaceOverride(glob: try Glob(glob), kind: kind, metered: metered)
    }

    // MARK: sysfs reader on fixtures

    /// The reader must pick DEVTYPE out of the middle of uevent and see phy80211/wireless as present.
    func testSysfsReadsIwlwifiFacts() throws {
        let facts = Sysfs(root: try fixtureRoot("iwlwifi")).facts(forInterface: "wlp2s0")
        XCTAssertEqual(facts, SysfsFacts(devtype: "wlan", hasPhy80211: true, hasWireless: true, driver: "iwlwifi",
                                         bus: "pci"))
    }

    /// device/uevent says DEVTYPE=usb_interface; only the net device's own uevent may count. The driver and bus
    /// come from the parent device's symlinks, the vendor from the USB device above the interface.
    func testSysfsReadsNetDeviceUeventNotParentDevice() throws {
        let facts = Sysfs(root: try fixtureRoot("qmi_wwan")).facts(forInterface: "wwp0s20u4i4")
        XCTAssertEqual(facts, SysfsFacts(devtype: "wwan", hasPhy80211: false, hasWireless: false, driver: "qmi_wwan",
                                         bus: "usb", usbInterface: USBInterfaceClass(0xff, 0xff, 0xff), usbVendor: 0x2c7c))
    }

    /// A uevent without DEVTYPE (e1000e) gives nil, not an empty string.
    func testSysfsNoDevtype() throws {
        let facts = Sysfs(root: try fixtureRoot("e1000e")).facts(forInterface: "enp3s0")
        XCTAssertNil(facts.devtype)
        XCTAssertFalse(facts.hasPhy80211)
        XCTAssertFalse(facts.hasWireless)
    }

    /// A link that vanished from sysfs between the netlink event and the read yields empty facts, no crash.
    func testSysfsMissingInterface() throws {
        let facts = Sysfs(root: try fixtureRoot("e1000e")).facts(forInterface: "gone0")
        XCTAssertEqual(facts, SysfsFacts())
    }

    // MARK: built-in rules on real-shaped devices

    func testIwlwifiIsWifiByDevtype() throws {
        let (_, c) = try classifyFixture("iwlwifi", link("wlp2s0", ARPHRD.ether))
        XCTAssertEqual(c, Classification(kind: .wifi, by: "sysfs:devtype=wlan", metered: false))
    }

    /// Without DEVTYPE, the phy80211 entry alone identifies Wi-Fi (older drivers); it ranks above `wireless`.
    func testPhy80211WithoutDevtypeIsWifi() {
        let c = Classifier.classify(link("eth1", ARPHRD.ether), sysfs: SysfsFacts(hasPhy80211: true, hasWireless: true),
                                    overrides: [])
        XCTAssertEqual(c, Classification(kind: .wifi, by: "sysfs:phy80211", metered: false))
    }

    /// Wireless-extensions-only drivers have just the `wireless` dir.
    func testWirelessDirOnlyIsWifi() {
        let c = Classifier.classify(link("eth1", ARPHRD.ether), sysfs: SysfsFacts(hasWireless: true), overrides: [])
        XCTAssertEqual(c, Classification(kind: .wifi, by: "sysfs:wireless", metered: false))
    }

    /// qmi_wwan in raw-ip mode: DEVTYPE=wwan decides before ARPHRD_RAWIP; cellular is metered.
    func testQmiWwanRawIPIsWwan() throws {
        let root = try fixtureRoot("qmi_wwan")
        let rawIP = try String(contentsOfFile: "\(root)/class/net/wwp0s20u4i4/qmi/raw_ip", encoding: .utf8)
        XCTAssertEqual(rawIP, "Y\n", "fixture should model raw-ip mode like a real qmi_wwan device")
        let (_, c) = try classifyFixture("qmi_wwan", link("wwp0s20u4i4", ARPHRD.rawip))
        XCTAssertEqual(c, Classification(kind: .wwan, by: "sysfs:devtype=wwan", metered: true))
    }

    func testCdcMbimIsWwan() throws {
        let (_, c) = try classifyFixture("cdc_mbim", link("wwan0", ARPHRD.none))
        XCTAssertEqual(c, Classification(kind: .wwan, by: "sysfs:devtype=wwan", metered: true))
    }

    func testE1000eIsEthernet() throws {
        let (_, c) = try classifyFixture("e1000e", link("enp3s0", ARPHRD.ether))
        XCTAssertEqual(c, Classification(kind: .ethernet, by: "arphrd:ether", metered: false))
    }

    /// veth is ARPHRD_ETHER but virtual: it must not count as a wired network.
    func testVethIsOther() throws {
        let (_, c) = try classifyFixture("veth", link("veth0", ARPHRD.ether, kind: "veth"))
        XCTAssertEqual(c, Classification(kind: .other, by: "rtnl-kind:veth", metered: false))
    }

    /// tun is ARPHRD_NONE like a cdc_mbim modem; a VPN must not be reported as cellular.
    func testTunIsOtherNotWwan() throws {
        let (_, c) = try classifyFixture("tun", link("tun0", ARPHRD.none, kind: "tun"))
        XCTAssertEqual(c, Classification(kind: .other, by: "rtnl-kind:tun", metered: false))
    }

    /// WireGuard is the other common ARPHRD_NONE virtual link.
    func testWireguardIsOtherNotWwan() {
        let c = Classifier.classify(link("wg0", ARPHRD.none, kind: "wireguard"), sysfs: SysfsFacts(devtype: "wireguard"),
                                    overrides: [])
        XCTAssertEqual(c, Classification(kind: .other, by: "rtnl-kind:wireguard", metered: false))
    }

    /// Without an rtnl kind, ARPHRD_NONE / RAWIP alone means a modem (e.g. a WWAN-framework link without DEVTYPE).
    func testArphrdNoneAndRawIPWithoutKindAreWwan() {
        let none = Classifier.classify(link("mbim0", ARPHRD.none), sysfs: SysfsFacts(), overrides: [])
        XCTAssertEqual(none, Classification(kind: .wwan, by: "arphrd:none", metered: true))
        let raw = Classifier.classify(link("qmimux0", ARPHRD.rawip), sysfs: SysfsFacts(), overrides: [])
        XCTAssertEqual(raw, Classification(kind: .wwan, by: "arphrd:rawip", metered: true))
    }

    func testLoopback() throws {
        let (_, c) = try classifyFixture("loopback", link("lo", ARPHRD.loopback, index: 1))
        XCTAssertEqual(c, Classification(kind: .loopback, by: "arphrd:loopback", metered: false))
    }

    /// PPP (dial-up modems via pppd) is cellular even though ppp0 has DEVTYPE=ppp and rtnl kind "ppp".
    func testPPPIsWwan() throws {
        let (sysfs, c) = try classifyFixture("ppp", link("ppp0", ARPHRD.ppp, kind: "ppp"))
        XCTAssertEqual(sysfs.devtype, "ppp")
        XCTAssertEqual(c, Classification(kind: .wwan, by: "arphrd:ppp", metered: true))
    }

    /// When sysfs and ARPHRD say nothing known, the systemd naming prefixes wl/ww are the last hint.
    func testNamePrefixFallback() throws {
        let (_, wl) = try classifyFixture("unknown", link("wlx00c0ca000001", 801))
        XCTAssertEqual(wl, Classification(kind: .wifi, by: "name:wl", metered: false))
        let (_, ww) = try classifyFixture("unknown", link("wwx020000000001", 0xFFFF))
        XCTAssertEqual(ww, Classification(kind: .wwan, by: "name:ww", metered: true))
    }

    /// Neither a known type nor a known prefix: `other` via the fallback rule.
    func testFallbackIsOther() {
        let c = Classifier.classify(link("can0", 280), sysfs: SysfsFacts(), overrides: [])
        XCTAssertEqual(c, Classification(kind: .other, by: "fallback", metered: false))
    }

    /// The name prefix only applies after the ARPHRD rules: an ethernet-typed "wl" name stays ethernet.
    func testNamePrefixDoesNotBeatArphrdEther() {
        let c = Classifier.classify(link("wlan-usb", ARPHRD.ether), sysfs: SysfsFacts(), overrides: [])
        XCTAssertEqual(c, Classification(kind: .ethernet, by: "arphrd:ether", metered: false))
    }

    // MARK: [Interface] overrides

    /// Kind= alone: the kind and `by` come from config, metered follows the new kind's default.
    func testOverrideKindOnly() throws {
        let (_, c) = try classifyFixture("cdc_mbim", link("wwan0", ARPHRD.none),
                                         overrides: [try override("wwan0", kind: .ethernet)])
        XCTAssertEqual(c, Classification(kind: .ethernet, by: "config:[Interface wwan0]", metered: false))
        let (_, toWwan) = try classifyFixture("e1000e", link("enp3s0", ARPHRD.ether),
                                              overrides: [try override("enp*", kind: .wwan)])
        XCTAssertEqual(toWwan, Classification(kind: .wwan, by: "config:[Interface enp*]", metered: true))
    }

    /// Metered= alone keeps the built-in kind and the rule that decided it.
    func testOverrideMeteredOnly() throws {
        let (_, c) = try classifyFixture("cdc_mbim", link("wwan0", ARPHRD.none),
                                         overrides: [try override("wwan*", metered: false)])
        XCTAssertEqual(c, Classification(kind: .wwan, by: "sysfs:devtype=wwan", metered: false))
        let (_, tether) = try classifyFixture("e1000e", link("enp3s0", ARPHRD.ether),
                                              overrides: [try override("enp3s0", metered: true)])
        XCTAssertEqual(tether, Classification(kind: .ethernet, by: "arphrd:ether", metered: true))
    }

    /// Both keys in one section: explicit Metered= beats the kind's default.
    func testOverrideKindAndMetered() throws {
        let (_, c) = try classifyFixture("iwlwifi", link("wlp2s0", ARPHRD.ether),
                                         overrides: [try override("wlp2s0", kind: .wwan, metered: false)])
        XCTAssertEqual(c, Classification(kind: .wwan, by: "config:[Interface wlp2s0]", metered: false))
    }

    /// Later sections override earlier ones, in both orders.
    func testLaterOverrideWins() throws {
        let general = try override("ww*", kind: .ethernet)
        let specific = try override("wwan0", kind: .wifi)
        let (_, a) = try classifyFixture("cdc_mbim", link("wwan0", ARPHRD.none), overrides: [general, specific])
        XCTAssertEqual(a, Classification(kind: .wifi, by: "config:[Interface wwan0]", metered: false))
        let (_, b) = try classifyFixture("cdc_mbim", link("wwan0", ARPHRD.none), overrides: [specific, general])
        XCTAssertEqual(b, Classification(kind: .ethernet, by: "config:[Interface ww*]", metered: false))
    }

    /// A later Metered=-only section keeps an earlier section's Kind= (and its `by`).
    func testLaterMeteredKeepsEarlierKind() throws {
        let (_, c) = try classifyFixture("e1000e", link("enp3s0", ARPHRD.ether),
                                         overrides: [try override("enp3s0", kind: .wwan),
                                                     try override("enp*", metered: false)])
        XCTAssertEqual(c, Classification(kind: .wwan, by: "config:[Interface enp3s0]", metered: false))
    }

    /// A section whose glob does not match leaves the built-in result untouched.
    func testOverrideGlobNotMatching() throws {
        let overrides = [try override("eth*", kind: .wifi, metered: true), try override("wwan0?", kind: .other)]
        let (_, c) = try classifyFixture("cdc_mbim", link("wwan0", ARPHRD.none), overrides: overrides)
        XCTAssertEqual(c, Classification(kind: .wwan, by: "sysfs:devtype=wwan", metered: true))
    }
}

/// The core cannot import C headers, so it carries the few ARPHRD values its rules need: they must be the
/// kernel's.
final class KernelConstantsTests: XCTestCase {
    func testTheCoresARPHRDValuesAreTheHeaders() {
        XCTAssertEqual(ARPHRD.ether, UInt32(NP_ARPHRD_ETHER))
        XCTAssertEqual(ARPHRD.ppp, UInt32(NP_ARPHRD_PPP))
        XCTAssertEqual(ARPHRD.rawip, UInt32(NP_ARPHRD_RAWIP))
        XCTAssertEqual(ARPHRD.loopback, UInt32(NP_ARPHRD_LOOPBACK))
        XCTAssertEqual(ARPHRD.none, UInt32(NP_ARPHRD_NONE))
    }
}
