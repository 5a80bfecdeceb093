// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The systemd side: the units pass systemd's own checks, and socket activation and the notify protocol work
/// with real systemd tools and a real notify socket.
final class SystemdTests: IntegrationTestCase {
    /// A log file of a process this test started, shown with any failure.
    private func showLogOnFailure(_ path: String) {
        showOnFailure(path) {
            let log = (try? String(contentsOfFile: path, encoding: .utf8)) ?? "(no log)"
            return log.count > 6000 ? "…" + log.suffix(6000) : log
        }
    }

    /// Both units as `make install-files` installs them into a staging root, their commands pointing at the
    /// staged programs (verify checks that they exist and are executable); `manPath` is the staged man pages'
    /// directory (verify runs `man` for each `Documentation=man:` page).
    private func installedUnits() throws -> (service: String, socket: String, manPath: String) {
        let staged = try stageInstall()
        let units = staged + "/usr/local/lib/systemd/system"
        let service = units + "/netpermd.service"
        let text = try String(contentsOfFile: service, encoding: .utf8)
        XCTAssertTrue(text.contains("\nExecStart=/usr/local/sbin/netpermd "), "the installed path is in ExecStart=")
        try text.replacingOccurrences(of: "/usr/local/bin/", with: staged + "/usr/local/bin/")
            .replacingOccurrences(of: "/usr/local/sbin/", with: staged + "/usr/local/sbin/")
            .write(toFile: service, atomically: true, encoding: .utf8)
        return (service, units + "/netpermd.socket", staged + "/usr/local/share/man")
    }

    // MARK: - The unit files

    func testUnitsPassSystemdAnalyzeVerify() throws {
        let units = try installedUnits()
        let r = try Subprocess.run(["env", "MANPATH=\(units.manPath)", "systemd-analyze", "verify", units.service,
                                    units.socket], timeout: 30)
        XCTAssertEqual(r.status, 0, r.summary)
        // verify exits 0 on warnings such as an unknown key; any word about our units is a problem.
        let complaints = (r.stdout + "\n" + r.stderr).split(separator: "\n").filter { $0.contains("netpermd") }
        XCTAssertEqual(complaints, [], r.summary)
    }

    func testSecurityExposureIsAtMostOnePointSix() throws {
        let units = try installedUnits()
        let r = try Subprocess.run(["systemd-analyze", "security", "--offline=yes", units.service], timeout: 30)
        let score = try exposure(r)
        XCTAssertLessThanOrEqual(score, 1.6, "overall exposure \(score) (docs/SYSTEMD.md gives 1.6):\n\(r.stdout)")
        XCTAssertFalse(r.stdout.contains("✗ CapabilityBoundingSet=~CAP_NET_ADMIN"), "the shipped unit has no CAP_NET_ADMIN")
    }

    /// The installed units (`make install-files` staged) under a root of their own, as `systemd-analyze security
    /// --offline` reads them, and the drop-ins an administrator copies from the docs directory.
    private struct OfflineUnits {
        let staged: String
        let root: String
        var system: String { root + "/etc/systemd/system" }

        init(_ test: SystemdTests) throws {
            staged = try test.stageInstall()
            root = try test.makeTempDir()
            try FileManager.default.createDirectory(atPath: root + "/etc/systemd/system/netpermd.service.d",
                                                    withIntermediateDirectories: true)
            for u in ["netpermd.service", "netpermd.socket"] {
                try FileManager.default.copyItem(atPath: staged + "/usr/local/lib/systemd/system/" + u,
                                                 toPath: root + "/etc/systemd/system/" + u)
            }
        }

        func addDropIn(_ name: String) throws {
            try FileManager.default.copyItem(atPath: staged + "/usr/local/share/netpermd/" + name,
                                             toPath: system + "/netpermd.service.d/" + name)
        }

        func analyze() throws -> CommandResult {
            try Subprocess.run(["systemd-analyze", "security", "--offline=yes", "--root=\(root)", "netpermd.service"],
                               timeout: 30)
        }
    }

    private func exposure(_ r: CommandResult) throws -> Double {
        XCTAssertEqual(r.status, 0, r.summary)
        let marker = "Overall exposure level for netpermd.service:"
        guard let line = r.lines.first(where: { $0.contains(marker) }),
              let range = line.range(of: marker),
              let score = Double(line[range.upperBound...].split(separator: " ").first ?? "") else {
            throw HarnessError("no overall exposure level in:\n\(r.summary)")
        }
        return score
    }

    /// The enforcement drop-in (docs/ENFORCEMENT.md) as an administrator installs it, under a root of its own:
    /// it adds CAP_NET_ADMIN and nothing else, and the figures the docs give (1.6 without, 1.8 with) hold.
    func testEnforcementDropInAddsOnlyNetAdmin() throws {
        let units = try OfflineUnits(self)
        let without = try exposure(units.analyze())
        try units.addDropIn("netpermd-enforcement.conf")
        let r = try units.analyze()
        let with = try exposure(r)
        XCTAssertTrue(r.stdout.contains("✗ CapabilityBoundingSet=~CAP_NET_ADMIN"), r.stdout)
        XCTAssertEqual([without, with], [1.6, 1.8], "docs/ENFORCEMENT.md gives these figures")
    }

    /// The steer drop-in (docs/ENFORCEMENT.md, "Steer") alone: CAP_NET_ADMIN, CAP_BPF and the bpf() system call,
    /// and the figure the docs give (1.9; 1.6 without).
    func testSteerDropInAddsBPFAndNetAdmin() throws {
        let units = try OfflineUnits(self)
        try units.addDropIn("netpermd-steer.conf")
        let r = try units.analyze()
        for finding in ["CapabilityBoundingSet=~CAP_NET_ADMIN", "CapabilityBoundingSet=~CAP_BPF",
                        "SystemCallFilter=~@privileged"] {
            XCTAssertTrue(r.stdout.contains("✗ " + finding), "\(finding):\n\(r.stdout)")
        }
        XCTAssertEqual(try exposure(r), 1.9, "docs/ENFORCEMENT.md gives this figure")
    }

    // MARK: - Socket activation

    func testSocketActivationAnswersAClientThatConnectedBeforeTheDaemonRan() throws {
        let ns = try makeNamespace()
        try ns.addVethPair("wlan0", peer: "wlan0p")
        let dir = try makeTempDir()
        let config = try writeConfig(in: dir)
        let socket = dir + "/activated.sock"
        let fallback = dir + "/fallback.sock"
        let log = dir + "/activate.log"
        showLogOnFailure(log)
        // `ip netns exec` and systemd-socket-activate (without --accept) exec in place: one pid throughout.
        let p = try Subprocess.spawn(["ip", "netns", "exec", ns.name, "systemd-socket-activate", "-l", socket,
                                      "--fdname=netpermd.socket", netpermd, "--socket", fallback, "--config", config,
                                      "--state-dir", dir + "/state", "--log-level", "debug"],
                                     stdin: .devNull, stdout: .appendFile(log), stderr: .appendFile(log))
        addTeardownBlock { p.killAndReap() }
        func logText() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

        // It says so once it listens.
        try waitUntil("systemd-socket-activate listens on \(socket)") {
            if let status = p.poll() { throw HarnessError("systemd-socket-activate exited \(status)") }
            return (isSocketFile(socket) && logText().contains("Listening on"), logText())
        }
        XCTAssertEqual(procExecutable(of: p.pid).map { ($0 as NSString).lastPathComponent }, "systemd-socket-activate",
                       "netpermd must not run before the first client connects")
        XCTAssertFalse(logText().contains("netpermd 0.1.0"), logText())

        // The first client: its connection is queued on the socket while netpermd starts.
        let first = try LiveConnection(path: socket)
        addTeardownBlock { first.close() }
        let (events, reply) = try first.request("STATUS", timeout: 10)
        XCTAssertEqual(events.count, 0)
        XCTAssertEqual(try JSONValue.bool(reply, "ok"), true, "\(reply)")
        XCTAssertEqual(try JSONValue.bool(reply, "ready"), true, "\(reply)")
        XCTAssertEqual(try JSONValue.int(reply, "links"), 3, "lo and the veth pair: \(reply)")
        XCTAssertEqual(procExecutable(of: p.pid).map { ($0 as NSString).lastPathComponent }, "netpermd")
        XCTAssertTrue(logText().contains("using the listening socket passed by the service manager"), logText())
        XCTAssertFalse(FileManager.default.fileExists(atPath: fallback), "netpermd bound a socket of its own")

        // The same listening socket serves everyone after.
        XCTAssertEqual(try socat(socket, ["PING"]), [#"{"ok":true,"pong":true}"#])
        let (_, again) = try first.request("PING")
        XCTAssertEqual(try JSONValue.bool(again, "pong"), true, "the first connection stays usable: \(again)")

        // SIGTERM: exit 0, and the socket's path is left to the socket unit.
        p.signal(SIGTERM)
        XCTAssertEqual(p.wait(timeout: 5), 0, "exit status after SIGTERM")
        XCTAssertTrue(isSocketFile(socket), "netpermd removed a socket it did not create")
    }

    // MARK: - sd_notify

    func testNotifyReadyStatusReloadingWatchdogAndStopping() throws {
        let ns = try makeNamespace()
        try ns.addVethPair("wlan0", peer: "wlan0p")
        try ns.addVethPair("wwan0", peer: "wwan0p")
        let dir = try makeTempDir()
        let config = try writeConfig(in: dir)
        let socket = dir + "/netpermd.sock"
        // A path, not an abstract address: abstract Unix sockets belong to the network namespace.
        let notify = try NotifyReceiver(path: dir + "/notify.sock")
        addTeardownBlock { notify.close() }
        let log = dir + "/netpermd.log"
        showLogOnFailure(log)
        let p = try Subprocess.spawn(["ip", "netns", "exec", ns.name, "env", "NOTIFY_SOCKET=\(notify.path)",
                                      "WATCHDOG_USEC=200000", netpermd, "--socket", socket, "--config", config,
                                      "--state-dir", dir + "/state", "--log-level", "debug"],
                                     stdin: .devNull, stdout: .appendFile(log), stderr: .appendFile(log))
        addTeardownBlock { p.killAndReap() }
        let isPing: (String) -> Bool = { $0 == "WATCHDOG=1" }
        func flat(_ ds: [String]) -> String { ds.map { $0.replacingOccurrences(of: "\n", with: "\\n") }.joined(separator: " | ") }

        // READY=1 first (watchdog pings aside), once every link is known.
        let untilReady = try notify.datagrams(until: "READY=1") { notifyFields($0)["READY"] == "1" }
        XCTAssertTrue(untilReady.dropLast().allSatisfy(isPing), "nothing but pings before READY=1: \(flat(untilReady))")
        let readyStatus = try XCTUnwrap(notifyFields(untilReady.last!)["STATUS"], "READY=1 comes with STATUS=")
        XCTAssertGreaterThanOrEqual(Int(readyStatus.prefix { $0.isNumber }) ?? 0, 3, readyStatus)
        XCTAssertEqual(readyStatus, "5 links, no network, 0 apps, policy gen 1",
                       "lo and both veth pairs are known at READY=1")
        XCTAssertTrue(try status(socket).ready, "it answers once it said READY=1")

        // A new default route changes the summary: STATUS= follows.
        try ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        try ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0")
        let update = try notify.datagrams(until: "STATUS= naming wwan0") {
            notifyFields($0)["STATUS"]?.contains("via wwan0") == true
        }
        XCTAssertEqual(update.last, "STATUS=5 links, via wwan0 (wwan), 0 apps, policy gen 1", flat(update))

        // SIGHUP: RELOADING=1 with the monotonic time, then READY=1 with the new generation.
        let beforeHup = monotonicMicroseconds()
        p.signal(SIGHUP)
        let reloading = try notify.datagrams(until: "RELOADING=1") { !isPing($0) }
        let fields = notifyFields(reloading.last!)
        XCTAssertEqual(fields["RELOADING"], "1", "the first message after SIGHUP: \(flat(reloading))")
        let usec = try XCTUnwrap(fields["MONOTONIC_USEC"].flatMap { UInt64($0) }, "MONOTONIC_USEC=: \(flat(reloading))")
        XCTAssertTrue(usec >= beforeHup && usec <= monotonicMicroseconds(),
                      "MONOTONIC_USEC=\(usec) is CLOCK_MONOTONIC at the reload (sent SIGHUP at \(beforeHup))")
        // (A STATUS= alone may come in between: the summary changed with the generation.)
        let reloaded = try notify.datagrams(until: "READY=1 after the reload") { notifyFields($0)["READY"] == "1" }
        XCTAssertTrue(reloaded.dropLast().allSatisfy { isPing($0) || $0.hasPrefix("STATUS=") && !$0.contains("\n") },
                      "only pings and STATUS= between RELOADING=1 and READY=1: \(flat(reloaded))")
        XCTAssertEqual(notifyFields(reloaded.last!)["STATUS"], "5 links, via wwan0 (wwan), 0 apps, policy gen 2",
                       flat(reloaded))

        // WATCHDOG=1 about every half of WATCHDOG_USEC (200 ms): 2 to 10 a second allowing for jitter.
        let window = 1.0
        let start = monotonicNow()
        var pings = 0
        var others: [String] = []
        while monotonicNow() - start < window {
            guard let d = notify.receive(timeout: start + window - monotonicNow()) else { continue }
            if isPing(d) { pings += 1 } else { others.append(d) }
        }
        XCTAssertTrue((3...15).contains(pings), "\(pings) WATCHDOG=1 in \(window) s with WATCHDOG_USEC=200000")
        XCTAssertEqual(others, [], "nothing else while nothing changes")

        // SIGTERM: STOPPING=1, exit 0.
        p.signal(SIGTERM)
        let stopping = try notify.datagrams(until: "STOPPING=1") { !isPing($0) }
        XCTAssertEqual(stopping.last, "STOPPING=1", flat(stopping))
        XCTAssertEqual(p.wait(timeout: 5), 0, "exit status after SIGTERM")
        XCTAssertFalse(FileManager.default.fileExists(atPath: socket), "the socket it bound is removed")
    }
}
