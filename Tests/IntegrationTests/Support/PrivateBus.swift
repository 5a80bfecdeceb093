// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A dbus-daemon of the test's own standing in for the system bus (programs find it through DBUS_SYSTEM_BUS_ADDRESS)
/// or a session bus (DBUS_SESSION_BUS_ADDRESS): no service directories, so nothing is activated on it (not even
/// dunst, whose activation file Debian installs), and every uid with a passwd entry may connect and own names.
/// python-dbusmock's NetworkManager template and this project's ModemManager one (Support/modemmanager.py) run on the
/// first, xdg-desktop-portal on the second. A user's session
/// bus runs as that user (`user`: TestUsers, which give it the passwd entries it resolves).
final class PrivateBus: @unchecked Sendable {
    enum Kind: String { case system, session }

    let kind: Kind
    let process: ChildProcess
    let address: String
    private let output: FDLineReader

    /// `DBUS_SYSTEM_BUS_ADDRESS=...` or `DBUS_SESSION_BUS_ADDRESS=...`, for `env`.
    var environment: String { "DBUS_\(kind.rawValue.uppercased())_BUS_ADDRESS=\(address)" }

    /// `limits`: dbus-daemon's `<limit>`s (a system bus's `max_replies_per_connection` is 128), by name.
    init(_ kind: Kind, scratch: String, user: (users: TestUsers, uid: UInt32)? = nil,
         limits: KeyValuePairs<String, Int> = [:]) throws {
        self.kind = kind
        chmod(scratch, 0o755)
        if let user { chown(scratch, user.uid, user.uid) }
        let config = scratch + "/bus.conf"
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>\(kind.rawValue)</type>
              <listen>unix:path=\(scratch)/\(kind.rawValue)_bus_socket</listen>
              <auth>EXTERNAL</auth>
            \(limits.map { "  <limit name=\"\($0.key)\">\($0.value)</limit>\n" }.joined())
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
              </policy>
            </busconfig>
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let pipe = try Subprocess.makePipe()
        do {
            let argv = ["dbus-daemon", "--config-file=\(config)", "--nofork", "--print-address=1"]
            process = try Subprocess.spawn(user.map { $0.users.argv($0.uid, argv) } ?? argv,
                                           stdin: .devNull, stdout: .fd(pipe.write), stderr: .appendFile(scratch + "/bus.log"))
        } catch {
            close(pipe.read)
            close(pipe.write)
            throw error
        }
        close(pipe.write)
        output = FDLineReader(fd: pipe.read)
        guard let line = output.nextLine(timeout: 10), line.hasPrefix("unix:") else {
            process.killAndReap()
            close(pipe.read)
            throw HarnessError("dbus-daemon printed no address: \((try? String(contentsOfFile: scratch + "/bus.log", encoding: .utf8)) ?? "")")
        }
        address = line
    }

    func stop() {
        process.killAndReap()
        close(output.fd)
    }

    /// `gdbus ARGS` on this bus.
    @discardableResult
    func gdbus(_ args: [String]) throws -> CommandResult {
        try Subprocess.check(["env", environment, "gdbus"] + args)
    }

    /// Waits until `name` has an owner on the bus, failing early if `process` exits.
    func waitForName(_ name: String, of process: ChildProcess, log: String) throws {
        let deadline = monotonicNow() + 10
        while true {
            let r = try gdbus(["call", "--\(kind.rawValue)", "--dest", "org.freedesktop.DBus", "--object-path",
                               "/org/freedesktop/DBus", "--method", "org.freedesktop.DBus.NameHasOwner", name])
            if r.stdout.contains("true") { return }
            if let s = process.poll() {
                throw HarnessError("\(name)'s owner exited \(s): \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
            }
            guard monotonicNow() < deadline else {
                process.killAndReap()
                throw HarnessError("\(name) did not appear on the bus within 10 s")
            }
            usleep(20_000)
        }
    }

    /// python-dbusmock's NetworkManager (Connectivity full), once it owns its name.
    func startNetworkManagerMock(log: String) throws -> ChildProcess {
        let p = try Subprocess.spawn(["env", environment, "/usr/bin/python3", "-m", "dbusmock",
                                      "--system", "--template", "networkmanager"],
                                     stdin: .devNull, stdout: .appendFile(log), stderr: .appendFile(log))
        try waitForName("org.freedesktop.NetworkManager", of: p, log: log)
        return p
    }

    /// ModemManager as Support/modemmanager.py mocks it, once it owns its name.
    func startModemManagerMock(log: String) throws -> ChildProcess {
        let p = try Subprocess.spawn(["env", environment, "/usr/bin/python3", "-m", "dbusmock", "--system", "--template",
                                      Repository.root + "/Tests/IntegrationTests/Support/modemmanager.py"],
                                     stdin: .devNull, stdout: .appendFile(log), stderr: .appendFile(log))
        try waitForName("org.freedesktop.ModemManager1", of: p, log: log)
        return p
    }

    /// Calls `method` of the mock interface (org.freedesktop.DBus.Mock) of `path` on `destination`, with gdbus's
    /// textual arguments.
    @discardableResult
    func mock(_ destination: String, _ path: String, _ method: String, _ args: String...) throws -> CommandResult {
        try gdbus(["call", "--\(kind.rawValue)", "--dest", destination, "--object-path", path, "--method",
                   "org.freedesktop.DBus.Mock." + method] + args)
    }

    /// The mock's NMConnectivityState (1 none, 2 portal, 3 limited, 4 full); it emits PropertiesChanged.
    func setConnectivity(_ value: Int) throws {
        try gdbus(["call", "--system", "--dest", "org.freedesktop.NetworkManager", "--object-path", "/org/freedesktop",
                   "--method", "org.freedesktop.DBus.Mock.SetConnectivity", "uint32 \(value)"])
    }
}
