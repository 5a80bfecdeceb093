// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Two namespaces for the usage tests: the daemon's and its apps' (`ns`), and a peer (`peer`) at the other end of
/// each veth, which counts what it receives and sends per flow with nft counters of its own (independent of the
/// daemon), and serves: a TCP sink (port 7801), a UDP echo (7802) and a TCP source (7803: sends as many bytes as the
/// first line asks, and logs each connection's outcome to `sourceLog`) and a UDP pusher (7804: a line "HOST PORT COUNT
/// SIZE" makes it send COUNT datagrams from port 7805 to HOST:PORT, each after the reply to the last). IPv6 is off and neighbours are static, so
/// every frame a link carries is an IP packet the rules saw: the links' own counters can be compared exactly.
final class UsageBed {
    let ns: TestNamespace
    let peer: TestNamespace
    /// Each link's peer address, by the link's name in `ns`.
    private(set) var peers: [String: String] = [:]
    let sourceLog: String
    static let python = EnforcementBed.python
    static let sink = 7801, echo = 7802, source = 7803, pusher = 7804, push = 7805

    /// `wwan0` (subnet 31, classified wwan: metered) and `eth0` (subnet 32, ethernet).
    init(_ test: IntegrationTestCase, dir: String) throws {
        ns = try test.makeNamespace()
        peer = try test.makeNamespace()
        sourceLog = dir + "/source.log"
        for (name, n) in [("wwan0", 31), ("eth0", 32)] {
            try ns.ip("link", "add", name, "type", "veth", "peer", "name", "p\(n)", "netns", peer.name)
            try ns.ip("addr", "add", "10.\(n).0.1/24", "dev", name)
            try ns.ip("link", "set", name, "up")
            try peer.ip("addr", "add", "10.\(n).0.2/24", "dev", "p\(n)")
            try peer.ip("link", "set", "p\(n)", "up")
            try ns.ip("neigh", "replace", "10.\(n).0.2", "lladdr", try Self.mac("p\(n)", in: peer), "dev", name, "nud", "permanent")
            try peer.ip("neigh", "replace", "10.\(n).0.1", "lladdr", try Self.mac(name, in: ns), "dev", "p\(n)", "nud", "permanent")
            peers[name] = "10.\(n).0.2"
        }
        let counters = """
            table inet peer {
                counter sink_in {}
                counter sink_out {}
                counter echo_in {}
                counter echo_out {}
                counter source_in {}
                counter source_out {}
                counter push_in {}
                counter push_out {}
                chain pre {
                    type filter hook prerouting priority -300; policy accept;
                    tcp dport \(Self.sink) counter name "sink_in"
                    udp dport \(Self.echo) counter name "echo_in"
                    tcp dport \(Self.source) counter name "source_in"
                    udp dport \(Self.push) counter name "push_in"
                }
                chain post {
                    type filter hook postrouting priority 300; policy accept;
                    tcp sport \(Self.sink) counter name "sink_out"
                    udp sport \(Self.echo) counter name "echo_out"
                    tcp sport \(Self.source) counter name "source_out"
                    udp sport \(Self.push) counter name "push_out"
                }
            }
            """
        try Subprocess.check(["ip", "netns", "exec", peer.name, "nft", "-f", "-"], input: Array(counters.utf8))
        let server = try Subprocess.spawn(["ip", "netns", "exec", peer.name, Self.python, "-c", Self.serverScript,
                                           String(Self.sink), String(Self.echo), String(Self.source), sourceLog,
                                           String(Self.pusher), String(Self.push)],
                                          stdin: .devNull, stdout: .appendFile(dir + "/peer.log"),
                                          stderr: .appendFile(dir + "/peer.log"))
        test.addTeardownBlock { server.killAndReap() }
        try test.waitUntil("the peer listens") {
            let r = try Subprocess.run(["ip", "netns", "exec", self.peer.name, "ss", "-Hltn", "sport", "=", ":\(Self.sink)"])
            return (r.lines.count == 1, r.summary)
        }
    }

    static func mac(_ link: String, in ns: TestNamespace) throws -> String {
        let r = try ns.ip("-j", "link", "show", "dev", link)
        guard let o = (try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [[String: Any]])?.first,
              let mac = o["address"] as? String else { throw HarnessError("no address of \(link): \(r.stdout)") }
        return mac
    }

    /// One of the peer's counters: IP bytes and packets of its flows, as its own kernel counted them.
    func peerCounter(_ name: String) throws -> (bytes: Int, packets: Int) {
        let r = try Subprocess.check(["ip", "netns", "exec", peer.name, "nft", "-j", "list", "counter", "inet", "peer", name])
        let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any]
        for item in o?["nftables"] as? [[String: Any]] ?? [] {
            if let c = item["counter"] as? [String: Any], let b = c["bytes"] as? Int, let p = c["packets"] as? Int {
                return (b, p)
            }
        }
        throw HarnessError("no counter \(name): \(r.stdout)")
    }

    /// A link's own counters in `ns` (what the device carried, with its link-layer headers).
    func linkCounters(_ link: String) throws -> (txBytes: Int, txPackets: Int, rxBytes: Int, rxPackets: Int) {
        let r = try ns.ip("-s", "-j", "link", "show", "dev", link)
        guard let o = (try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [[String: Any]])?.first,
              let stats = o["stats64"] as? [String: Any], let tx = stats["tx"] as? [String: Any],
              let rx = stats["rx"] as? [String: Any], let tb = tx["bytes"] as? Int, let tp = tx["packets"] as? Int,
              let rb = rx["bytes"] as? Int, let rp = rx["packets"] as? Int else {
            throw HarnessError("no counters of \(link): \(r.stdout)")
        }
        return (tb, tp, rb, rp)
    }

    /// A client in `ns` as `uid` (nil: root): `upload LINK BYTES` to the sink, `download LINK BYTES` from the source,
    /// `udp LINK COUNT SIZE [SOURCEPORT]` to the echo, one datagram at a time, `probe LINK` (connect() and sendto()
    /// to the sink), `gated LINK BYTES FILE` (an upload that sends 64 KiB, makes `FILE.ready`, and sends the rest once
    /// FILE exists), `pushed LINK COUNT SIZE` (asks the pusher, over eth0, for COUNT datagrams to port 7810 of LINK's
    /// address and replies to each), `parallel LINK N BYTES [RCVBUF]` (N downloads at once). Returns what it printed (one JSON object).
    func client(uid: UInt32?, cgroup: String? = nil, _ args: String...) throws -> [String: Any] {
        let r = try Subprocess.run(try clientArgv(uid: uid, cgroup: cgroup, args), timeout: 60)
        guard r.status == 0, let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any] else {
            throw HarnessError("client failed: \(r.summary)")
        }
        return o
    }

    /// `cgroup`: a cgroup directory the client is moved into first, as root (nil: the test's own).
    func clientArgv(uid: UInt32?, cgroup: String? = nil, _ args: [String]) throws -> [String] {
        var a = args
        guard a.count >= 2, let host = peers[a[1]] else { throw HarnessError("no link in \(args)") }
        a[1] = host
        if args[0] == "pushed" { a += [peers["eth0"]!, String(a[1].dropLast()) + "1"] }
        var argv = ["nsenter", "--net=/run/netns/\(ns.name)"]
        if let cgroup { argv += ["sh", "-c", #"echo $$ > "$0/cgroup.procs" && exec "$@""#, cgroup] }
        if let uid { argv += ["setpriv", "--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups"] }
        return argv + [Self.python, "-c", Self.clientScript] + a
    }

    /// What the source logged of each connection: bytes sent, the error that ended it, when.
    func sourceOutcomes() -> [[String: Any]] {
        let text = (try? String(contentsOfFile: sourceLog, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONValue.object(String($0)) }
    }

    static let clientScript = """
        import errno, json, os, socket, sys, time
        mode, host = sys.argv[1], sys.argv[2]
        def name(e):
            return errno.errorcode.get(e.errno, str(e.errno)) if getattr(e, "errno", None) else type(e).__name__
        out = {"error": None}
        t = time.monotonic()
        try:
            if mode == "upload":
                total = int(sys.argv[3]); out["sent"] = 0
                s = socket.create_connection((host, \(sink)), timeout=10)
                chunk = b"u" * 65536
                while out["sent"] < total:
                    out["sent"] += s.send(chunk[:total - out["sent"]])
                s.shutdown(socket.SHUT_WR)
                s.recv(1)
            elif mode == "download":
                total = int(sys.argv[3]); out["received"] = 0
                s = socket.create_connection((host, \(source)), timeout=10)
                s.sendall(b"%d\\n" % total)
                while True:
                    d = s.recv(65536)
                    if not d: break
                    out["received"] += len(d)
            elif mode == "udp":
                count, size = int(sys.argv[3]), int(sys.argv[4]); out["sent"] = out["echoed"] = 0
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
                if len(sys.argv) > 5:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", int(sys.argv[5])))
                s.connect((host, \(echo)))
                for i in range(count):
                    s.send(b"d" * size); out["sent"] += 1
                    s.recv(65536); out["echoed"] += 1
            elif mode == "gated":
                total, gate = int(sys.argv[3]), sys.argv[4]; out["sent"] = 0
                s = socket.create_connection((host, \(sink)), timeout=10)
                chunk = b"g" * 65536
                s.sendall(chunk); out["sent"] = len(chunk)
                open(gate + ".ready", "w").close()
                deadline = time.monotonic() + 30
                while not os.path.exists(gate) and time.monotonic() < deadline:
                    time.sleep(0.01)
                while out["sent"] < total:
                    out["sent"] += s.send(chunk[:total - out["sent"]])
                s.shutdown(socket.SHUT_WR)
                s.recv(1)
            elif mode == "pushed":
                count, size, control, me = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
                out["received"] = out["replies"] = 0
                u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((me, 7810)); u.settimeout(2)
                c = socket.create_connection((control, \(pusher)), timeout=10)
                c.sendall(b"%s 7810 %d %d\\n" % (me.encode(), count, size))
                try:
                    for i in range(count):
                        d, a = u.recvfrom(65536); out["received"] += len(d)
                        u.sendto(b"r", a); out["replies"] += 1
                except OSError as e:
                    out["stopped"] = name(e)
            elif mode == "parallel":
                import threading
                n, total = int(sys.argv[3]), int(sys.argv[4])
                rcvbuf = int(sys.argv[5]) if len(sys.argv) > 5 else 0
                out["received"] = [0] * n; out["errors"] = [None] * n
                def one(i):
                    try:
                        s = socket.socket()
                        if rcvbuf: s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
                        s.settimeout(10); s.connect((host, \(source)))
                        s.sendall(b"%d\\n" % total)
                        while True:
                            d = s.recv(65536)
                            if not d: break
                            out["received"][i] += len(d)
                    except OSError as e:
                        out["errors"][i] = name(e)
                threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
                for th in threads: th.start()
                for th in threads: th.join()
            elif mode == "pace":
                count, size, ms = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
                out["sent"] = 0
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect((host, \(echo)))
                for i in range(count):
                    s.send(b"p" * size); out["sent"] += 1
                    time.sleep(ms / 1000)
            elif mode == "probe":
                s = socket.socket(); s.settimeout(3)
                try:
                    s.connect((host, \(sink))); out["tcp"] = "ok"
                except OSError as e:
                    out["tcp"] = name(e)
                u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                try:
                    u.sendto(b"x", (host, \(echo))); out["udp"] = "ok"
                except OSError as e:
                    out["udp"] = name(e)
        except OSError as e:
            out["error"] = name(e)
        out["ms"] = int((time.monotonic() - t) * 1000)
        print(json.dumps(out))
        """

    static let serverScript = """
        import errno, json, socket, sys, threading, time
        sink, echo, source, log = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
        pusher, push = int(sys.argv[5]), int(sys.argv[6])
        def listener(port):
            l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            l.bind(("0.0.0.0", port)); l.listen(16); return l
        def serve(l, handle):
            while True:
                c, _ = l.accept()
                threading.Thread(target=handle, args=(c,), daemon=True).start()
        def drain(c):
            try:
                while c.recv(65536): pass
            except OSError: pass
            c.close()
        def send(c):
            out = {"sent": 0, "error": None}
            t = time.monotonic()
            try:
                total = int(c.makefile().readline())
                chunk = b"s" * 65536
                while out["sent"] < total:
                    out["sent"] += c.send(chunk[:total - out["sent"]])
                c.shutdown(socket.SHUT_WR)
            except OSError as e:
                out["error"] = errno.errorcode.get(e.errno, str(e.errno))
            out["ms"] = int((time.monotonic() - t) * 1000)
            with open(log, "a") as f: f.write(json.dumps(out) + "\\n")
            c.close()
        def pushes(c):
            out = {"pushed": 0, "error": None}
            p = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); p.bind(("0.0.0.0", push)); p.settimeout(2)
            try:
                host, port, count, size = c.makefile().readline().split()
                for i in range(int(count)):
                    p.sendto(b"p" * int(size), (host, int(port))); out["pushed"] += 1
                    p.recv(16)
            except OSError as e:
                out["error"] = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
            p.close()
            with open(log, "a") as f: f.write(json.dumps(out) + "\\n")
            c.close()
        threading.Thread(target=serve, args=(listener(pusher), pushes), daemon=True).start()
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", echo))
        def echoes():
            while True:
                d, a = u.recvfrom(65536); u.sendto(d, a)
        threading.Thread(target=echoes, daemon=True).start()
        threading.Thread(target=serve, args=(listener(source), send), daemon=True).start()
        serve(listener(sink), drain)
        """
}
