// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import NetpermCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Two namespaces for enforcement tests: the daemon's and its clients' (`ns`), and a peer (`peer`) at the other
/// end of each veth, listening on TCP port 7777 for IPv4 and IPv6. Links are named in `ns` as the policy's
/// [Interface] sections classify them. Clients are entered with `nsenter --net` (never `ip netns exec`, which
/// hides the cgroup hierarchy); nothing touches the host's ruleset.
final class EnforcementBed {
    let ns: TestNamespace
    let peer: TestNamespace
    private var listener: ChildProcess?
    /// Each link's peer addresses (IPv4, IPv6), by the link's name in `ns`.
    private(set) var peers: [String: (v4: String, v6: String)] = [:]
    static let port = "7777"
    static let python = "/usr/bin/python3"

    init(_ test: IntegrationTestCase) throws {
        ns = try test.makeNamespace(ipv6: true)
        peer = try test.makeNamespace(ipv6: true)
        let l = try Subprocess.spawn(["ip", "netns", "exec", peer.name, "socat", "-u",
                                      "TCP6-LISTEN:\(Self.port),fork,reuseaddr,ipv6only=0", "/dev/null"],
                                     stdin: .devNull, stdout: .devNull, stderr: .devNull, ownGroup: true)
        listener = l
        test.addTeardownBlock { l.killAndReap() }
    }

    /// Stops the peer's server and every child it forked for a connection (its process group), as teardown does.
    func stopListener() {
        listener?.killAndReap()
    }

    /// A veth `name` in `ns`, its other end in `peer`, with 10.N.0.1/24 and fd00:N::1/64 on this side.
    func addLink(_ name: String, subnet n: Int) throws {
        try Self.addVeth(name, in: ns, peerName: "p\(n)", in: peer, subnet: n)
        peers[name] = ("10.\(n).0.2", "fd00:\(n)::2")
    }

    /// A veth `name` in `ns` and `peerName` in `peer`, both up: 10.N.0.1/24 and fd00:N::1/64 on this side, .2 on the
    /// peer's (the beds of the block and steer tests share it).
    static func addVeth(_ name: String, in ns: TestNamespace, peerName other: String, in peer: TestNamespace,
                        subnet n: Int) throws {
        try ns.ip("link", "add", name, "type", "veth", "peer", "name", other, "netns", peer.name)
        try ns.ip("addr", "add", "10.\(n).0.1/24", "dev", name)
        try ns.ip("-6", "addr", "add", "fd00:\(n)::1/64", "dev", name, "nodad")
        try ns.ip("link", "set", name, "up")
        try peer.ip("addr", "add", "10.\(n).0.2/24", "dev", other)
        try peer.ip("-6", "addr", "add", "fd00:\(n)::2/64", "dev", other, "nodad")
        try peer.ip("link", "set", other, "up")
    }

    func deleteLink(_ name: String) throws {
        try ns.ip("link", "del", name)
        peers[name] = nil
    }

    /// What a client saw: `tcp` is "ok" or connect()'s errno name ("ECONNREFUSED", "timeout"), `udp` the same for
    /// sendto(), `ms` how long connect() took.
    struct Probe: Equatable, CustomStringConvertible {
        var family: String
        var tcp: String
        var udp: String
        var ms: Int
        var description: String { "IPv\(family): tcp \(tcp) (\(ms) ms), udp \(udp)" }
        /// What docs/ENFORCEMENT.md promises: connect() ECONNREFUSED, IPv4 and IPv6 (the peer listens, so a real
        /// refusal cannot be mistaken for it), sendto() EPERM.
        var blocked: Bool { tcp == "ECONNREFUSED" && udp == "EPERM" }
        var passed: Bool { tcp == "ok" && udp == "ok" }
    }

    private static let script = """
        import errno, json, socket, sys, time
        host, port = sys.argv[1], int(sys.argv[2])
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        def name(e):
            return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
        out = {}
        t = time.monotonic()
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect((host, port)); out["tcp"] = "ok"
        except socket.timeout:
            out["tcp"] = "timeout"
        except OSError as e:
            out["tcp"] = name(e)
        out["ms"] = int((time.monotonic() - t) * 1000)
        u = socket.socket(fam, socket.SOCK_DGRAM)
        try:
            u.sendto(b"x", (host, port)); out["udp"] = "ok"
        except OSError as e:
            out["udp"] = name(e)
        print(json.dumps(out))
        """

    /// A client as `uid` (nil: root), in the cgroup directory `cgroup` (nil: the test's own), sending to the peer
    /// of `link` by `family` ("4" or "6").
    func probe(uid: UInt32? = nil, cgroup: String? = nil, link: String, family: String = "4") throws -> Probe {
        guard let addrs = peers[link] else { throw HarnessError("no link \(link)") }
        let host = family == "6" ? addrs.v6 : addrs.v4
        var argv = ["nsenter", "--net=/run/netns/\(ns.name)"]
        // Into the cgroup first, as root; then the uid.
        if let cgroup {
            argv += ["sh", "-c", #"echo $$ > "$0/cgroup.procs" && exec "$@""#, cgroup]
        }
        if let uid { argv += ["setpriv", "--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups"] }
        argv += [Self.python, "-c", Self.script, host, Self.port]
        let r = try Subprocess.run(argv, timeout: 10)
        guard r.status == 0,
              let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any],
              let tcp = o["tcp"] as? String, let udp = o["udp"] as? String, let ms = o["ms"] as? Int else {
            throw HarnessError("probe failed: \(r.summary)")
        }
        return Probe(family: family, tcp: tcp, udp: udp, ms: ms)
    }

    /// `nft ARGS` in `ns`.
    func nft(_ args: String...) throws -> CommandResult {
        try Subprocess.run(["nsenter", "--net=/run/netns/\(ns.name)", "nft"] + args)
    }

    /// The daemon's table as nft lists it, or nil when there is none.
    func table() throws -> String? {
        let r = try nft("list", "table", "inet", "netpermd")
        return r.status == 0 ? r.stdout : nil
    }

    /// What the beds' tests run: fails at once, naming the package, when one is missing.
    static func requireTools() throws {
        for tool in ["nft", "nsenter", "setpriv"] where !Subprocess.resolve(tool).hasPrefix("/") {
            throw HarnessError("\(tool) is not installed (make deps installs nftables and util-linux)")
        }
    }

    /// Removes cgroup directories (paths as bytes: a name need not be text), deepest last in `paths`, so removed
    /// first. Clients have exited and been reaped, but the kernel may take a moment to see a cgroup unpopulated.
    static func removeCgroups(_ paths: [[CChar]]) {
        let deadline = monotonicNow() + 5
        for d in paths.reversed() {
            while rmdir(d) != 0 && errno == EBUSY && monotonicNow() < deadline { usleep(10_000) }
        }
    }

    /// The cgroup v2 hierarchy's mount point in the test's own mount namespace.
    static func cgroupRoot() throws -> String {
        let text = try readProcFile("/proc/self/mountinfo")
        guard let root = UnitCgroups.unifiedMountPoint(mountinfo: text) else {
            throw HarnessError("no cgroup2 mount in /proc/self/mountinfo")
        }
        return root
    }

    /// A slice of the test's own at the hierarchy's root, `netpermtest-PID.slice`, where a test makes its units'
    /// cgroups as systemd lays them out (`netpermtest-PID.slice/NAME.service`, level 2), so that it runs on a
    /// machine without systemd's slices as on one with them. Made before the daemon starts (it finds slices when
    /// it starts); removed at teardown, after what the test made in it (teardown blocks run last first).
    /// Slices left by test processes that died before their teardown (`netpermtest-PID.slice` whose PID no longer
    /// runs), with the empty cgroups in them.
    static func removeLeftoverSlices() {
        guard let root = try? cgroupRoot(),
              let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return }
        for name in names where name.hasPrefix("netpermtest-") && name.hasSuffix(".slice") {
            guard let pid = pid_t(name.dropFirst("netpermtest-".count).dropLast(".slice".count)), pid != getpid(),
                  kill(pid, 0) != 0 && errno == ESRCH else { continue }
            let slice = root + "/" + name
            for child in (try? FileManager.default.contentsOfDirectory(atPath: slice)) ?? []
            where !child.contains(".") || child.hasSuffix(".service") || child.hasSuffix(".scope") {
                rmdir(slice + "/" + child)
            }
            rmdir(slice)
        }
    }

    static func makeTestSlice(_ test: IntegrationTestCase) throws -> String {
        let slice = try cgroupRoot() + "/netpermtest-\(getpid()).slice"
        guard mkdir(slice, 0o755) == 0 || errno == EEXIST else {
            throw HarnessError("mkdir \(slice): \(String(cString: strerror(errno)))")
        }
        test.addTeardownBlock {
            if rmdir(slice) != 0 && errno != ENOENT {
                XCTFail("\(slice) is left behind: \(String(cString: strerror(errno)))")
            }
        }
        return slice
    }
}

extension EnforcementBed {
    /// A unit that starts as others come and go (Support/first-refused.py): makes `scope`, moves a process into it
    /// and sends a datagram to `link`'s peer every millisecond until one is refused. The milliseconds from its mkdir
    /// to that refusal (nil: none within `timeout` s), and how many datagrams passed before.
    func firstRefused(scope: String, link: String, timeout: Double = 5) throws -> (ms: Double?, passed: Int) {
        guard let addrs = peers[link] else { throw HarnessError("no link \(link)") }
        let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(ns.name)", Self.python,
                                    Repository.path("Tests/IntegrationTests/Support/first-refused.py"), scope, addrs.v4,
                                    Self.port, String(timeout)], timeout: timeout + 20)
        guard r.status == 0, let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any],
              let passed = o["passed"] as? Int else {
            throw HarnessError("first-refused.py failed: \(r.summary)")
        }
        return (o["ms"] as? Double, passed)
    }
}

extension IntegrationTestCase {
    /// Waits until the daemon at `socket` says its rules are in force (STATUS's `enforcement.state`).
    func waitForEnforcing(_ socket: String, _ what: String = "the rules are in force", timeout: Double = 5) throws {
        try waitUntil(what, timeout: timeout) {
            let e = try self.request(socket, "STATUS")["enforcement"] as? [String: Any]
            return (e?["state"] as? String == "enforcing", "\(e ?? [:])")
        }
    }

    /// What docs/ENFORCEMENT.md promises of a refused client: connect() ECONNREFUSED and sendto() EPERM, at once
    /// (not after a time-out).
    func assertBlocked(_ p: EnforcementBed.Probe, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(p.blocked, "\(what): \(p)", file: file, line: line)
        XCTAssertLessThan(p.ms, 1000, "\(what): rejected at once, not after a time-out", file: file, line: line)
    }
}
