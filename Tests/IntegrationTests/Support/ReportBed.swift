// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Two namespaces for the privacy report's tests: the daemon's and its apps' (`ns`: wlan0 10.41.0.1, wwan0
/// 10.42.0.1), and a peer at the other end of both veths with two addresses on each side. The peer runs the test's
/// own DNS server (dnsmasq on 10.41.0.2, logging every query it answers to `dnsLog`) for three names, and a TCP
/// server on port 7901 of every address that logs each connection it accepts (`acceptLog`: "SOURCE DESTINATION").
/// Both logs are the peer's word, not the daemon's: the report is judged against them.
final class ReportBed {
    let ns: TestNamespace
    let peer: TestNamespace
    let dnsLog: String
    let acceptLog: String
    static let python = EnforcementBed.python
    static let dns = "10.41.0.2", port = 7901
    /// The names the DNS server knows, and their addresses: one over wifi, two over wwan.
    static let names = ["maps.report.test": "10.41.0.3", "tiles.report.test": "10.42.0.2", "api.report.test": "10.42.0.3"]

    init(_ test: IntegrationTestCase, dir: String) throws {
        ns = try test.makeNamespace()
        peer = try test.makeNamespace()
        dnsLog = dir + "/dns.log"
        acceptLog = dir + "/accept.log"
        for (name, n) in [("wlan0", 41), ("wwan0", 42)] {
            try ns.ip("link", "add", name, "type", "veth", "peer", "name", "p\(n)", "netns", peer.name)
            try ns.ip("addr", "add", "10.\(n).0.1/24", "dev", name)
            try ns.ip("link", "set", name, "up")
            try peer.ip("addr", "add", "10.\(n).0.2/24", "dev", "p\(n)")
            try peer.ip("addr", "add", "10.\(n).0.3/24", "dev", "p\(n)")
            try peer.ip("link", "set", "p\(n)", "up")
        }
        let dnsmasq = try Repository.requireTool("dnsmasq", package: "dnsmasq-base")
        let server = try Subprocess.spawn(
            ["ip", "netns", "exec", peer.name, dnsmasq, "--keep-in-foreground", "--no-daemon", "--conf-file=/dev/null",
             "--no-resolv", "--no-hosts", "--user=root", "--group=root", "--pid-file=", "--bind-interfaces",
             "--listen-address=\(Self.dns)", "--log-queries", "--log-facility=\(dnsLog)"]
                + Self.names.sorted { $0.key < $1.key }.map { "--address=/\($0.key)/\($0.value)" }
                + ["--address=/\(Self.burstDomain)/10.41.0.3"],
            stdin: .devNull, stdout: .appendFile(dir + "/dnsmasq.out"), stderr: .appendFile(dir + "/dnsmasq.out"))
        test.addTeardownBlock { server.killAndReap() }
        let acceptor = try Subprocess.spawn(["ip", "netns", "exec", peer.name, Self.python, "-c", Self.acceptScript,
                                             String(Self.port), acceptLog],
                                            stdin: .devNull, stdout: .appendFile(dir + "/peer.log"),
                                            stderr: .appendFile(dir + "/peer.log"))
        test.addTeardownBlock { acceptor.killAndReap() }
        try test.waitUntil("the peer's DNS server and acceptor listen") {
            let r = try Subprocess.run(["ip", "netns", "exec", self.peer.name, "ss", "-Hlntu"])
            return (r.stdout.contains("\(Self.dns):53") && r.stdout.contains(":\(Self.port)"), r.summary)
        }
    }

    /// Names the DNS server answered, each as often as it was asked (`query[A] NAME from 10.41.0.1`).
    func dnsQueries() -> [String] {
        let text = (try? String(contentsOfFile: dnsLog, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            guard let r = line.range(of: "query[A] ") else { return nil }
            return line[r.upperBound...].split(separator: " ").first.map(String.init)
        }
    }

    /// The destinations the acceptor accepted connections on, in order.
    func accepted() -> [String] {
        let text = (try? String(contentsOfFile: acceptLog, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) }
    }

    /// An app in `ns` as `uid`: `resolve NAME...` (each asked of the DNS server on a socket of its own, then a TCP
    /// connection to its first address) or `connect ADDRESS...`. Returns what it printed (one JSON object).
    func app(uid: UInt32, _ args: String...) throws -> [String: Any] { try app(uid: uid, args) }

    func app(uid: UInt32, _ args: [String]) throws -> [String: Any] {
        let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(ns.name)", "setpriv", "--reuid", "\(uid)", "--regid",
                                    "\(uid)", "--clear-groups", Self.python, "-c", Self.appScript, Self.dns, String(Self.port)]
                                    + args, timeout: 30)
        guard r.status == 0, let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any] else {
            throw HarnessError("app failed: \(r.summary)")
        }
        return o
    }

    static let acceptScript = """
        import socket, sys
        port, log = int(sys.argv[1]), sys.argv[2]
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", port)); s.listen(64)
        while True:
            c, a = s.accept()
            with open(log, "a") as f:
                f.write("%s %s\\n" % (a[0], c.getsockname()[0]))
            c.close()
        """

    static let appScript = """
        import errno, json, random, socket, struct, sys
        dns, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        out = {"addresses": {}, "errors": {}}
        def name(e):
            return errno.errorcode.get(e.errno, str(e.errno)) if getattr(e, "errno", None) else type(e).__name__
        def resolve(host):
            q = struct.pack(">HHHHHH", random.randrange(65536), 0x0100, 1, 0, 0, 0)
            q += b"".join(bytes([len(l)]) + l.encode() for l in host.split(".")) + b"\\0" + struct.pack(">HH", 1, 1)
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5); u.connect((dns, 53)); u.send(q)
            r = u.recv(4096); u.close()
            at = 12 + len(q) - 12
            for _ in range(struct.unpack(">H", r[6:8])[0]):
                at += 2 if r[at] & 0xC0 == 0xC0 else r.index(b"\\0", at) - at + 1
                t, c, ttl, n = struct.unpack(">HHIH", r[at:at + 10]); at += 10
                if t == 1: return socket.inet_ntoa(r[at:at + n])
                at += n
        def connect(address):
            try:
                s = socket.create_connection((address, port), timeout=5); s.recv(1); s.close()
            except OSError as e:
                out["errors"][address] = name(e)
        if mode == "resolve":
            for host in sys.argv[4:]:
                a = resolve(host); out["addresses"][host] = a; connect(a)
        else:
            for a in sys.argv[4:]: connect(a)
        print(json.dumps(out))
        """
}
