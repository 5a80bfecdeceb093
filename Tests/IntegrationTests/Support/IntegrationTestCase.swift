// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A namespace with two veth pairs (wlan0/wlan0p, wwan0/wwan0p, all up), a config that makes wlan0 wifi and
/// wwan0 wwan, and a daemon answering on `socket`.
struct Fixture {
    var ns: TestNamespace
    var dir: String
    var socket: String
    var config: String
    var daemon: DaemonProcess
}

/// Helpers shared by the integration tests: namespaces, temp dirs and daemons that are always cleaned up,
/// socat and netpermctl as a user runs them, and bounded waits.
class IntegrationTestCase: XCTestCase {
    static let standardConfig = "[Interface wlan0]\nKind=wifi\n\n[Interface wwan0]\nKind=wwan\n"

    /// Daemons started by the running test; their logs are appended to every failure message.
    private var daemons: [DaemonProcess] = []

    /// Where netpermd and netpermctl are: $NETPERMD_BIN, else <package root>/.build/debug.
    static var binDir: String {
        if let dir = ProcessInfo.processInfo.environment["NETPERMD_BIN"], !dir.isEmpty { return dir }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug").path
    }
    var netpermd: String { Self.binDir + "/netpermd" }
    var netpermctl: String { Self.binDir + "/netpermctl" }
    /// The release build's netpermd (what `make install` ships) when $NETPERMD_RELEASE_BIN names its directory, as
    /// `make test` does; else the debug one. For what is measured against a bound that only a release build holds on
    /// a machine of two cores (units named under churn: 3-5 times slower in a debug build).
    var releaseNetpermd: String {
        guard let dir = ProcessInfo.processInfo.environment["NETPERMD_RELEASE_BIN"], !dir.isEmpty else { return netpermd }
        return dir + "/netpermd"
    }

    override class func setUp() {
        super.setUp()
        // SIGPIPE would kill the whole test process when a command stops reading its stdin.
        Glibc.signal(SIGPIPE, SIG_IGN)
        TestNamespace.removeLeftovers()
        EnforcementBed.removeLeftoverSlices()
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        daemons = []
        failureContext = []
        guard geteuid() == 0 else {
            throw HarnessError("the integration tests create network namespaces and must run as root")
        }
        for bin in [netpermd, netpermctl] where access(bin, X_OK) != 0 {
            throw HarnessError("\(bin) is missing: build first (swift build --build-tests) or set NETPERMD_BIN")
        }
        for tool in ["ip", "socat"] where !Subprocess.resolve(tool).hasPrefix("/") {
            throw HarnessError("\(tool) is not installed (apt-get install iproute2 socat)")
        }
    }

    /// What else a failure of the running test should show (a log, a journal), each asked for at the failure.
    private var failureContext: [(title: String, text: () -> String)] = []

    /// Adds `text()` under `title` to every failure message of the running test.
    func showOnFailure(_ title: String, _ text: @escaping () -> String) {
        failureContext.append((title, text))
    }

    /// Every failure carries the logs of the daemons this test started, and what the test added.
    override func recordFailure(withDescription description: String, inFile filePath: String, atLine lineNumber: Int,
                                expected: Bool) {
        var text = description
        for d in daemons {
            text += "\n--- netpermd log (pid \(d.pid), \(d.exitStatus.map { "exited \($0)" } ?? "running")) ---\n"
                + d.logTail
        }
        for c in failureContext { text += "\n--- \(c.title) ---\n" + c.text() }
        super.recordFailure(withDescription: text, inFile: filePath, atLine: lineNumber, expected: expected)
    }

    // MARK: - Resources that clean up after themselves

    func makeNamespace(ipv6: Bool = false, file: StaticString = #filePath, line: UInt = #line) throws -> TestNamespace {
        let ns = try TestNamespace(ipv6: ipv6)
        addTeardownBlock { [ns] in
            ns.delete()
            XCTAssertFalse(ns.stillListed(), "namespace \(ns.name) is still listed after `ip netns del`",
                           file: file, line: line)
        }
        return ns
    }

    func writeConfig(_ text: String = IntegrationTestCase.standardConfig, in dir: String) throws -> String {
        let path = "\(dir)/netpermd.conf"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Starts a daemon in `ns` (state in `<config dir>/state`, log in `<config dir>/<logName>`); unless
    /// `waitForAnswer` is false, returns once it answers PING. If the test leaves it running, teardown stops it
    /// with SIGTERM and checks that it exits 0 and removes its socket (SIGKILL if it does not exit).
    func startDaemon(in ns: TestNamespace, socket: String, config: String, logName: String = "netpermd.log",
                     extraArgs: [String] = [], wrapper: [String] = [], waitForAnswer: Bool = true,
                     nsenter: Bool = false, binary: String? = nil) throws -> DaemonProcess {
        let dir = (config as NSString).deletingLastPathComponent
        let d = try DaemonProcess(binary: binary ?? netpermd, namespace: ns.name, socketPath: socket, configPath: config,
                                  stateDir: dir + "/state", logPath: dir + "/" + logName, extraArgs: extraArgs,
                                  wrapper: wrapper, nsenter: nsenter)
        daemons.append(d)
        addTeardownBlock { [weak self, d] in
            guard d.isRunning else { return }
            self?.stopDaemon(d)
            d.forceStop()
        }
        if waitForAnswer { try waitUntilAnswering(d) }
        return d
    }

    /// SIGTERM, then asserts the daemon exits 0 within 5 s and removes its socket file (SIGKILL if it hangs).
    func stopDaemon(_ d: DaemonProcess, file: StaticString = #filePath, line: UInt = #line) {
        d.signal(SIGTERM)
        guard let status = d.waitForExit(timeout: 5) else {
            d.forceStop()
            XCTFail("netpermd (pid \(d.pid)) did not exit within 5 s of SIGTERM; killed", file: file, line: line)
            return
        }
        XCTAssertEqual(status, 0, "netpermd exit status after SIGTERM", file: file, line: line)
        XCTAssertFalse(FileManager.default.fileExists(atPath: d.socketPath),
                       "\(d.socketPath) still exists after netpermd exited on SIGTERM", file: file, line: line)
    }

    /// Bounded poll: PING through socat until the daemon answers; fails at once if it exits.
    /// A PING answered from the event loop also means the signal handlers are in place.
    func waitUntilAnswering(_ d: DaemonProcess, timeout: Double = 5) throws {
        var last = ""
        try waitUntil("netpermd answers PING on \(d.socketPath)", timeout: timeout) {
            if let status = d.pollExit() { throw HarnessError("netpermd exited with status \(status) while starting") }
            let r = try self.socatRun(d.socketPath, input: Array("PING\n".utf8))
            last = r.summary
            return (r.status == 0 && r.lines == [#"{"ok":true,"pong":true}"#], last)
        }
    }

    /// What `make install` installs (the same `install-files` recipe, PREFIX=/usr/local, the programs from binDir),
    /// staged under a fresh directory that is returned; mode 0755, so that it can become a root directory.
    func stageInstall() throws -> String {
        let staged = try makeTempDir()
        chmod(staged, 0o755)
        try Subprocess.check(["make", "-C", Repository.root, "--no-print-directory", "install-files",
                              "DESTDIR=\(staged)", "PREFIX=/usr/local", "BIN=\(Self.binDir)"], timeout: 60)
        return staged
    }

    /// A namespace with wlan0/wlan0p and wwan0/wwan0p up, wlan0 at 10.1.0.1/24 and wwan0 at 10.2.0.1/24, and a
    /// default route via .2 through each link named in `defaultRoutes`, with its metric.
    func makeTwoLinkNamespace(defaultRoutes: [(link: String, metric: Int)]) throws -> TestNamespace {
        let ns = try makeNamespace()
        try ns.addVethPair("wlan0", peer: "wlan0p")
        try ns.addVethPair("wwan0", peer: "wwan0p")
        try ns.ip("addr", "add", "10.1.0.1/24", "dev", "wlan0")
        try ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        for r in defaultRoutes {
            try ns.ip("route", "add", "default", "via", r.link == "wlan0" ? "10.1.0.2" : "10.2.0.2", "dev", r.link,
                      "metric", String(r.metric))
        }
        return ns
    }

    /// A namespace with the two veth pairs, the standard config, and a daemon answering.
    func makeFixture(extraArgs: [String] = []) throws -> Fixture {
        let ns = try makeNamespace()
        try ns.addVethPair("wlan0", peer: "wlan0p")
        try ns.addVethPair("wwan0", peer: "wwan0p")
        let dir = try makeTempDir()
        let config = try writeConfig(in: dir)
        let socket = "\(dir)/netpermd.sock"
        let daemon = try startDaemon(in: ns, socket: socket, config: config, extraArgs: extraArgs)
        // Start every test from a settled picture: carrier and operstate (set by the kernel's linkwatch a
        // moment after carrier) up on both pairs, as the daemon sees them.
        try waitForLinks(socket, "both veth pairs are up with carrier") { links in
            ["wlan0", "wlan0p", "wwan0", "wwan0p"].allSatisfy {
                links[name: $0].map { $0.adminUp && $0.carrier && $0.operstate == "up" } ?? false
            }
        }
        return Fixture(ns: ns, dir: dir, socket: socket, config: config, daemon: daemon)
    }

    // MARK: - Talking to the daemon as users do

    /// `socat - UNIX-CONNECT:PATH` with `input` on stdin.
    /// `linger`: how long socat waits for the daemon after its input ended (socat's `-t`, 0.5 s unless given).
    func socatRun(_ socket: String, input: [UInt8], keepInputOpen: Bool = false,
                  timeout: Double = 10, linger: Double? = nil) throws -> CommandResult {
        try Subprocess.run(["socat"] + (linger.map { ["-t", String($0)] } ?? []) + ["-", "UNIX-CONNECT:\(socket)"],
                           input: input, keepInputOpen: keepInputOpen, timeout: timeout)
    }

    /// Sends each request as a line through one socat connection; returns the reply lines. socat waits up to 5 s
    /// after its input ends: the daemon closes once it has answered, but a DECIDE or RELOAD is answered only once
    /// its rules are in the kernel, which took longer than socat's default 0.5 s on a loaded machine.
    func socat(_ socket: String, _ requests: [String]) throws -> [String] {
        let r = try socatRun(socket, input: Array(requests.map { $0 + "\n" }.joined().utf8), linger: 5)
        guard r.status == 0 else { throw HarnessError("socat failed: \(r.summary)") }
        return r.lines
    }

    /// One request, one JSON reply.
    func request(_ socket: String, _ line: String) throws -> [String: Any] {
        let lines = try socat(socket, [line])
        guard lines.count == 1 else { throw HarnessError("expected one reply to \(line), got \(lines)") }
        return try JSONValue.object(lines[0])
    }

    func links(_ socket: String) throws -> [DaemonLink] {
        let o = try request(socket, "LINKS")
        guard try JSONValue.bool(o, "ok"), let list = o["links"] as? [[String: Any]] else {
            throw HarnessError("bad LINKS reply: \(o)")
        }
        return try list.map(DaemonLink.init)
    }

    func status(_ socket: String) throws -> DaemonStatus {
        try DaemonStatus(request(socket, "STATUS"))
    }

    /// `netpermctl ARGS...` (pass --socket yourself).
    func ctl(_ args: [String], timeout: Double = 10) throws -> CommandResult {
        try Subprocess.run([netpermctl] + args, timeout: timeout)
    }

    // MARK: - Bounded waiting

    /// Re-evaluates `probe` every `interval` seconds until it reports success or `timeout` passes, then throws
    /// with the description and the probe's last report of what it saw.
    func waitUntil(_ description: String, timeout: Double = 5, interval: Double = 0.02,
                   _ probe: () throws -> (Bool, String)) throws {
        let deadline = monotonicNow() + timeout
        var last = "(never evaluated)"
        while true {
            let (ok, state) = try probe()
            if ok { return }
            last = state
            if monotonicNow() >= deadline { break }
            usleep(UInt32(interval * 1e6))
        }
        throw HarnessError("timed out after \(timeout) s waiting until \(description); last seen:\n\(last)")
    }

    /// Waits until the daemon's LINKS satisfies `condition`; returns the links that did.
    @discardableResult
    func waitForLinks(_ socket: String, _ description: String, timeout: Double = 5,
                      _ condition: ([DaemonLink]) -> Bool) throws -> [DaemonLink] {
        var result: [DaemonLink] = []
        try waitUntil(description, timeout: timeout) {
            let l = try links(socket)
            result = l
            return (condition(l), l.map(\.description).joined(separator: "\n"))
        }
        return result
    }

    @discardableResult
    func waitForStatus(_ socket: String, _ description: String, timeout: Double = 5,
                       _ condition: (DaemonStatus) -> Bool) throws -> DaemonStatus {
        var result: DaemonStatus?
        try waitUntil(description, timeout: timeout) {
            let s = try status(socket)
            result = s
            return (condition(s), s.description)
        }
        return result!
    }
}

extension Array where Element == DaemonLink {
    subscript(name name: String) -> DaemonLink? { first { $0.name == name } }
}
