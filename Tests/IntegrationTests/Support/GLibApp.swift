// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A GLib app as users run one: glib-app.py under Debian's /usr/bin/python3 (the only Python with GLib's bindings),
/// in a test namespace, as a uid of the test's choosing, with the built module found through GIO_EXTRA_MODULES.
/// Its network-changed signals are collected as they come, apart from the replies to its commands.
final class GLibApp: @unchecked Sendable {
    static let python = "/usr/bin/python3"
    /// Where `make gio-module` builds the module and its cache.
    static var moduleDir: String { Repository.path(".build/gio") }
    static var script: String { Repository.path("Tests/IntegrationTests/Support/glib-app.py") }

    /// What the monitor reports.
    struct State: Equatable, CustomStringConvertible {
        var available: Bool
        var metered: Bool
        /// GNetworkConnectivity's nick: local, limited, portal, full.
        var connectivity: String

        init(available: Bool, metered: Bool, connectivity: String) {
            self.available = available; self.metered = metered; self.connectivity = connectivity
        }

        init(_ o: [String: Any]) throws {
            available = try JSONValue.bool(o, "available")
            metered = try JSONValue.bool(o, "metered")
            connectivity = try JSONValue.string(o, "connectivity")
        }

        var description: String { "available \(available), metered \(metered), connectivity \(connectivity)" }
    }

    /// can_reach()'s answer: nil error when it said TRUE.
    struct Reach: Equatable, CustomStringConvertible {
        /// GIOErrorEnum's nick ("permission-denied", "network-unreachable").
        var code: String?
        var message: String?
        var description: String { code.map { "\($0): \(message ?? "")" } ?? "reachable" }
    }

    /// One network-changed signal: its `network_available` argument and the properties read in the handler.
    struct Change: CustomStringConvertible {
        var number: Int
        var available: Bool
        var state: State
        /// The process that got it (after `fork`, the parent or its child).
        var pid: Int?
        var description: String { "#\(number) (\(available)): \(state)" }
    }

    let command: EvPipedCommand
    /// The GType of Gio.NetworkMonitor.get_default().
    let type: String
    /// How long get_default() took, in ms.
    let initMilliseconds: Double
    let initial: State
    private(set) var changes: [Change] = []

    /// Runs the app: `uid` nil runs it as root; `environment` adds VAR=value words; `program` replaces
    /// `/usr/bin/python3 glib-app.py` (a program that prints the same first line).
    init(namespace: TestNamespace, socket: String?, uid: UInt32? = 4242, environment: [String] = [],
         program: [String]? = nil, stderrPath: String) throws {
        guard access(Self.python, X_OK) == 0 else { throw HarnessError("\(Self.python) is missing (apt-get install python3-gi)") }
        guard access(Self.moduleDir + "/libgionetpermd.so", R_OK) == 0 else {
            throw HarnessError("\(Self.moduleDir)/libgionetpermd.so is missing: build it first (make gio-module)")
        }
        var argv = ["nsenter", "--net=/run/netns/\(namespace.name)"]
        if let uid { argv += ["setpriv", "--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups"] }
        argv += ["env", "GIO_EXTRA_MODULES=\(Self.moduleDir)", "G_MESSAGES_DEBUG=netpermd"]
        argv += socket.map { ["NETPERMD_SOCKET=\($0)"] } ?? []
        argv += environment + (program ?? [Self.python, Self.script])
        command = try EvPipedCommand(argv, stderrPath: stderrPath, name: "glib-app")
        do {
            let first = try command.channel.readObject(timeout: 10)
            type = try JSONValue.string(first, "type")
            initMilliseconds = (first["init_ms"] as? Double) ?? -1
            initial = try State(first["state"] as? [String: Any] ?? [:])
        } catch {
            command.stop()
            throw HarnessError("the GLib app did not start: \(error)\n--- its stderr ---\n\(command.stderr)")
        }
    }

    /// Its debug log (G_MESSAGES_DEBUG=netpermd) and any warning GLib printed.
    var stderr: String { command.stderr }

    func stop() { command.stop() }

    /// The next line that is not a network-changed signal (those are collected on the way).
    private func reply(timeout: Double = 10) throws -> [String: Any] {
        while true {
            let o = try command.channel.readObject(timeout: timeout)
            guard o["changed"] != nil else { return o }
            try record(o)
        }
    }

    private func record(_ o: [String: Any]) throws {
        changes.append(Change(number: try JSONValue.int(o, "changed"), available: try JSONValue.bool(o, "available"),
                              state: try State(o["state"] as? [String: Any] ?? [:]), pid: o["pid"] as? Int))
    }

    /// The properties now, and how many network-changed signals came so far.
    func state() throws -> State {
        try command.channel.send("state\n")
        let o = try reply()
        let s = try State(o["state"] as? [String: Any] ?? [:])
        let n = try JSONValue.int(o, "changes")
        guard n == changes.count else {
            throw HarnessError("the app counted \(n) network-changed signals, the test read \(changes.count)")
        }
        return s
    }

    /// Forks the app (the child keeps its own main loop and monitor); the child's pid.
    func fork() throws -> Int {
        try command.channel.send("fork\n")
        let o = try reply()
        return try JSONValue.int(o, "forked")
    }

    /// The longest the app's main loop kept a 5 ms timeout waiting over `milliseconds`.
    func longestTickGap(over milliseconds: Int) throws -> Double {
        try command.channel.send("ticks \(milliseconds)\n")
        let o = try reply()
        guard let gap = o["max_gap_ms"] as? Double ?? (o["max_gap_ms"] as? Int).map(Double.init) else {
            throw HarnessError("unexpected reply to ticks: \(o)")
        }
        return gap
    }

    /// can_reach (or can_reach_async) of HOST:PORT.
    func reach(_ host: String, port: Int = 80, async: Bool = false) throws -> Reach {
        try startReach(host, port: port, async: async)
        return try reached(async: async)
    }

    /// Starts can_reach_async of HOST:PORT and returns at once (`reached` reads its answer).
    func startReach(_ host: String, port: Int = 80, async: Bool = true) throws {
        try command.channel.send("\(async ? "reach-async" : "reach") \(host) \(port)\n")
    }

    /// The answer of the can_reach started last.
    func reached(async: Bool = true, timeout: Double = 10) throws -> Reach {
        let key = async ? "reach-async" : "reach"
        let o = try reply(timeout: timeout)
        guard let ok = o[key] as? Bool else { throw HarnessError("unexpected reply to \(key): \(o)") }
        return ok ? Reach(code: nil, message: nil) : Reach(code: o["code"] as? String, message: o["message"] as? String)
    }

    /// Waits until `count` network-changed signals have come in all; returns the last.
    @discardableResult
    func waitForChanges(_ count: Int, _ what: String, timeout: Double = 10) throws -> Change {
        let deadline = monotonicNow() + timeout
        while changes.count < count {
            let left = deadline - monotonicNow()
            guard left > 0 else {
                throw HarnessError("\(what): \(changes.count) network-changed signal(s) within \(timeout) s, expected "
                    + "\(count): \(changes)\n--- the app's stderr ---\n\(stderr.suffix(3000))")
            }
            let o = try command.channel.readObject(timeout: left)
            guard o["changed"] != nil else { throw HarnessError("unexpected line from the app: \(o)") }
            try record(o)
        }
        return changes[count - 1]
    }
}
