// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

// Helpers for the policy, verdict and event tests: a line channel to the daemon that never blocks without a
// deadline, a subscriber that checks every event's seq, long-running piped commands (socat under another
// uid), and a fixture with a policy of the test's own.

/// POLLRDHUP (0x2000) is not exported without _GNU_SOURCE.
let pollReadHangup: Int16 = 0x2000

/// One line-oriented conversation: a Unix socket to the daemon (read and write on one descriptor), or a
/// child's stdout (read) and stdin (write). Every read and write is bounded by a deadline.
final class EvChannel: @unchecked Sendable {
    let readFD: Int32
    let writeFD: Int32
    let name: String
    private var buffer: [UInt8] = []
    /// The other side closed: nothing more will arrive after `buffer`.
    private(set) var eof = false
    private var closed = false
    private var writeClosed = false
    /// Every line this channel has returned, for failure messages.
    private(set) var transcript: [String] = []

    init(readFD: Int32, writeFD: Int32, name: String) {
        self.readFD = readFD
        self.writeFD = writeFD
        self.name = name
        Subprocess.setNonBlocking(readFD)
        if writeFD != readFD { Subprocess.setNonBlocking(writeFD) }
    }

    /// Connects to the daemon's socket (the connect itself bounded by SO_SNDTIMEO).
    static func connect(_ path: String, name: String = "client", timeout: Double = 5) throws -> EvChannel {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let r: Int32
        do {
            r = try withUnixAddress(path) { Glibc.connect(fd, $0, $1) }
        } catch {
            Glibc.close(fd)
            throw error
        }
        guard r == 0 else {
            let e = errno
            Glibc.close(fd)
            throw HarnessError("\(name): connect \(path): \(String(cString: strerror(e)))")
        }
        return EvChannel(readFD: fd, writeFD: fd, name: name)
    }

    /// Writes every byte of `text` within `timeout` seconds.
    func send(_ text: String, timeout: Double = 5) throws {
        try send(bytes: Array(text.utf8), timeout: timeout)
    }

    /// Writes every byte within `timeout` seconds (any bytes: NULs, invalid UTF-8).
    func send(bytes: [UInt8], timeout: Double = 5) throws {
        let text = String(decoding: bytes.prefix(80), as: UTF8.self)
        var off = 0
        let deadline = monotonicNow() + timeout
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { write(writeFD, $0.baseAddress! + off, $0.count - off) }
            if n > 0 { off += n; continue }
            if n < 0 && errno == EINTR { continue }
            guard n < 0 && errno == EAGAIN else {
                throw HarnessError("\(name): write failed: \(String(cString: strerror(errno)))")
            }
            let remaining = deadline - monotonicNow()
            guard remaining > 0 else { throw HarnessError("\(name): could not send \(text.prefix(80)) within \(timeout) s") }
            var p = pollfd(fd: writeFD, events: Int16(POLLOUT), revents: 0)
            _ = poll(&p, 1, Int32(remaining * 1000) + 1)
        }
    }

    /// Reads whatever is there now, without waiting. Returns the number of bytes read (0 at EOF or if none).
    @discardableResult
    func readAvailable() throws -> Int {
        var total = 0
        var chunk = [UInt8](repeating: 0, count: 65536)
        while !eof {
            let n = chunk.withUnsafeMutableBytes { read(readFD, $0.baseAddress, $0.count) }
            if n > 0 { buffer.append(contentsOf: chunk[0..<n]); total += n; continue }
            if n == 0 { eof = true; break }
            if errno == EINTR { continue }
            if errno == EAGAIN { break }
            if errno == ECONNRESET { eof = true; break }
            throw HarnessError("\(name): read failed: \(String(cString: strerror(errno)))")
        }
        return total
    }

    /// A complete line already buffered, if any.
    func bufferedLine() -> String? {
        guard let nl = buffer.firstIndex(of: 0x0A) else { return nil }
        let line = String(decoding: buffer[0..<nl], as: UTF8.self)
        buffer.removeSubrange(0...nl)
        transcript.append(line)
        return line
    }

    /// The `prompt` events an agent's connection has received so far (read without waiting), in order.
    func drainPrompts(into prompts: inout [[String: Any]]) throws {
        _ = try readAvailable()
        while let line = bufferedLine() {
            let o = try JSONValue.object(line)
            if o["event"] as? String == "prompt" { prompts.append(o) }
        }
    }

    /// The prompts that arrive within `seconds` more (a late second prompt would come within the daemon's handling
    /// of a log message: half a second is ample).
    func drainPrompts(into prompts: inout [[String: Any]], for seconds: Double) throws {
        let quiet = monotonicNow() + seconds
        while monotonicNow() < quiet {
            try drainPrompts(into: &prompts)
            var p = pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, 20)
        }
        try drainPrompts(into: &prompts)
    }

    /// Bytes after the last complete line (a truncated line when the other side closed mid-line).
    var partial: [UInt8] { buffer }

    /// The next line; nil at end of stream (a trailing partial line stays in `partial`). Throws when
    /// `timeout` passes first.
    func readLine(timeout: Double) throws -> String? {
        let deadline = monotonicNow() + timeout
        while true {
            if let line = bufferedLine() { return line }
            if eof { return nil }
            if try readAvailable() > 0 || eof { continue }
            let remaining = deadline - monotonicNow()
            guard remaining > 0 else {
                throw HarnessError("\(name): no complete line within \(timeout) s; last lines:\n"
                    + transcript.suffix(5).map { String($0.prefix(300)) }.joined(separator: "\n")
                    + "\npartial: \(String(decoding: buffer.prefix(300), as: UTF8.self))")
            }
            var p = pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, Int32(min(remaining, 1) * 1000) + 1)
        }
    }

    /// The next line as a JSON object; end of stream is an error.
    func readObject(timeout: Double) throws -> [String: Any] {
        guard let line = try readLine(timeout: timeout) else {
            throw HarnessError("\(name): end of stream while waiting for a reply; last lines:\n"
                + transcript.suffix(5).joined(separator: "\n"))
        }
        return try JSONValue.object(line)
    }

    /// One request, one reply (on a connection with nothing else in flight).
    func request(_ line: String, timeout: Double = 5) throws -> [String: Any] {
        try send(line + "\n")
        return try readObject(timeout: timeout)
    }

    /// Whether bytes are waiting to be read (or buffered), without reading them.
    func hasDataWaiting() -> Bool {
        if !buffer.isEmpty { return true }
        var p = pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) > 0 && p.revents & Int16(POLLIN) != 0
    }

    /// Whether the other side has closed the connection, without reading anything (POLLHUP/POLLRDHUP are
    /// reported even while unread data is queued).
    func peerHasClosed() -> Bool {
        var p = pollfd(fd: readFD, events: Int16(POLLIN) | pollReadHangup, revents: 0)
        guard poll(&p, 1, 0) > 0 else { return false }
        return p.revents & (Int16(POLLHUP) | pollReadHangup) != 0
    }

    /// Closes our writing side (a child's stdin, or shutdown(SHUT_WR) on a socket).
    func closeWrite() {
        guard !writeClosed, !closed else { return }
        writeClosed = true
        if writeFD == readFD { shutdown(writeFD, Int32(SHUT_WR)) } else { Glibc.close(writeFD) }
    }

    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(readFD)
        if writeFD != readFD && !writeClosed { Glibc.close(writeFD) }
    }

    deinit { close() }
}

/// A command that runs alongside the test, its stdin and stdout connected to an `EvChannel` (stdin stays
/// open until `stop()`), its stderr appended to a file.
final class EvPipedCommand: @unchecked Sendable {
    let process: ChildProcess
    let channel: EvChannel
    let stderrPath: String

    init(_ argv: [String], stderrPath: String, name: String) throws {
        let inPipe = try Subprocess.makePipe()
        let outPipe = try Subprocess.makePipe()
        do {
            process = try Subprocess.spawn(argv, stdin: .fd(inPipe.read), stdout: .fd(outPipe.write),
                                           stderr: .appendFile(stderrPath))
        } catch {
            for fd in [inPipe.read, inPipe.write, outPipe.read, outPipe.write] { Glibc.close(fd) }
            throw error
        }
        Glibc.close(inPipe.read)
        Glibc.close(outPipe.write)
        self.stderrPath = stderrPath
        channel = EvChannel(readFD: outPipe.read, writeFD: inPipe.write, name: name)
    }

    var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// Closes its stdin and stdout, SIGKILLs and reaps it.
    func stop() {
        channel.close()
        process.killAndReap()
    }
}

/// What an event must look like: a description for failure messages and a predicate.
struct EvExpectation: CustomStringConvertible {
    var description: String
    var matches: ([String: Any]) -> Bool

    /// A `link` event for `name` whose link satisfies `condition`.
    static func link(_ name: String, _ what: String, change: String = "changed",
                     _ condition: @escaping (DaemonLink) -> Bool) -> EvExpectation {
        EvExpectation(description: "link \(change) \(name): \(what)") { e in
            guard e["event"] as? String == "link", e["change"] as? String == change,
                  let o = e["link"] as? [String: Any], let l = try? DaemonLink(o), l.name == name else { return false }
            return condition(l)
        }
    }

    /// An `app` event for `app` with exactly these verdict fields (`via` as "name/kind/metered" or nil).
    /// `bindTo`: the link a `routed-elsewhere` verdict names (name only); checked when given.
    static func app(_ app: String, available: Bool, reason: String, via: String? = nil, denied: [String] = [],
                    pending: [String] = [], bindTo: String? = nil) -> EvExpectation {
        let what = "app \(app): available \(available), reason \(reason), via \(via ?? "null"), denied \(denied), "
            + "pending \(pending)" + (bindTo.map { ", bind to \($0)" } ?? "")
        return EvExpectation(description: what) { e in
            guard e["event"] as? String == "app", e["app"] as? String == app, e["matched_by"] == nil,
                  let v = VerdictView(e) else { return false }
            return v.matches(available: available, reason: reason, via: via, denied: denied, pending: pending)
                && (bindTo == nil || v.bindTo == bindTo)
        }
    }
}

/// The verdict fields of a QUERY/WAIT reply or an `app` event, read strictly.
struct VerdictView: CustomStringConvertible {
    var app: String
    var available: Bool
    var reason: String
    /// "wlan0/wifi/false", or nil for JSON null.
    var via: String?
    var denied: [String]
    var pending: [String]
    var permissions: [String: String]
    /// The name of the link a `routed-elsewhere` verdict says to bind to.
    var bindTo: String?

    init?(_ o: [String: Any]) {
        guard let app = o["app"] as? String, let available = try? JSONValue.bool(o, "available"),
              let reason = o["reason"] as? String, let viaValue = o["via"],
              let denied = o["denied_kinds"] as? [String], let pending = o["pending_kinds"] as? [String],
              let perms = o["permissions"] as? [String: String] else { return nil }
        if viaValue is NSNull {
            via = nil
        } else if let v = viaValue as? [String: Any], let n = v["name"] as? String, let k = v["kind"] as? String,
                  let m = try? JSONValue.bool(v, "metered") {
            via = "\(n)/\(k)/\(m)"
        } else {
            return nil
        }
        self.app = app; self.available = available; self.reason = reason
        self.denied = denied; self.pending = pending; permissions = perms
        bindTo = (o["bind_to"] as? [String: Any])?["name"] as? String
    }

    func matches(available: Bool, reason: String, via: String?, denied: [String], pending: [String]) -> Bool {
        self.available == available && self.reason == reason && self.via == via && self.denied == denied
            && self.pending == pending
    }

    var description: String {
        "\(app): available \(available), reason \(reason), via \(via ?? "null"), bind to \(bindTo ?? "null"), "
            + "denied \(denied), pending \(pending), "
            + "permissions \(permissions.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))"
    }
}

/// A subscribed connection. Every line is checked as it is read: events must carry seq 1, 2, 3, ... with no
/// gap and no repeat; replies (to requests sent on the same connection) are lines with "ok".
final class EvSubscriber: @unchecked Sendable {
    let channel: EvChannel
    private(set) var ack: [String: Any] = [:]
    private(set) var snapshot: [String: Any] = [:]
    private(set) var lastSeq = 0
    /// Every event received, in order.
    private(set) var events: [[String: Any]] = []

    enum Line {
        case event([String: Any])
        case reply([String: Any])
    }

    /// Sends `SUBSCRIBE topics` and reads the acknowledgement and the snapshot.
    init(_ channel: EvChannel, topics: String = "", timeout: Double = 5) throws {
        self.channel = channel
        try channel.send("SUBSCRIBE\(topics.isEmpty ? "" : " " + topics)\n")
        ack = try channel.readObject(timeout: timeout)
        guard try JSONValue.bool(ack, "ok") else { throw HarnessError("\(channel.name): SUBSCRIBE failed: \(ack)") }
        guard case let .event(s) = try next(timeout: timeout), s["event"] as? String == "snapshot" else {
            throw HarnessError("\(channel.name): the first event after the acknowledgement is not the snapshot: "
                + "\(channel.transcript.suffix(2))")
        }
        snapshot = s
    }

    /// The next line, its seq checked if it is an event; nil at end of stream.
    func nextLine(timeout: Double) throws -> Line? {
        guard let line = try channel.readLine(timeout: timeout) else { return nil }
        let o = try JSONValue.object(line)
        if o["event"] != nil {
            if o["event"] as? String == "overflow" { return .event(o) }
            let seq = try JSONValue.int(o, "seq")
            guard seq == lastSeq + 1 else {
                throw HarnessError("\(channel.name): event seq \(seq) after \(lastSeq) (gap or repeat): \(line.prefix(400))")
            }
            lastSeq = seq
            events.append(o)
            return .event(o)
        }
        guard o["ok"] != nil else { throw HarnessError("\(channel.name): neither an event nor a reply: \(line.prefix(400))") }
        return .reply(o)
    }

    func next(timeout: Double) throws -> Line {
        guard let l = try nextLine(timeout: timeout) else {
            throw HarnessError("\(channel.name): the daemon closed the subscription; last lines:\n"
                + channel.transcript.suffix(5).map { String($0.prefix(300)) }.joined(separator: "\n"))
        }
        return l
    }

    func nextEvent(timeout: Double) throws -> [String: Any] {
        switch try next(timeout: timeout) {
        case let .event(e): return e
        case let .reply(r): throw HarnessError("\(channel.name): a reply where an event was expected: \(r)")
        }
    }

    /// Reads events until every expectation has been met by exactly one event, in any order; any event that
    /// meets none of the outstanding expectations fails at once. Returns the events in arrival order.
    @discardableResult
    func expect(_ step: String, _ expected: [EvExpectation], timeout: Double = 5) throws -> [[String: Any]] {
        var outstanding = expected
        var got: [[String: Any]] = []
        let deadline = monotonicNow() + timeout
        while !outstanding.isEmpty {
            let remaining = deadline - monotonicNow()
            let e: [String: Any]
            do {
                e = try nextEvent(timeout: max(remaining, 0.001))
            } catch {
                throw HarnessError("\(step): still expecting \(outstanding) after \(got.count) events:\n"
                    + got.map(Self.brief).joined(separator: "\n") + "\n\(error)")
            }
            guard let i = outstanding.firstIndex(where: { $0.matches(e) }) else {
                throw HarnessError("\(step): unexpected event \(Self.brief(e))\nstill expecting \(outstanding)\n"
                    + "already received: " + got.map(Self.brief).joined(separator: "\n"))
            }
            outstanding.remove(at: i)
            got.append(e)
        }
        return got
    }

    /// Sends PING on the subscription and reads up to the pong: nothing but the pong may arrive, so no event is
    /// queued for this subscriber beyond those already read.
    func expectNothingMore(_ step: String, timeout: Double = 5) throws {
        try channel.send("PING\n")
        while true {
            switch try next(timeout: timeout) {
            case let .reply(r):
                guard (try? JSONValue.bool(r, "pong")) == true else {
                    throw HarnessError("\(step): expected the pong, got \(r)")
                }
                return
            case let .event(e):
                throw HarnessError("\(step): unexpected event \(Self.brief(e))")
            }
        }
    }

    /// An event in one line, for failure messages.
    static func brief(_ e: [String: Any]) -> String {
        let seq = e["seq"].map { "\($0)" } ?? "-"
        switch e["event"] as? String {
        case "link":
            let l = (e["link"] as? [String: Any]).flatMap { try? DaemonLink($0) }
            return "[\(seq)] link \(e["change"] ?? "?") \(l.map(\.description) ?? "?")"
        case "app":
            return "[\(seq)] app \(VerdictView(e).map(\.description) ?? "\(e)")"
        default:
            let data = try? JSONSerialization.data(withJSONObject: e, options: [.sortedKeys])
            return "[\(seq)] " + (data.map { String(decoding: $0, as: UTF8.self) } ?? "\(e)")
        }
    }
}

/// A namespace with wlan0 (wifi) and wwan0 (wwan), their veth peers up (in a second namespace when asked, so
/// that the daemon sees only wlan0 and wwan0 change), the standard interface overrides plus `policy` in
/// `dir/netpermd.conf` (dir is mode 0755, so other uids can reach the socket), and a daemon answering.
struct AppFixture {
    var ns: TestNamespace
    /// Where wlan0p and wwan0p live: `ns`, or a namespace of their own.
    var peers: TestNamespace
    var dir: String
    var socket: String
    var config: String
    var daemon: DaemonProcess

    static func address(_ link: String) -> String { link == "wlan0" ? "10.1.0.1/24" : "10.2.0.1/24" }
    static func gateway(_ link: String) -> String { link == "wlan0" ? "10.1.0.2" : "10.2.0.2" }

    func addAddress(_ link: String) throws {
        try ns.ip("addr", "add", Self.address(link), "dev", link)
    }

    func addDefaultRoute(_ link: String, metric: Int) throws {
        try ns.ip("route", "add", "default", "via", Self.gateway(link), "dev", link, "metric", String(metric))
    }

    func deleteDefaultRoute(_ link: String, metric: Int) throws {
        try ns.ip("route", "del", "default", "via", Self.gateway(link), "dev", link, "metric", String(metric))
    }

    /// Sets the peer of `link` (wlan0p for wlan0) admin up or down, which takes `link`'s carrier with it.
    func setPeer(of link: String, up: Bool) throws {
        try peers.ip("link", "set", link + "p", up ? "up" : "down")
    }
}

extension IntegrationTestCase {
    func makeAppFixture(policy: String, peersApart: Bool = false, extraArgs: [String] = []) throws -> AppFixture {
        let ns = try makeNamespace()
        try ns.addVethPair("wlan0", peer: "wlan0p")
        try ns.addVethPair("wwan0", peer: "wwan0p")
        var peers = ns
        if peersApart {
            peers = try makeNamespace()
            for p in ["wlan0p", "wwan0p"] {
                try ns.ip("link", "set", p, "netns", peers.name)
                try peers.ip("link", "set", p, "up")
            }
        }
        let dir = try makeTempDir()
        guard chmod(dir, 0o755) == 0 else { throw HarnessError("chmod \(dir): \(String(cString: strerror(errno)))") }
        let config = try writeConfig(IntegrationTestCase.standardConfig + "\n" + policy, in: dir)
        let socket = "\(dir)/netpermd.sock"
        let daemon = try startDaemon(in: ns, socket: socket, config: config, extraArgs: extraArgs)
        try waitForLinks(socket, "wlan0 and wwan0 are up with carrier") { links in
            ["wlan0", "wwan0"].allSatisfy {
                links[name: $0].map { $0.adminUp && $0.carrier && $0.operstate == "up" } ?? false
            }
        }
        return AppFixture(ns: ns, peers: peers, dir: dir, socket: socket, config: config, daemon: daemon)
    }

    /// A privileged `QUERY APP` through socat (the test runs as root); fails unless ok.
    func queryVerdict(_ socket: String, _ app: String) throws -> (VerdictView, [String: Any]) {
        let o = try request(socket, "QUERY \(app)")
        guard try JSONValue.bool(o, "ok"), let v = VerdictView(o) else { throw HarnessError("bad QUERY reply: \(o)") }
        return (v, o)
    }

    /// Polls `QUERY APP` until the verdict satisfies `condition` (bounded).
    @discardableResult
    func waitForVerdict(_ socket: String, _ app: String, _ description: String, timeout: Double = 5,
                        _ condition: (VerdictView) -> Bool) throws -> VerdictView {
        var result: VerdictView?
        try waitUntil("\(app): \(description)", timeout: timeout) {
            let (v, _) = try queryVerdict(socket, app)
            result = v
            return (condition(v), v.description)
        }
        return result!
    }

    /// STATUS's policy object: generation and error.
    func policyStatus(_ socket: String) throws -> (generation: Int, apps: Int, error: String?) {
        let o = try request(socket, "STATUS")
        guard let p = o["policy"] as? [String: Any] else { throw HarnessError("STATUS without policy: \(o)") }
        return (try JSONValue.int(p, "generation"), try JSONValue.int(p, "apps"), try JSONValue.optionalString(p, "error"))
    }

    /// Copies an executable to `dir/bin/NAME` (directories and file mode 0755, so any uid may run it).
    func copyExecutable(_ source: String, to dir: String, as name: String) throws -> String {
        let bin = "\(dir)/bin"
        if !FileManager.default.fileExists(atPath: bin) {
            try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        }
        guard chmod(bin, 0o755) == 0 else { throw HarnessError("chmod \(bin) failed") }
        let path = "\(bin)/\(name)"
        try FileManager.default.copyItem(atPath: source, toPath: path)
        guard chmod(path, 0o755) == 0 else { throw HarnessError("chmod \(path) failed") }
        return path
    }

    /// argv prefix that runs a command as nobody (uid and gid 65534, no supplementary groups).
    static let asNobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
}
