// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import NetpermCore
import NetpermHost
import NetpermPolicy
import NetpermProtocol
import XCTest

/// One real device per fixture tree (Fixtures/sysfs-NAME, shaped like /sys: class/net/IF/device links into
/// devices/, the parent device's driver and subsystem links, the USB interface and device files; /proc and /run pieces beside
/// them for PPP and DHCP). Each test reads the tree through the daemon's own reader and checks the kind, the rule
/// that decided, and metered with its source.
final class DeviceClassificationTests: XCTestCase {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    private func path(_ name: String) -> String { Self.fixtures.appendingPathComponent(name).path }

    /// Reads the fixture with `Sysfs` (ifindex and ARPHRD from the tree's own files) and classifies it.
    private func classify(_ fixture: String, _ ifname: String, kind rtnlKind: String? = nil,
                          run: String? = nil, overrides: [InterfaceOverride] = [],
                          file: StaticString = #filePath, line: UInt = #line) throws -> (SysfsFacts, Classification) {
        let root = path("sysfs-\(fixture)")
        let dir = "\(root)/class/net/\(ifname)"
        func number(_ f: String) throws -> String {
            try String(contentsOfFile: "\(dir)/\(f)", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let arphrd = try XCTUnwrap(UInt32(try number("type")), file: file, line: line)
        let index = try XCTUnwrap(Int32(try number("ifindex")), file: file, line: line)
        let reader = Sysfs(root: root, proc: "\(root)/proc", run: run.map(path) ?? "\(root)/run")
        let sysfs = reader.facts(forInterface: ifname, index: index)
        let facts = LinkFacts(index: index, name: ifname, arphrd: arphrd, rtnlKind: rtnlKind, adminUp: true,
                              carrier: true, operstate: "up")
        return (sysfs, Classifier.classify(facts, sysfs: sysfs, overrides: overrides))
    }

    private func expect(_ kind: LinkKind, _ by: String, metered: Bool, _ source: MeteredSource) -> Classification {
        Classification(kind: kind, by: by, metered: metered, meteredBy: source)
    }

    // MARK: Wi-Fi

    func testIntelIwlwifi() throws {
        let (s, c) = try classify("iwlwifi", "wlp2s0")
        XCTAssertEqual(s.driver, "iwlwifi")
        XCTAssertEqual(c, expect(.wifi, "sysfs:devtype=wlan", metered: false, .default))
    }

    func testBroadcomBrcmfmacOnSDIO() throws {
        let (s, c) = try classify("brcmfmac", "wlan0")
        XCTAssertEqual(s.bus, "sdio")
        XCTAssertEqual(s.driver, "brcmfmac")
        XCTAssertEqual(c, expect(.wifi, "sysfs:devtype=wlan", metered: false, .default))
    }

    func testMediaTekMt76OnUSB() throws {
        let (s, c) = try classify("mt76", "wlx00c0cab3a1f2")
        XCTAssertEqual(s.bus, "usb")
        XCTAssertEqual(s.usbVendor, 0x0e8d)
        XCTAssertTrue(s.hasPhy80211)
        XCTAssertEqual(c, expect(.wifi, "sysfs:devtype=wlan", metered: false, .default))
    }

    /// The driver rule is what is left when a Wi-Fi driver's link shows neither DEVTYPE nor phy80211.
    func testWifiDriverWithoutDevtype() throws {
        var (s, _) = try classify("mt76", "wlx00c0cab3a1f2")
        s.devtype = nil; s.hasPhy80211 = false; s.hasWireless = false
        let facts = LinkFacts(index: 4, name: "eth1", arphrd: ARPHRD.ether, rtnlKind: nil, adminUp: true, carrier: true,
                              operstate: "up")
        XCTAssertEqual(Classifier.classify(facts, sysfs: s, overrides: []),
                       expect(.wifi, "driver:mt7921u", metered: false, .default))
    }

    // MARK: cellular

    func testQuectelOnQmiWwanRawIP() throws {
        let (s, c) = try classify("qmi_wwan", "wwp0s20u4i4")
        XCTAssertEqual(s.usbVendor, 0x2c7c)
        XCTAssertEqual(c, expect(.wwan, "sysfs:devtype=wwan", metered: true, .kind))
    }

    func testCdcMbimModem() throws {
        let (s, c) = try classify("cdc_mbim", "wwan0")
        XCTAssertEqual(s.usbInterface, USBInterfaceClass(0x02, 0x0e, 0x00))
        XCTAssertEqual(c, expect(.wwan, "sysfs:devtype=wwan", metered: true, .kind))
    }

    /// mhi_net sets no DEVTYPE: its driver decides, before the `wwan` name and the raw-ip type would.
    func testPCIeModemOnMhiNet() throws {
        let (s, c) = try classify("mhi_net", "wwan0")
        XCTAssertNil(s.devtype)
        XCTAssertEqual(s.bus, "mhi")
        XCTAssertEqual(c, expect(.wwan, "driver:mhi_net", metered: true, .kind))
    }

    /// mtk_t7xx links hang off the WWAN framework's class device: no driver of their own, DEVTYPE=wwan.
    func testT7xx() throws {
        let (s, c) = try classify("t7xx", "wwan0", kind: "wwan")
        XCTAssertEqual(s.bus, "wwan")
        XCTAssertNil(s.driver)
        XCTAssertEqual(c, expect(.wwan, "sysfs:devtype=wwan", metered: true, .kind))
    }

    /// Modem names decide when nothing else does (an rmnet link on a Qualcomm SoC has kind rmnet, raw-ip).
    func testModemNames() {
        for (name, prefix) in [("rmnet_data0", "rmnet"), ("ccmni0", "ccmni"), ("wwan1", "wwan")] {
            let facts = LinkFacts(index: 9, name: name, arphrd: ARPHRD.rawip, rtnlKind: name.hasPrefix("rmnet") ? "rmnet" : nil,
                                  adminUp: true, carrier: true, operstate: "up")
            XCTAssertEqual(Classifier.classify(facts, sysfs: SysfsFacts(), overrides: []),
                           expect(.wwan, "name:\(prefix)", metered: true, .kind), name)
        }
        // A virtual link named like a modem is still virtual.
        let veth = LinkFacts(index: 9, name: "wwan-test", arphrd: ARPHRD.ether, rtnlKind: "veth", adminUp: true,
                             carrier: true, operstate: "up")
        XCTAssertEqual(Classifier.classify(veth, sysfs: SysfsFacts(), overrides: []).by, "rtnl-kind:veth")
    }

    // MARK: tethering

    func testAndroidUSBTetheringRndis() throws {
        let (s, c) = try classify("rndis_host", "enp0s20f0u1")
        XCTAssertEqual(s.usbInterface, USBInterfaceClass(0xef, 0x04, 0x01))
        XCTAssertEqual(c, expect(.wwan, "driver:rndis_host", metered: true, .tethering))
    }

    /// RNDIS bound by another driver than rndis_host still means a phone.
    func testRndisClassWithOtherDriver() throws {
        var (s, _) = try classify("rndis_host", "enp0s20f0u1")
        s.driver = "cdc_ether"
        let facts = LinkFacts(index: 9, name: "usb0", arphrd: ARPHRD.ether, rtnlKind: nil, adminUp: true, carrier: true,
                              operstate: "up")
        XCTAssertEqual(Classifier.classify(facts, sysfs: s, overrides: []),
                       expect(.wwan, "usb:rndis", metered: true, .tethering))
    }

    func testAndroidUSBTetheringNcm() throws {
        let (s, c) = try classify("cdc_ncm", "enp0s20f0u1")
        XCTAssertEqual(s.driver, "cdc_ncm")
        XCTAssertEqual(s.usbVendor, 0x18d1)
        XCTAssertEqual(c, expect(.wwan, "usb:vendor=google", metered: true, .tethering))
    }

    /// The same class and driver from a dock's NIC vendor is a wired network.
    func testUSBDockOnCdcNcmIsEthernet() throws {
        let (s, c) = try classify("cdc_ncm_dock", "enp0s20f0u5")
        XCTAssertEqual(s.driver, "cdc_ncm")
        XCTAssertEqual(c, expect(.ethernet, "arphrd:ether", metered: false, .default))
    }

    func testHuaweiHiLink() throws {
        let (s, c) = try classify("hilink", "enp0s20f0u3")
        XCTAssertEqual(s.usbVendor, 0x12d1)
        XCTAssertEqual(c, expect(.wwan, "usb:hilink", metered: true, .tethering))
    }

    func testIPhoneIpheth() throws {
        let (_, c) = try classify("ipheth", "enp0s20f0u2c4i2")
        XCTAssertEqual(c, expect(.wwan, "driver:ipheth", metered: true, .tethering))
    }

    func testBluetoothPAN() throws {
        let (s, c) = try classify("bnep", "bnep0")
        XCTAssertEqual(s.devtype, "bluetooth")
        XCTAssertEqual(c, expect(.wwan, "sysfs:devtype=bluetooth", metered: true, .tethering))
    }

    // MARK: wired

    func testRealtekR8169() throws {
        let (s, c) = try classify("r8169", "enp2s0")
        XCTAssertEqual(s.driver, "r8169")
        XCTAssertEqual(s.bus, "pci")
        XCTAssertNil(s.usbInterface, "USB files are read only for USB devices")
        XCTAssertEqual(c, expect(.ethernet, "arphrd:ether", metered: false, .default))
    }

    // MARK: PPP

    func testPPPoEOnWiredNIC() throws {
        let (s, c) = try classify("pppoe", "ppp0", kind: "ppp")
        XCTAssertEqual(s.pppChannel, .pppoe(device: "enp2s0"))
        XCTAssertEqual(c, expect(.ethernet, "ppp:pppoe", metered: false, .default))
        let (_, nic) = try classify("pppoe", "enp2s0")
        XCTAssertEqual(nic, expect(.ethernet, "arphrd:ether", metered: false, .default))
    }

    func testPPPOverModemTTY() throws {
        let (s, c) = try classify("ppp_tty", "ppp0", kind: "ppp")
        XCTAssertEqual(s.pppChannel, .tty("/dev/ttyUSB0"))
        XCTAssertEqual(c, expect(.wwan, "ppp:tty", metered: true, .kind))
    }

    /// L2TP and PPTP are tunnels over an IP link, not cellular; an unknown channel stays wwan.
    func testPPPTunnelsAndUnknown() {
        let ppp = LinkFacts(index: 9, name: "ppp1", arphrd: ARPHRD.ppp, rtnlKind: "ppp", adminUp: true, carrier: true,
                            operstate: "up")
        XCTAssertEqual(Classifier.classify(ppp, sysfs: SysfsFacts(pppChannel: .l2tp), overrides: []),
                       expect(.other, "ppp:l2tp", metered: false, .default))
        XCTAssertEqual(Classifier.classify(ppp, sysfs: SysfsFacts(pppChannel: .pty), overrides: []),
                       expect(.other, "ppp:pty", metered: false, .default))
        XCTAssertEqual(Classifier.classify(ppp, sysfs: SysfsFacts(), overrides: []),
                       expect(.wwan, "arphrd:ppp", metered: true, .kind))
    }

    // MARK: tunnels

    func testWireGuard() throws {
        let (_, c) = try classify("wireguard", "wg0", kind: "wireguard")
        XCTAssertEqual(c, expect(.other, "rtnl-kind:wireguard", metered: false, .default))
    }

    func testTun() throws {
        let root = path("sysfs-tun")
        let sysfs = Sysfs(root: root).facts(forInterface: "tun0", index: 8)
        let facts = LinkFacts(index: 8, name: "tun0", arphrd: ARPHRD.none, rtnlKind: "tun", adminUp: true,
                              carrier: true, operstate: "unknown")
        XCTAssertEqual(Classifier.classify(facts, sysfs: sysfs, overrides: []),
                       expect(.other, "rtnl-kind:tun", metered: false, .default))
    }

    func testOpenVPNDCO() throws {
        let (_, c) = try classify("ovpn", "tun0", kind: "ovpn")
        XCTAssertEqual(c, expect(.other, "rtnl-kind:ovpn", metered: false, .default))
    }

    /// Kinds that were missing: ARPHRD none/raw-ip ones were wwan, ARPHRD ether ones ethernet.
    func testTunnelKindsAreOther() {
        for (kind, arphrd) in [("ovpn-dco", ARPHRD.none), ("bareudp", ARPHRD.none), ("amt", ARPHRD.none),
                               ("gtp", ARPHRD.none), ("ipvtap", ARPHRD.ether), ("ip6gretap", ARPHRD.ether),
                               ("erspan", ARPHRD.ether), ("ip6erspan", ARPHRD.ether), ("openvswitch", ARPHRD.ether)] {
            let facts = LinkFacts(index: 9, name: "x0", arphrd: arphrd, rtnlKind: kind, adminUp: true, carrier: true,
                                  operstate: "up")
            XCTAssertEqual(Classifier.classify(facts, sysfs: SysfsFacts(), overrides: []),
                           expect(.other, "rtnl-kind:\(kind)", metered: false, .default), kind)
        }
        XCTAssertFalse(Classifier.virtualKinds.contains("tap"), "taps report kind tun; a tap entry never matches")
    }

    // MARK: metered from DHCP and config

    /// A Wi-Fi link whose lease (as systemd-networkd recorded it) carries ANDROID_METERED: a phone's hotspot.
    func testAndroidHotspotLeaseIsMeteredByDHCP() throws {
        let (s, c) = try classify("iwlwifi", "wlp2s0", run: "run-android-hotspot")
        XCTAssertTrue(s.dhcpAndroidMetered)
        XCTAssertEqual(c, expect(.wifi, "sysfs:devtype=wlan", metered: true, .dhcp))
        let (home, h) = try classify("iwlwifi", "wlp2s0", run: "run-home-wifi")
        XCTAssertFalse(home.dhcpAndroidMetered)
        XCTAssertEqual(h, expect(.wifi, "sysfs:devtype=wlan", metered: false, .default))
    }

    /// Without the ifindex the lease is not looked up; a lease of another link does not count.
    func testLeaseIsPerIfindex() throws {
        let reader = Sysfs(root: path("sysfs-iwlwifi"), run: path("run-android-hotspot"))
        XCTAssertFalse(reader.facts(forInterface: "wlp2s0").dhcpAndroidMetered)
        XCTAssertFalse(reader.facts(forInterface: "wlp2s0", index: 4).dhcpAndroidMetered)
        XCTAssertTrue(reader.facts(forInterface: "wlp2s0", index: 3).dhcpAndroidMetered)
    }

    /// Metered= in config wins either way, over tethering, kind and DHCP; Kind= drops tethering.
    func testConfigMeteredWinsEitherWay() throws {
        let no = InterfaceOverride(glob: try Glob("enp0s20f0u*"), kind: nil, metered: false)
        let (_, tether) = try classify("rndis_host", "enp0s20f0u1", overrides: [no])
        XCTAssertEqual(tether, expect(.wwan, "driver:rndis_host", metered: false, .config))
        let yes = InterfaceOverride(glob: try Glob("enp2s0"), kind: nil, metered: true)
        let (_, wired) = try classify("r8169", "enp2s0", overrides: [yes])
        XCTAssertEqual(wired, expect(.ethernet, "arphrd:ether", metered: true, .config))
        let unmetered = InterfaceOverride(glob: try Glob("wlp2s0"), kind: nil, metered: false)
        let (_, hotspot) = try classify("iwlwifi", "wlp2s0", run: "run-android-hotspot", overrides: [unmetered])
        XCTAssertEqual(hotspot, expect(.wifi, "sysfs:devtype=wlan", metered: false, .config))
        let kind = InterfaceOverride(glob: try Glob("enp0s20f0u1"), kind: .ethernet, metered: nil)
        let (_, asWired) = try classify("rndis_host", "enp0s20f0u1", overrides: [kind])
        XCTAssertEqual(asWired, expect(.ethernet, "config:[Interface enp0s20f0u1]", metered: false, .default))
    }

    /// The trees work from any checkout: every link inside them is relative (only /proc's fd links name /dev).
    func testFixtureSymlinksAreRelative() throws {
        let fm = FileManager.default
        var checked = 0
        for name in try fm.contentsOfDirectory(atPath: Self.fixtures.path) {
            guard let e = fm.enumerator(atPath: path(name)) else { continue }
            while let rel = e.nextObject() as? String {
                let full = path(name) + "/" + rel
                guard let target = try? fm.destinationOfSymbolicLink(atPath: full) else { continue }
                checked += 1
                if full.contains("/proc/") && full.contains("/fd/") { continue }  // /proc fd links name /dev
                XCTAssertFalse(target.hasPrefix("/"), "\(full) -> \(target) must be relative")
            }
        }
        XCTAssertGreaterThan(checked, 50)
    }
}
