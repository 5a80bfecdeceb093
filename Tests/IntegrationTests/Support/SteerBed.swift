// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Mode=steer's bed: the app's namespace `ns` with `wwan0` (10.81.0.1, fd00:81::1) and `wifi0` (10.82.0.1,
/// fd00:82::1), both veths to `peer`, whose server addresses 10.99.0.1 and fd99::1 (on its loopback) are reached
/// through either gateway. The main table's defaults: via wwan0 metric 100, via wifi0 metric 600 (cellular
/// preferred, as a modem's are). A listener in `peer` writes the source address of each TCP connection and UDP
/// datagram to port 7777 to a file. Clients enter with `nsenter --net` (cgroups stay visible).
final class SteerBed {
    let ns: TestNamespace
    let peer: TestNamespace
    let dir: String
    static let server = (v4: "10.99.0.1", v6: "fd99::1")
    static let address = ["wwan0": (v4: "10.81.0.1", v6: "fd00:81::1"), "wifi0": (v4: "10.82.0.1", v6: "fd00:82::1")]
    static let python = "/usr/bin/python3"
    var seenPath: String { dir + "/seen.txt" }

    private static let listener = """
        import select, socket, sys
        out = open(sys.argv[1], "a", buffering=1)
        t = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        t.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        t.bind(("::", 7777)); t.listen(64)
        u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        u.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        u.bind(("::", 7777))
        def addr(a): return a[0][7:] if a[0].startswith("::ffff:") else a[0]
        while True:
            r, _, _ = select.select([t, u], [], [])
            if t in r:
                c, a = t.accept(); out.write("tcp " + addr(a) + "\\n"); c.close()
            if u in r:
                _, a = u.recvfrom(64); out.write("udp " + addr(a) + "\\n")
        """

    init(_ test: IntegrationTestCase, dir: String) throws {
        self.dir = dir
        ns = try test.makeNamespace(ipv6: true)
        peer = try test.makeNamespace(ipv6: true)
        try peer.ip("addr", "add", "10.99.0.1/32", "dev", "lo")
        try peer.ip("-6", "addr", "add", "fd99::1/128", "dev", "lo")
        for (name, n, other) in [("wwan0", 81, "p1"), ("wifi0", 82, "p2")] {
            try EnforcementBed.addVeth(name, in: ns, peerName: other, in: peer, subnet: n)
        }
        try addDefaults(wifi: true, wwan: true)
        _ = FileManager.default.createFile(atPath: seenPath, contents: nil)
        let l = try Subprocess.spawn(["ip", "netns", "exec", peer.name, Self.python, "-c", Self.listener, seenPath],
                                     stdin: .devNull, stdout: .devNull, stderr: .devNull)
        test.addTeardownBlock { l.killAndReap() }
    }

    func addDefaults(wifi: Bool, wwan: Bool) throws {
        if wwan {
            try ns.ip("route", "replace", "default", "via", "10.81.0.2", "dev", "wwan0", "metric", "100")
            try ns.ip("-6", "route", "replace", "default", "via", "fd00:81::2", "dev", "wwan0", "metric", "100")
        }
        if wifi {
            try ns.ip("route", "replace", "default", "via", "10.82.0.2", "dev", "wifi0", "metric", "600")
            try ns.ip("-6", "route", "replace", "default", "via", "fd00:82::2", "dev", "wifi0", "metric", "600")
        }
    }

    /// What the peer has seen so far, one "tcp|udp ADDRESS" per line.
    var seen: [String] {
        ((try? String(contentsOfFile: seenPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// What a client saw: `tcp`/`udp` "ok" or the errno's name, `source` its TCP socket's local address,
    /// `mark` its socket's SO_MARK, `ms` how long connect() took.
    struct Probe: CustomStringConvertible {
        var tcp: String, udp: String, source: String, udpSource: String, mark: UInt32, ms: Int
        var description: String { "tcp \(tcp) from \(source) (\(ms) ms), udp \(udp) from \(udpSource), mark \(String(mark, radix: 16))" }
        var passed: Bool { tcp == "ok" && udp == "ok" }
    }

    private static let script = """
        import errno, json, socket, sys, time
        host = sys.argv[1]
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        def name(e): return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
        out = {"source": "", "udp_source": ""}
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(3)
        out["mark"] = s.getsockopt(socket.SOL_SOCKET, 36)
        t = time.monotonic()
        try:
            s.connect((host, 7777)); out["tcp"] = "ok"; out["source"] = s.getsockname()[0]
        except socket.timeout:
            out["tcp"] = "timeout"
        except OSError as e:
            out["tcp"] = name(e)
        out["ms"] = int((time.monotonic() - t) * 1000)
        u = socket.socket(fam, socket.SOCK_DGRAM)
        try:
            u.connect((host, 7777)); u.send(b"x"); out["udp"] = "ok"; out["udp_source"] = u.getsockname()[0]
        except OSError as e:
            out["udp"] = name(e)
        print(json.dumps(out))
        """

    /// A client as `uid` (nil: root), in the cgroup directory `cgroup` (nil: the test's own), to the server by
    /// `family` ("4" or "6").
    func probe(uid: UInt32? = nil, cgroup: String? = nil, family: String = "4") throws -> Probe {
        var argv = ["nsenter", "--net=/run/netns/\(ns.name)"]
        if let cgroup { argv += ["sh", "-c", #"echo $$ > "$0/cgroup.procs" && exec "$@""#, cgroup] }
        if let uid { argv += ["setpriv", "--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups"] }
        argv += [Self.python, "-c", Self.script, family == "6" ? Self.server.v6 : Self.server.v4]
        let r = try Subprocess.run(argv, timeout: 10)
        guard r.status == 0,
              let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any],
              let tcp = o["tcp"] as? String, let udp = o["udp"] as? String, let ms = o["ms"] as? Int,
              let mark = o["mark"] as? Int else {
            throw HarnessError("probe failed: \(r.summary)")
        }
        return Probe(tcp: tcp, udp: udp, source: o["source"] as? String ?? "", udpSource: o["udp_source"] as? String ?? "",
                     mark: UInt32(mark), ms: ms)
    }

    /// Steering's routing rules in `ns` (`ip rule` lines at its priority), both families.
    func rules() throws -> [String] {
        (try ns.ip("rule").lines + ns.ip("-6", "rule").lines).filter { $0.hasPrefix("28239:") }
    }

    /// The routes of steering's tables (28240-28303), both families.
    func steeringRoutes() throws -> [String] {
        (try ns.ip("route", "show", "table", "all").lines + ns.ip("-6", "route", "show", "table", "all").lines)
            .filter { l in (28240..<28304).contains { l.contains("table \($0)") } }
    }

    /// `ip route get SERVER mark MARK` in `ns`: the link the kernel picks for a socket so marked.
    func routeGet(mark: UInt32, family: String = "4") throws -> String {
        try ns.ip(family == "6" ? "-6" : "-4", "route", "get", family == "6" ? Self.server.v6 : Self.server.v4,
                  "mark", "0x" + String(mark, radix: 16)).stdout
    }

    /// The names of the BPF programs loaded on this machine (BPF_PROG_GET_NEXT_ID, then each one's info).
    static func programNames() throws -> [String] {
        let script = """
            import ctypes, struct
            libc = ctypes.CDLL(None, use_errno=True)
            def bpf(cmd, attr):
                b = ctypes.create_string_buffer(attr, 128)
                return libc.syscall(321, cmd, b, 128), b
            i, names = 0, []
            while True:
                r, b = bpf(11, struct.pack("<I", i))
                if r < 0: break
                i = struct.unpack_from("<I", b.raw, 4)[0]
                fd, _ = bpf(13, struct.pack("<I", i))
                if fd < 0: continue
                info = ctypes.create_string_buffer(256)
                r, _ = bpf(15, struct.pack("<IIQ", fd, 256, ctypes.addressof(info)))
                libc.close(fd)
                if r == 0: names.append(info.raw[64:80].split(b"\\0")[0].decode())
            print("\\n".join(names))
            """
        let r = try Subprocess.run([python, "-c", script])
        guard r.status == 0 else { throw HarnessError("listing BPF programs: \(r.summary)") }
        return r.lines.filter { !$0.isEmpty }
    }
}
