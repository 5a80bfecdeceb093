// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// A resolver on the apps' namespace's loopback, as a machine's own (systemd-resolved on 127.0.0.53, dnsmasq on
/// 127.0.0.1): it answers the apps from what it asks the test's DNS server, so the server's log still says what
/// was resolved. Apps that ask it send their own query over lo.
extension ReportBed {
    static let loopbackResolver = "127.0.0.53"
    /// Every name under it is 10.41.0.3 (the DNS server's `--address=/burst.report.test/...`).
    static let burstDomain = "burst.report.test"

    func startLoopbackResolver(_ test: IntegrationTestCase, dir: String) throws {
        try ns.ip("addr", "add", Self.loopbackResolver + "/8", "dev", "lo")
        let dnsmasq = try Repository.requireTool("dnsmasq", package: "dnsmasq-base")
        let out = dir + "/dnsmasq-lo.out"
        let resolver = try Subprocess.spawn(
            ["ip", "netns", "exec", ns.name, dnsmasq, "--keep-in-foreground", "--no-daemon", "--conf-file=/dev/null",
             "--no-resolv", "--no-hosts", "--user=root", "--group=root", "--pid-file=", "--bind-interfaces",
             "--listen-address=\(Self.loopbackResolver)", "--server=\(Self.dns)", "--cache-size=0"],
            stdin: .devNull, stdout: .appendFile(out), stderr: .appendFile(out))
        test.addTeardownBlock { resolver.killAndReap() }
        try test.waitUntil("the loopback resolver listens") {
            let r = try Subprocess.run(["ip", "netns", "exec", self.ns.name, "ss", "-Hlnu"])
            return (r.stdout.contains("\(Self.loopbackResolver):53"), r.summary)
        }
    }

    /// `app(uid:_:)` asking `dns` instead of the test's server.
    func app(uid: UInt32, dns: String, _ args: [String]) throws -> [String: Any] {
        let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(ns.name)", "setpriv", "--reuid", "\(uid)", "--regid",
                                    "\(uid)", "--clear-groups", Self.python, "-c", Self.appScript, dns, String(Self.port)]
                                    + args, timeout: 30)
        guard r.status == 0, let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any] else {
            throw HarnessError("app failed: \(r.summary)")
        }
        return o
    }

    /// An app as `uid` that asks `count` names under `burstDomain` on one socket, 50 at once (n0 first, n`count-1`
    /// last) and reads every answer: what a page of a browser does before it connects.
    func burst(uid: UInt32, count: Int) throws -> [String: Any] {
        let script = """
            import json, socket, struct, sys
            dns, port, count, domain = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5); u.connect((dns, 53))
            answered = 0
            for start in range(0, count, 50):   # 50 at a time: what the sockets on either side hold
                batch = range(start, min(count, start + 50))
                for n in batch:
                    q = struct.pack(">HHHHHH", n, 0x0100, 1, 0, 0, 0)
                    q += b"".join(bytes([len(l)]) + l.encode() for l in ("n%d.%s" % (n, domain)).split(".")) + b"\\0"
                    u.send(q + struct.pack(">HH", 1, 1))
                try:
                    for n in batch:
                        u.recv(4096); answered += 1
                except socket.timeout:
                    break
            print(json.dumps({"answered": answered}))
            """
        let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(ns.name)", "setpriv", "--reuid", "\(uid)", "--regid",
                                    "\(uid)", "--clear-groups", Self.python, "-c", script, Self.dns, String(Self.port),
                                    String(count), Self.burstDomain], timeout: 60)
        guard r.status == 0, let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any] else {
            throw HarnessError("burst failed: \(r.summary)")
        }
        return o
    }
}
