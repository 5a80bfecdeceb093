// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 35 against the real daemon: NetworkManager (python-dbusmock's template) and ModemManager (this project's
/// template, Support/modemmanager.py) on a private system bus the daemon finds through DBUS_SYSTEM_BUS_ADDRESS.
/// NetworkManager's Metered decides a link's metered flag, and its absence, restart or slowness changes nothing
/// else and stalls no client; ModemManager's registration makes a modem roaming, which `Roaming=` judges in QUERY,
/// in the kernel's rules (a real connection refused), in prompts and in the usage table (roaming bytes apart,
/// against the peer's own count).
final class NetworkSourcesTests: IntegrationTestCase {
    static let nm = "org.freedesktop.NetworkManager"
    static let device = "/org/freedesktop/NetworkManager/Devices/wlan"
    static let deviceInterface = "org.freedesktop.NetworkManager.Device"

    /// Children of the test (mocks) that a teardown kills, whatever happened.
    private var children: [ChildProcess] = []

    override func tearDownWithError() throws {
        for c in children { c.killAndReap() }
        children = []
        try super.tearDownWithError()
    }

    private func makeBus() throws -> PrivateBus {
        let bus = try PrivateBus(.system, scratch: try makeTempDir())
        addTeardownBlock { bus.stop() }
        return bus
    }

    /// The mock's Wi-Fi device for wlan0, with a Metered property (the template has none).
    private func addWiFiDevice(_ bus: PrivateBus) throws {
        try bus.mock(Self.nm, "/org/freedesktop", "AddWiFiDevice", "wlan", "wlan0", "100")
        try bus.mock(Self.nm, Self.device, "AddProperty", Self.deviceInterface, "Metered", "<uint32 0>")
    }

    /// NMMetered: 1 yes, 2 no, 3 guess-yes, 4 guess-no; emits PropertiesChanged as NetworkManager does.
    private func setMetered(_ bus: PrivateBus, _ value: Int) throws {
        try bus.mock(Self.nm, Self.device, "UpdateProperties", Self.deviceInterface, "{'Metered': <uint32 \(value)>}")
    }

    private func link(_ socket: String, _ name: String) throws -> DaemonLink {
        guard let l = try links(socket).first(where: { $0.name == name }) else { throw HarnessError("no \(name)") }
        return l
    }

    static let meteredPolicy = """
        [Interface wlan0]
        Kind=wifi

        [Interface wwan0]
        Kind=wwan

        [App backup]
        Executable=/nonexistent/backup
        WiFi=allow
        Metered=deny

        """

    func testNetworkManagersMeteredDecidesAndItsAbsenceChangesNothingElse() throws {
        let bus = try makeBus()
        let dir = try makeTempDir()
        children.append(try bus.startNetworkManagerMock(log: dir + "/nm.log"))
        try addWiFiDevice(bus)
        let ns = try makeTwoLinkNamespace(defaultRoutes: [("wlan0", 100)])
        let socket = dir + "/netpermd.sock"
        let d = try startDaemon(in: ns, socket: socket, config: try writeConfig(Self.meteredPolicy, in: dir),
                                wrapper: ["env", bus.environment])
        try waitForLinks(socket, "wlan0 usable") { $0[name: "wlan0"]?.usable == true }
        let wwanBefore = try link(socket, "wwan0")

        // The phone's hotspot: NetworkManager guessed it metered (its DHCP option), so the backup waits.
        try setMetered(bus, 3)
        try waitForLinks(socket, "NetworkManager's guess-yes") { $0[name: "wlan0"].map { $0.metered && $0.meteredBy == "networkmanager" } ?? false }
        _ = try waitForVerdict(socket, "backup", "Metered=deny on the hotspot") { $0.reason == "denied" && $0.denied == ["metered"] }
        // The person marks it unmetered in GNOME Settings.
        try setMetered(bus, 2)
        try waitForLinks(socket, "NetworkManager's no") { $0[name: "wlan0"].map { !$0.metered && $0.meteredBy == "networkmanager" } ?? false }
        _ = try waitForVerdict(socket, "backup", "allowed once unmetered") { $0.reason == "ok" }
        try setMetered(bus, 1)
        try waitForLinks(socket, "NetworkManager's yes") { $0[name: "wlan0"]?.metered == true }

        // NetworkManager stops: the built-in guesses again (a veth Kind=wifi: not metered); nothing else moves.
        children.removeLast().killAndReap()
        try waitForLinks(socket, "NetworkManager gone") { $0[name: "wlan0"].map { !$0.metered && $0.meteredBy == "default" } ?? false }
        let wwanGone = try link(socket, "wwan0")
        XCTAssertEqual("\(wwanGone)", "\(wwanBefore)", "the other link is as it was")
        // ... and starts again: its word again.
        children.append(try bus.startNetworkManagerMock(log: dir + "/nm.log"))
        try addWiFiDevice(bus)
        try setMetered(bus, 3)
        try waitForLinks(socket, "NetworkManager back") { $0[name: "wlan0"].map { $0.metered && $0.meteredBy == "networkmanager" } ?? false }

        // NetworkManager hangs (its GetDevices sleeps 7 s, and the mock answers nothing meanwhile): clients are
        // answered at once, what it said last stands, and the daemon says it gave up on that reading.
        try bus.mock(Self.nm, "/org/freedesktop/NetworkManager", "AddMethod", Self.nm, "GetDevices", "", "ao",
                     "import time; time.sleep(7); ret = [k for k in objects.keys() if '/Devices/' in k]")
        try setMetered(bus, 4)
        var slowest = 0.0
        let start = monotonicNow()
        while monotonicNow() - start < 3 {
            let t = monotonicNow()
            let (v, o) = try queryVerdict(socket, "backup")
            slowest = max(slowest, monotonicNow() - t)
            XCTAssertEqual(v.denied, ["metered"], "\(o)")
            usleep(50_000)
        }
        XCTAssertLessThan(slowest, 0.25, "a client is answered while NetworkManager hangs (slowest \(slowest) s)")
        XCTAssertTrue(try link(socket, "wlan0").metered, "what NetworkManager said last stands")
        try waitUntil("the daemon gives the reading up", timeout: 10) {
            (d.log.contains("org.freedesktop.NetworkManager: reading it failed"), d.logTail)
        }
        let bad = d.log.split(separator: "\n").filter { $0.hasPrefix("<3>") || $0.hasPrefix("<4>") }
        XCTAssertEqual(bad, [], "no warning or error for a NetworkManager that comes, goes or hangs")
    }

    /// The system bus itself stops (NetworkManager's word goes with it) and comes back at the same address: the
    /// daemon connects again by itself and reads NetworkManager again.
    func testTheSystemBusGoingAndComingBackIsFollowed() throws {
        let scratch = try makeTempDir(), dir = try makeTempDir()
        var buses = [try PrivateBus(.system, scratch: scratch)]
        addTeardownBlock { for b in buses { b.stop() } }
        children.append(try buses[0].startNetworkManagerMock(log: dir + "/nm.log"))
        try addWiFiDevice(buses[0])
        let ns = try makeTwoLinkNamespace(defaultRoutes: [("wlan0", 100)])
        let socket = dir + "/netpermd.sock"
        // The address without the bus's guid: the next bus daemon has another.
        let d = try startDaemon(in: ns, socket: socket, config: try writeConfig(Self.meteredPolicy, in: dir),
                                wrapper: ["env", "DBUS_SYSTEM_BUS_ADDRESS=unix:path=\(scratch)/system_bus_socket"])
        try setMetered(buses[0], 3)
        try waitForLinks(socket, "NetworkManager's guess-yes") { $0[name: "wlan0"]?.meteredBy == "networkmanager" }

        children.removeLast().killAndReap()
        buses[0].stop()
        try waitForLinks(socket, "the bus gone, NetworkManager's word with it") { $0[name: "wlan0"]?.meteredBy == "default" }
        XCTAssertTrue(d.log.contains("system bus: disconnected"), d.logTail)

        buses.append(try PrivateBus(.system, scratch: scratch))
        children.append(try buses[1].startNetworkManagerMock(log: dir + "/nm.log"))
        try addWiFiDevice(buses[1])
        try setMetered(buses[1], 3)
        try waitForLinks(socket, "connected again, NetworkManager read again", timeout: 15) {
            $0[name: "wlan0"].map { $0.metered && $0.meteredBy == "networkmanager" } ?? false
        }
        XCTAssertTrue(d.log.contains("system bus: connected again"), d.logTail)
    }

    /// No system bus when the daemon starts (a machine without D-Bus): it waits on the socket's directory rather
    /// than trying every minute, and connects as soon as a bus makes its socket there (not at a retry's time).
    func testASystemBusMadeLaterIsConnectedToWhenItsSocketIsMade() throws {
        let scratch = try makeTempDir(), dir = try makeTempDir()
        let ns = try makeTwoLinkNamespace(defaultRoutes: [("wlan0", 100)])
        let socket = dir + "/netpermd.sock"
        let d = try startDaemon(in: ns, socket: socket, config: try writeConfig(Self.meteredPolicy, in: dir),
                                wrapper: ["env", "DBUS_SYSTEM_BUS_ADDRESS=unix:path=\(scratch)/system_bus_socket"])
        try waitUntil("the daemon says the bus is absent") { (d.log.contains("system bus: cannot connect"), d.logTail) }
        var buses: [PrivateBus] = []
        addTeardownBlock { for b in buses { b.stop() } }
        buses.append(try PrivateBus(.system, scratch: scratch))
        children.append(try buses[0].startNetworkManagerMock(log: dir + "/nm.log"))
        try addWiFiDevice(buses[0])
        try setMetered(buses[0], 3)
        try waitForLinks(socket, "NetworkManager read once its bus is there") { $0[name: "wlan0"]?.meteredBy == "networkmanager" }
        // Connected by the socket's watch: a retry's connection says nothing at the first one.
        XCTAssertTrue(d.log.split(separator: "\n").contains { $0.hasSuffix("system bus: connected") }, d.logTail)
    }

    // MARK: What a bus peer can do (issue 48)

    /// The unique name owning `name` on `bus`.
    private func owner(_ bus: PrivateBus, _ name: String) throws -> String {
        let out = try bus.gdbus(["call", "--system", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                                 "--method", "org.freedesktop.DBus.GetNameOwner", name]).stdout
        guard let unique = out.split(separator: "'").first(where: { $0.hasPrefix(":") }) else {
            throw HarnessError("no owner of \(name): \(out)")
        }
        return String(unique)
    }

    /// Sends `signal` (interface.member) of `path` from a connection of the test's own, as any local user can,
    /// straight to every connection on `bus` but `name`'s owner: the daemon's among them. A unicast signal: the bus
    /// delivers it whatever a match's `sender=` says.
    private func forge(_ bus: PrivateBus, sparing name: String, path: String, signal: String, _ args: String...) throws {
        let spared = try owner(bus, name)
        let listing = try bus.gdbus(["call", "--system", "--dest", "org.freedesktop.DBus", "--object-path",
                                     "/org/freedesktop/DBus", "--method", "org.freedesktop.DBus.ListNames"]).stdout
        let peers = listing.split(separator: "'").filter { $0.hasPrefix(":") && $0 != spared }
        XCTAssertFalse(peers.isEmpty, listing)
        for peer in peers {
            try bus.gdbus(["emit", "--system", "--dest", String(peer), "--object-path", path, "--signal", signal] + args)
        }
    }

    /// NetworkManager's word is taken from NetworkManager alone: a "NetworkManager left the bus" any user sends
    /// straight to the daemon drops nothing (it dropped NetworkManager's facts, and the backup left through the
    /// metered hotspot), and a PropertiesChanged from a peer that is not NetworkManager is not even a reason to read.
    func testSignalsFromAnyoneButTheBusOrTheServiceAreIgnored() throws {
        let bus = try makeBus()
        let dir = try makeTempDir()
        children.append(try bus.startNetworkManagerMock(log: dir + "/nm.log"))
        try addWiFiDevice(bus)
        try setMetered(bus, 3)
        let ns = try makeTwoLinkNamespace(defaultRoutes: [("wlan0", 100)])
        let socket = dir + "/netpermd.sock"
        let d = try startDaemon(in: ns, socket: socket, config: try writeConfig(Self.meteredPolicy, in: dir),
                                wrapper: ["env", bus.environment])
        try waitForLinks(socket, "NetworkManager's guess-yes") { $0[name: "wlan0"].map { $0.metered && $0.meteredBy == "networkmanager" } ?? false }
        _ = try waitForVerdict(socket, "backup", "Metered=deny on the hotspot") { $0.reason == "denied" && $0.denied == ["metered"] }

        // "NetworkManager left", from a peer: the daemon either says it ignored it or believes it (before issue 48).
        try forge(bus, sparing: Self.nm, path: "/org/freedesktop/DBus", signal: "org.freedesktop.DBus.NameOwnerChanged",
                  "'\(Self.nm)'", "'\(try owner(bus, Self.nm))'", "''")
        try waitUntil("the daemon hears the forged NameOwnerChanged", timeout: 10) {
            (d.log.contains("ignored NameOwnerChanged from") || d.log.contains("left the system bus"), d.logTail)
        }
        XCTAssertFalse(d.log.contains("left the system bus"), d.logTail)
        let wlan = try link(socket, "wlan0")
        XCTAssertTrue(wlan.metered && wlan.meteredBy == "networkmanager", "NetworkManager's word stands: \(wlan)")
        let (v, o) = try queryVerdict(socket, "backup")
        XCTAssertEqual(v.denied, ["metered"], "the backup still waits for an unmetered link: \(o)")

        // A PropertiesChanged "Metered: no" from a peer, then NetworkManager's own: read once, for NetworkManager's
        // alone (the peer's made a reading of its own before issue 48: anyone could make the daemon read at will).
        try bus.mock(Self.nm, "/org/freedesktop/NetworkManager", "ClearCalls")
        try forge(bus, sparing: Self.nm, path: Self.device, signal: "org.freedesktop.DBus.Properties.PropertiesChanged",
                  "'\(Self.deviceInterface)'", "{'Metered': <uint32 2>}", "@as []")
        try setMetered(bus, 2)
        try waitForLinks(socket, "NetworkManager's own no") { $0[name: "wlan0"].map { !$0.metered && $0.meteredBy == "networkmanager" } ?? false }
        let calls = try bus.mock(Self.nm, "/org/freedesktop/NetworkManager", "GetCalls").stdout
        XCTAssertEqual(calls.components(separatedBy: "'GetDevices'").count - 1, 1, "one reading, for NetworkManager's signal: \(calls)")
        let bad = d.log.split(separator: "\n").filter { $0.hasPrefix("<3>") || $0.hasPrefix("<4>") }
        XCTAssertEqual(bad, [], "a forged signal is no warning: any user can send one")
    }

    /// 202 devices on a system bus as Debian configures it (128 replies may wait per connection): every device is
    /// read, none taken for gone. The daemon sent all 202 GetAll at once, the bus refused those past its limit, and
    /// the two real links, listed last, fell back to the built-in guess without a word. Now at most 32 are out: the
    /// bus refuses none.
    func testTwoHundredDevicesAreEachReadOnASystemBus() throws {
        let log = try readTwoHundredDevices(maxReplies: 128)
        XCTAssertFalse(log.contains("refused"), "the window keeps below the bus's limit")
    }

    /// The same on a bus that lets only 16 replies wait, below the daemon's own bound: the bus refuses calls every
    /// time, whatever the mock's speed (it answers one call at a time), so the refused calls' retry is tested
    /// deterministically.
    func testTwoHundredDevicesAreEachReadOnABusThatRefusesCallsPastItsLimit() throws {
        let log = try readTwoHundredDevices(maxReplies: 16)
        XCTAssertTrue(log.contains("refused calls tried again"), "the bus refused calls and the daemon said so")
    }

    /// Starts the daemon against 202 NetworkManager devices on a bus with `maxReplies`, waits until both real links
    /// have NetworkManager's word; returns the daemon's log.
    private func readTwoHundredDevices(maxReplies: Int) throws -> String {
        let bus = try PrivateBus(.system, scratch: try makeTempDir(), limits: ["max_replies_per_connection": maxReplies])
        addTeardownBlock { bus.stop() }
        let dir = try makeTempDir()
        children.append(try bus.startNetworkManagerMock(log: dir + "/nm.log"))
        // Devices made before the daemon starts: one reading sees them all. wwan0 in the middle ("no", against the
        // built-in guess for WWAN), wlan0 last ("guess-yes", against the built-in "no" for Wi-Fi).
        let script = """
            import dbus, sys
            bus = dbus.bus.BusConnection(sys.argv[1])
            nm = bus.get_object('org.freedesktop.NetworkManager', '/org/freedesktop')
            names = ['nm%d' % i for i in range(100)] + ['wwan0'] + ['nm%d' % i for i in range(100, 200)] + ['wlan0']
            for n in names:
                path = nm.AddEthernetDevice('d' + n, n, 100, dbus_interface='org.freedesktop.DBus.Mock')
                metered = {'wwan0': 2, 'wlan0': 3}.get(n, 4)
                bus.get_object('org.freedesktop.NetworkManager', path).AddProperty(
                    'org.freedesktop.NetworkManager.Device', 'Metered', dbus.UInt32(metered),
                    dbus_interface='org.freedesktop.DBus.Mock')
            """
        try Subprocess.check(["/usr/bin/python3", "-c", script, bus.address])
        let ns = try makeTwoLinkNamespace(defaultRoutes: [("wlan0", 100)])
        let socket = dir + "/netpermd.sock"
        let d = try startDaemon(in: ns, socket: socket, config: try writeConfig(Self.meteredPolicy, in: dir),
                                wrapper: ["env", bus.environment])
        try waitForLinks(socket, "both real links read from NetworkManager", timeout: 15) {
            guard let wlan = $0[name: "wlan0"], let wwan = $0[name: "wwan0"] else { return false }
            return wlan.metered && wlan.meteredBy == "networkmanager" && !wwan.metered && wwan.meteredBy == "networkmanager"
        }
        XCTAssertFalse(d.log.contains("reading it failed"), d.logTail)
        return d.log
    }

    // MARK: ModemManager and Roaming=

    static let traveller: UInt32 = 4301, asker: UInt32 = 4302, sender: UInt32 = 4303

    static let roamingPolicy = """
        [Enforcement]
        Mode=block

        [Usage]
        Count=yes

        [Interface wwan0]
        Kind=wwan

        [Interface eth0]
        Kind=ethernet

        [Defaults]
        WWAN=allow

        [App traveller]
        User=\(traveller)
        Roaming=deny

        [App asker]
        User=\(asker)
        Roaming=ask

        [App sender]
        User=\(sender)

        """

    func testRoamingDenyIsHeldByTheKernelAndRoamingBytesAreCountedApart() throws {
        try EnforcementBed.requireTools()
        let bus = try makeBus()
        let dir = try makeTempDir()
        children.append(try bus.startModemManagerMock(log: dir + "/mm.log"))
        let mm = ("org.freedesktop.ModemManager1", "/org/freedesktop/ModemManager1")
        try bus.mock(mm.0, mm.1, "AddModem", "0", "wwan0", "1")
        let bed = try UsageBed(self, dir: dir)
        // The modem is the way out (a verdict judges usable links: those with a default route).
        try bed.ns.ip("route", "add", "default", "via", "10.31.0.2", "dev", "wwan0")
        let socket = dir + "/netpermd.sock"
        showOnFailure("nft list ruleset") {
            (try? Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)", "nft", "list", "ruleset"]).stdout) ?? "?"
        }
        try startDaemon(in: bed.ns, socket: socket, config: try writeConfig(Self.roamingPolicy, in: dir),
                        wrapper: ["env", bus.environment], nsenter: true)
        try waitUntil("the rules and the counting are in force") {
            let s = try self.request(socket, "STATUS")
            let e = (s["enforcement"] as? [String: Any])?["state"] as? String, u = (s["usage"] as? [String: Any])?["state"] as? String
            return (e == "enforcing" && u == "counting", "\(s)")
        }
        func probe(_ uid: UInt32) throws -> (tcp: String, udp: String) {
            let o = try bed.client(uid: uid, "probe", "wwan0")
            return (o["tcp"] as? String ?? "?", o["udp"] as? String ?? "?")
        }

        // At home: every app goes.
        try waitForLinks(socket, "ModemManager says home") { $0[name: "wwan0"].map { $0.roaming == false && $0.roamingBy == "modemmanager" } ?? false }
        try waitUntil("the traveller connects at home") { let p = try probe(Self.traveller); return (p == ("ok", "ok"), "\(p)") }
        let home = try bed.client(uid: Self.sender, "upload", "wwan0", String(1 << 20))
        XCTAssertNil(home["error"] as? String, "\(home)")

        // Abroad: the traveller is denied, by the daemon and by the kernel; the sender goes on, counted apart.
        try bus.mock(mm.0, mm.1, "SetRegistrationState", "0", "5")
        try waitForLinks(socket, "ModemManager says roaming") { $0[name: "wwan0"]?.roaming == true }
        _ = try waitForVerdict(socket, "traveller", "Roaming=deny abroad") { $0.reason == "denied" && $0.denied == ["roaming"] }
        let (_, o) = try queryVerdict(socket, "traveller")
        XCTAssertEqual(o["message"] as? String, "traveller may not use roaming links: its policy denies it")
        try waitUntil("the kernel refuses the traveller's connection") {
            let p = try probe(Self.traveller)
            return (p == ("ECONNREFUSED", "EPERM"), "\(p)")
        }
        XCTAssertTrue(try probe(Self.sender) == ("ok", "ok"), "an app without Roaming= is not held back")
        let sinkBefore = try bed.peerCounter("sink_in")
        let usageBefore = try request(socket, "USAGE sender")
        let abroad = try bed.client(uid: Self.sender, "upload", "wwan0", String(2 << 20))
        XCTAssertNil(abroad["error"] as? String, "\(abroad)")
        let sent = try bed.peerCounter("sink_in").bytes - sinkBefore.bytes
        let usage = try request(socket, "USAGE sender")
        func kinds(_ r: [String: Any]) -> [[String: Any]] {
            (((r["apps"] as? [[String: Any]])?.first?["current"] as? [String: Any])?["kinds"] as? [[String: Any]]) ?? []
        }
        func sentOn(_ r: [String: Any], roaming: Bool) -> Int {
            kinds(r).first { $0["kind"] as? String == "wwan" && $0["roaming"] as? Bool == roaming }?["sent_bytes"] as? Int ?? 0
        }
        let roamingSent = sentOn(usage, roaming: true) - sentOn(usageBefore, roaming: true)
        XCTAssertGreaterThan(sent, 2 << 20)
        XCTAssertLessThanOrEqual(abs(Double(roamingSent - sent)) / Double(sent), 0.01,
                                 "roaming bytes sent \(roamingSent), the peer's kernel received \(sent)")
        XCTAssertEqual(sentOn(usage, roaming: false), sentOn(usageBefore, roaming: false), "home's count stands still")
        let current = (usage["apps"] as? [[String: Any]])?.first?["current"] as? [String: Any]
        XCTAssertEqual(current?["roaming_bytes"] as? Int,
                       kinds(usage).filter { $0["roaming"] as? Bool == true }.reduce(0) {
                           $0 + ($1["sent_bytes"] as? Int ?? 0) + ($1["received_bytes"] as? Int ?? 0) })
        print("usage accuracy: roaming sent: counted \(roamingSent), peer \(sent)")

        // Roaming=ask: one prompt for the asker's refused connections, about roaming on that link.
        let agent = try EvChannel.connect(socket, name: "agent")
        defer { agent.close() }
        XCTAssertEqual(try agent.request("SUBSCRIBE prompts")["ok"] as? Bool, true)
        var prompts: [[String: Any]] = []
        let first = monotonicNow()
        try waitUntil("a prompt for the asker") {
            XCTAssertTrue(try probe(Self.asker) == ("ECONNREFUSED", "EPERM"), "pending: refused")
            try agent.drainPrompts(into: &prompts)
            return (!prompts.isEmpty, agent.transcript.joined(separator: "\n"))
        }
        // More refused connects, for longer than the rules' logging limit (5 a second) holds back: still one prompt.
        while monotonicNow() - first < 1.5 { _ = try probe(Self.asker) }
        try agent.drainPrompts(into: &prompts, for: 0.5)
        XCTAssertEqual(prompts.count, 1, "\(prompts)")
        XCTAssertEqual(prompts.first?["kinds"] as? [String], ["roaming"])
        XCTAssertEqual((prompts.first?["link"] as? [String: Any])?["roaming"] as? Bool, true)
        XCTAssertEqual((prompts.first?["choices"] as? [[String: Any]])?.map { $0["label"] as? String },
                       ["Allow", "Not while roaming", "Allow once"])
        let prompt = try ctl(["--socket", socket, "prompts"])
        XCTAssertTrue(prompt.lines.contains { $0.contains(" roaming ") && $0.contains("wwan0 (metered, roaming)") }, prompt.stdout)

        // Home again: the traveller goes.
        try bus.mock(mm.0, mm.1, "SetRegistrationState", "0", "1")
        try waitUntil("the traveller connects at home again") { let p = try probe(Self.traveller); return (p == ("ok", "ok"), "\(p)") }
        XCTAssertEqual(try queryVerdict(socket, "traveller").0.reason, "ok")
    }
}
