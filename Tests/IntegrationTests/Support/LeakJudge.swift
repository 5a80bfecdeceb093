// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The judge of the leak tests: a sniffer on the cellular peer's end of a link (an AF_PACKET socket in the peer's
/// namespace), which writes a line for every IPv4 and IPv6 packet that arrives from one of `sources`, with the time
/// it arrived (CLOCK_MONOTONIC, the clock `monotonicNow()` reads), and for IGMP and ICMPv6 (past a hop-by-hop
/// header, as MLD has) its message in hex. A marker of a denied app seen here is a leak, whatever the app or the
/// daemon believed.
final class Sniffer {
    struct Packet: CustomStringConvertible {
        var time: Double
        var source: String
        /// 6 TCP, 17 UDP, 1 or 58 ICMP.
        var proto: Int
        var sourcePort: Int
        var destinationPort: Int
        /// TCP or UDP payload bytes.
        var payload: Int
        /// TCP flags (SYN 0x02, RST 0x04, ACK 0x10).
        var flags: Int
        /// An IGMP or ICMPv6 message, in hex (a membership report names its groups and sources); "" for others.
        var message: String
        var description: String {
            String(format: "%.6f %@ proto %d %d->%d %d bytes flags 0x%02x", time, source, proto, sourcePort,
                   destinationPort, payload, flags) + (message.isEmpty ? "" : " " + message)
        }
    }

    private let path: String
    private let process: ChildProcess

    private static let script = """
        import socket, sys, time
        iface, out, srcs = sys.argv[1], open(sys.argv[2], "a", buffering=1), set(sys.argv[3:])
        s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0003))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
        s.bind((iface, 0))
        out.write("ready\\n")
        while True:
            d, a = s.recvfrom(65535)
            if a[2] == socket.PACKET_OUTGOING: continue
            v = d[0] >> 4
            if v == 4 and len(d) >= 20:
                src, proto, l4 = socket.inet_ntoa(d[12:16]), d[9], d[(d[0] & 15) * 4:]
            elif v == 6 and len(d) >= 40:
                src, proto, l4 = socket.inet_ntop(socket.AF_INET6, d[8:24]), d[6], d[40:]
            else:
                continue
            if src not in srcs: continue
            if v == 6 and proto == 0 and len(l4) >= 8: proto, l4 = l4[0], l4[(l4[1] + 1) * 8:]
            sp = dp = flags = 0; payload = len(l4)
            if proto in (6, 17) and len(l4) >= 8:
                sp, dp = int.from_bytes(l4[0:2], "big"), int.from_bytes(l4[2:4], "big")
                if proto == 6 and len(l4) >= 20:
                    payload, flags = len(l4) - (l4[12] >> 4) * 4, l4[13]
                else:
                    payload = len(l4) - 8
            msg = l4.hex() if proto in (2, 58) else "-"
            out.write("%.6f %s %d %d %d %d %d %s\\n" % (time.monotonic(), src, proto, sp, dp, payload, flags, msg))
        """

    /// Starts sniffing `interface` in `ns` and waits until it listens.
    init(_ test: IntegrationTestCase, in ns: TestNamespace, interface: String, sources: [String], dir: String) throws {
        path = dir + "/sniffed-\(interface).txt"
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let p = try Subprocess.spawn(["ip", "netns", "exec", ns.name, EnforcementBed.python, "-c", Self.script,
                                      interface, path] + sources,
                                     stdin: .devNull, stdout: .devNull, stderr: .appendFile(dir + "/sniffer.err"))
        process = p
        test.addTeardownBlock { p.killAndReap() }
        try test.waitUntil("the sniffer on \(interface) listens") {
            (((try? String(contentsOfFile: self.path, encoding: .utf8)) ?? "").hasPrefix("ready"),
             (try? String(contentsOfFile: dir + "/sniffer.err", encoding: .utf8)) ?? "")
        }
    }

    /// Everything seen so far.
    var packets: [Packet] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").dropFirst().compactMap { line in
            let f = line.split(separator: " ")
            guard f.count == 8, let t = Double(f[0]), let p = Int(f[2]), let sp = Int(f[3]), let dp = Int(f[4]),
                  let n = Int(f[5]), let fl = Int(f[6]) else { return nil }
            return Packet(time: t, source: String(f[1]), proto: p, sourcePort: sp, destinationPort: dp, payload: n, flags: fl,
                          message: f[7] == "-" ? "" : String(f[7]))
        }
    }

    /// Waits until this sniffer has seen a datagram root sends from `ns` to `host`:`port` after everything before it
    /// (root is in no [App]): every packet sent earlier out of the same link has been judged.
    func flush(_ test: IntegrationTestCase, _ ns: TestNamespace, to host: String, port: Int) throws {
        let script = "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'end', ('\(host)', \(port)))"
        try test.waitUntil("the sniffer sees root's last datagram") {
            _ = try Subprocess.run(["nsenter", "--net=/run/netns/\(ns.name)", EnforcementBed.python, "-c", script])
            return (self.packets.contains { $0.destinationPort == port && $0.payload == 3 }, "")
        }
    }
}

/// An app that never stops sending: UDP datagrams to `host`:`port` as fast as it can, as `uid` (and in `cgroup`),
/// from the daemon's namespace. Each datagram is a marker the sniffer can count.
final class Sender {
    private let process: ChildProcess
    let port: Int

    private static let script = """
        import socket, sys
        host, port = sys.argv[1], int(sys.argv[2])
        u = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
        n = 0
        while True:
            n += 1
            try: u.sendto(b"leak-%d" % n, (host, port))
            except OSError: pass
        """

    init(_ test: IntegrationTestCase, in ns: TestNamespace, uid: UInt32, cgroup: String? = nil, host: String,
         port: Int) throws {
        self.port = port
        var argv = ["nsenter", "--net=/run/netns/\(ns.name)"]
        if let cgroup { argv += ["sh", "-c", #"echo $$ > "$0/cgroup.procs" && exec "$@""#, cgroup] }
        argv += ["setpriv", "--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups", EnforcementBed.python, "-c",
                 Self.script, host, String(port)]
        let p = try Subprocess.spawn(argv, stdin: .devNull, stdout: .devNull, stderr: .devNull)
        process = p
        test.addTeardownBlock { p.killAndReap() }
    }

    func stop() { process.killAndReap() }
}

/// A TCP server in `ns` on `port` with a tiny receive buffer that reads nothing of connection N until
/// `release(N)` (a line on its standard input), then reads it to the end: what its clients queued stays queued in
/// their sockets, so that they can close them with data unsent (orphaned sockets) and the test chooses when the
/// data may flow. `read(N)` says how many bytes the server got, once it has finished with the connection.
final class HeldPeer {
    private let dir: String
    private let control: Int32
    static let script = """
        import socket, sys, threading
        port, dir = int(sys.argv[1]), sys.argv[2]
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", port)); s.listen(16)
        released = {}
        lock = threading.Lock()
        def gate(n):
            with lock: return released.setdefault(n, threading.Event())
        def control():
            for line in sys.stdin: gate(int(line)).set()
        def serve(c, n):
            gate(n).wait()
            c.settimeout(1.0)
            got = 0
            try:
                while True:
                    d = c.recv(65536)
                    if not d: break
                    got += len(d)
            except OSError:
                pass
            open("%s/read-%d" % (dir, n), "w").write(str(got))
        threading.Thread(target=control, daemon=True).start()
        open(dir + "/listening", "w").close()
        n = 0
        while True:
            c, _ = s.accept()
            n += 1
            threading.Thread(target=serve, args=(c, n), daemon=True).start()
        """

    init(_ test: IntegrationTestCase, in ns: TestNamespace, port: Int, dir: String) throws {
        self.dir = dir
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let pipe = try Subprocess.makePipe()
        let p: ChildProcess
        do {
            p = try Subprocess.spawn(["ip", "netns", "exec", ns.name, EnforcementBed.python, "-c", Self.script,
                                      String(port), dir], stdin: .fd(pipe.read), stdout: .devNull,
                                     stderr: .appendFile(dir + "/peer.err"))
        } catch {
            close(pipe.read); close(pipe.write)
            throw error
        }
        close(pipe.read)
        control = pipe.write
        test.addTeardownBlock { close(pipe.write); p.killAndReap() }
        try test.waitUntil("the held peer listens on \(port)") {
            (FileManager.default.fileExists(atPath: dir + "/listening"),
             (try? String(contentsOfFile: dir + "/peer.err", encoding: .utf8)) ?? "")
        }
    }

    /// Connection `n` (counted from 1, in the order they were accepted) may be read now.
    func release(_ n: Int) {
        let line = Array("\(n)\n".utf8)
        _ = line.withUnsafeBytes { write(control, $0.baseAddress, $0.count) }
    }

    /// The bytes connection `n` delivered, once the server is done with it (bounded by `timeout`).
    func read(_ n: Int, timeout: Double = 5, test: IntegrationTestCase) throws -> Int {
        var got: Int?
        try test.waitUntil("the held peer is done with connection \(n)", timeout: timeout) {
            got = (try? String(contentsOfFile: self.dir + "/read-\(n)", encoding: .utf8)).flatMap { Int($0) }
            return (got != nil, "")
        }
        return got ?? 0
    }
}

/// A client that connects to `host`:`port`, fills its socket until it would block, and closes it with the data
/// unsent: the kernel goes on sending it from a socket that has no file any more (an orphaned socket). With
/// `bindAfterConnect`, it binds the socket to that device first (SO_BINDTODEVICE after connect). Prints its local
/// port and how much it queued: "PORT QUEUED".
let orphaningClient = """
    import socket, sys
    host, port, dev = sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else ""
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.connect((host, port))
    if dev: s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, dev.encode())
    s.setblocking(False)
    queued = 0
    try:
        while True: queued += s.send(b"o" * 65536)
    except BlockingIOError:
        pass
    print(s.getsockname()[1], queued, flush=True)
    s.close()
    """
