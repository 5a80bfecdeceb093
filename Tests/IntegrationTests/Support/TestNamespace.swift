// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A network namespace of our own. Every link a test creates lives in it; the host's links are never touched.
final class TestNamespace: @unchecked Sendable {
    nonisolated(unsafe) private static var counter = 0
    static let prefix = "npt-"

    let name: String
    private(set) var deleted = false

    /// Creates "npt-<pid>-<n>" with loopback up and, unless `ipv6`, IPv6 off (no link-local addresses or DAD
    /// appearing at random moments, so two looks at a quiet namespace agree). With `ipv6`, new links get no
    /// link-local address and skip DAD, for the same reason.
    init(ipv6: Bool = false) throws {
        Self.counter += 1
        name = "\(Self.prefix)\(getpid())-\(Self.counter)"
        try Subprocess.check(["ip", "netns", "add", name])
        do {
            let sysctls = ipv6
                ? ["net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
                   "net.ipv6.conf.default.addr_gen_mode=1", "net.ipv6.conf.all.addr_gen_mode=1",
                   "net.ipv6.conf.default.accept_ra=0"]
                : ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
            try Subprocess.check(["ip", "netns", "exec", name, "sysctl", "-q", "-w"] + sysctls)
            try ip("link", "set", "lo", "up")
        } catch {
            delete()
            throw error
        }
    }

    /// `ip -n NAME args...`; throws unless it succeeds.
    @discardableResult
    func ip(_ args: String...) throws -> CommandResult {
        try Subprocess.check(["ip", "-n", name] + args)
    }

    /// A veth pair, both ends in this namespace, both up.
    func addVethPair(_ end: String, peer: String) throws {
        try ip("link", "add", end, "type", "veth", "peer", "name", peer)
        try ip("link", "set", end, "up")
        try ip("link", "set", peer, "up")
    }

    /// Runs a file of `ip` commands in one process (`ip -n NAME -batch FILE`).
    func batch(_ lines: [String], scratchDir: String) throws {
        let path = "\(scratchDir)/ip-batch-\(monotonicNow()).txt"
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        try Subprocess.check(["ip", "-n", name, "-batch", path], timeout: 30)
    }

    /// The kernel's view of every link: `ip -n NAME -j link`.
    func kernelLinks() throws -> [KernelLink] {
        let r = try ip("-j", "link")
        guard let array = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [[String: Any]] else {
            throw HarnessError("`ip -j link` did not print a JSON array: \(r.stdout)")
        }
        return try array.map { try KernelLink(ipJSON: $0) }.sorted { $0.name < $1.name }
    }

    /// Default routes in the main table, by device name, lowest metric first.
    func kernelDefaultRoutes() throws -> [String: Int] {
        let r = try ip("-4", "-j", "route", "show", "table", "main", "default")
        guard let array = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [[String: Any]] else {
            throw HarnessError("`ip -j route` did not print a JSON array: \(r.stdout)")
        }
        var routes: [String: Int] = [:]
        for route in array {
            guard let dev = route["dev"] as? String else { continue }
            let metric = route["metric"] as? Int ?? 0
            routes[dev] = min(routes[dev] ?? .max, metric)
        }
        return routes
    }

    /// Kills what still runs in it, then deletes it: nothing a test started here outlives the test, whatever it
    /// left (a server's forked children, whose connections the rules may have cut mid-way, hang on forever
    /// otherwise; `ip netns del` alone leaves them running).
    func delete() {
        guard !deleted else { return }
        deleted = true
        Self.killProcesses(in: name)
        _ = try? Subprocess.run(["ip", "netns", "del", name])
    }

    /// SIGKILLs every process in namespace `name` (`ip netns pids`) until none is left; bounded (2 s). A killed
    /// process leaves the list once it has exited, zombie or not.
    static func killProcesses(in name: String) {
        let deadline = monotonicNow() + 2
        while let pids = processes(in: name) {
            if pids.isEmpty || monotonicNow() >= deadline { return }
            for p in pids { kill(p, SIGKILL) }
            usleep(5000)
        }
    }

    /// The processes in namespace `name` (`ip netns pids`), never this one; nil if it cannot be read.
    static func processes(in name: String) -> [pid_t]? {
        guard let r = try? Subprocess.run(["ip", "netns", "pids", name]), r.status == 0 else { return nil }
        return r.lines.compactMap { pid_t($0.trimmingCharacters(in: .whitespaces)) }.filter { $0 != getpid() }
    }

    /// Whether `ip netns list` still shows this namespace.
    func stillListed() -> Bool {
        guard let r = try? Subprocess.run(["ip", "netns", "list"]) else { return false }
        return r.lines.contains { $0.split(separator: " ").first.map(String.init) == name }
    }

    /// Deletes namespaces left behind by earlier test processes that died before their teardown
    /// ("npt-<pid>-<n>" whose pid no longer runs). Namespaces of live processes are left alone.
    static func removeLeftovers() {
        guard let r = try? Subprocess.run(["ip", "netns", "list"]) else { return }
        for line in r.lines {
            guard let ns = line.split(separator: " ").first.map(String.init), ns.hasPrefix(prefix) else { continue }
            let parts = ns.dropFirst(prefix.count).split(separator: "-")
            guard parts.count == 2, let pid = pid_t(parts[0]), pid != getpid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH {
                killProcesses(in: ns)
                _ = try? Subprocess.run(["ip", "netns", "del", ns])
            }
        }
    }
}

/// One link as `ip -j link` reports it, reduced to what the daemon also reports.
struct KernelLink: Equatable, CustomStringConvertible {
    var name: String
    var index: Int
    var adminUp: Bool
    var carrier: Bool
    /// Lowercase, as libnl spells it ("up", "down", "lowerlayerdown", "unknown").
    var operstate: String

    init(name: String, index: Int, adminUp: Bool, carrier: Bool, operstate: String) {
        self.name = name; self.index = index; self.adminUp = adminUp; self.carrier = carrier
        self.operstate = operstate
    }

    init(ipJSON o: [String: Any]) throws {
        guard let name = o["ifname"] as? String, let index = o["ifindex"] as? Int,
              let flags = o["flags"] as? [String], let oper = o["operstate"] as? String else {
            throw HarnessError("unexpected `ip -j link` entry: \(o)")
        }
        self.init(name: name, index: index, adminUp: flags.contains("UP"), carrier: flags.contains("LOWER_UP"),
                  operstate: oper.lowercased())
    }

    var description: String {
        "\(name)#\(index)(admin \(adminUp ? "up" : "down"), carrier \(carrier ? "on" : "off"), oper \(operstate))"
    }
}
