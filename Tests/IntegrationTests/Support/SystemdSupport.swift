// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Bytes arriving on a descriptor (a socket or a pipe), read without blocking and split into lines,
/// with bounded waits. Used for subscribers that stay connected and for a child's output.
final class FDLineReader: @unchecked Sendable {
    let fd: Int32
    private(set) var buffer: [UInt8] = []
    private(set) var eof = false
    /// Every complete line taken so far (for failure messages).
    private(set) var history: [String] = []

    init(fd: Int32) {
        self.fd = fd
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// Reads whatever is there, waiting at most `timeout` seconds for something to arrive.
    /// Returns false when nothing arrived in time.
    @discardableResult
    func fill(timeout: Double) -> Bool {
        guard !eof else { return false }
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ms = Int32(max(0, min(timeout, 60)) * 1000)
        let r = poll(&pfd, 1, ms)
        guard r > 0 else { return false }
        var got = false
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 { buffer += chunk[0..<n]; got = true; continue }
            if n == 0 { eof = true; return true }
            if errno == EINTR { continue }
            if errno != EAGAIN { eof = true; return true }
            return got
        }
    }

    /// The next complete line, if one is buffered.
    func takeLine() -> String? {
        guard let nl = buffer.firstIndex(of: 0x0A) else { return nil }
        let line = String(decoding: buffer[..<nl], as: UTF8.self)
        buffer.removeSubrange(...nl)
        history.append(line)
        return line
    }

    /// The next line, waiting at most `timeout` seconds; nil on time-out or end of stream.
    func nextLine(timeout: Double) -> String? {
        let deadline = monotonicNow() + timeout
        while true {
            if let l = takeLine() { return l }
            if eof { return nil }
            let remaining = deadline - monotonicNow()
            if remaining <= 0 { return nil }
            fill(timeout: remaining)
        }
    }

    /// Lines up to and including the first one for which `stop` is true; throws after `timeout` seconds
    /// or at the end of the stream, saying what was seen.
    func lines(until description: String, timeout: Double = 5, _ stop: (String) throws -> Bool) throws -> [String] {
        let deadline = monotonicNow() + timeout
        var seen: [String] = []
        while true {
            if let l = takeLine() {
                seen.append(l)
                if try stop(l) { return seen }
                continue
            }
            let remaining = deadline - monotonicNow()
            if eof || remaining <= 0 {
                throw HarnessError("\(eof ? "end of stream" : "timed out after \(timeout) s") waiting for \(description); "
                    + "lines seen:\n\(seen.joined(separator: "\n"))\npartial: \(String(decoding: buffer, as: UTF8.self))")
            }
            fill(timeout: remaining)
        }
    }

    /// Waits until the text read so far (consumed lines and the buffer) contains `text` at least `count` times.
    func waitForText(_ text: String, count: Int = 1, timeout: Double = 5) throws {
        let deadline = monotonicNow() + timeout
        while allText.components(separatedBy: text).count - 1 < count {
            let remaining = deadline - monotonicNow()
            if eof || remaining <= 0 {
                throw HarnessError("\(eof ? "end of stream" : "timed out after \(timeout) s") waiting for the text "
                    + "'\(text)' (\(count) times); got:\n\(allText)")
            }
            fill(timeout: remaining)
        }
    }

    /// Everything read so far (lines already taken are included).
    var allText: String { (history + [String(decoding: buffer, as: UTF8.self)]).joined(separator: "\n") }

    /// Reads until the end of the stream (bounded); returns the complete lines that were left.
    func drainToEOF(timeout: Double) -> [String] {
        let deadline = monotonicNow() + timeout
        while !eof && monotonicNow() < deadline { fill(timeout: deadline - monotonicNow()) }
        var out: [String] = []
        while let l = takeLine() { out.append(l) }
        return out
    }
}

/// An in-process client of the control socket that stays connected: a subscriber or an agent.
/// The peer the daemon sees is the test process itself (root, so privileged).
final class LiveConnection: @unchecked Sendable {
    let fd: Int32
    let reader: FDLineReader
    private var closed = false

    init(path: String) throws {
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        let r = try withUnixAddress(path) { connect(s, $0, $1) }
        guard r == 0 else {
            let e = errno
            Glibc.close(s)
            throw HarnessError("connect \(path): \(String(cString: strerror(e)))")
        }
        fd = s
        reader = FDLineReader(fd: fd)
    }

    deinit { close() }

    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    /// Writes one request line (blocking writes are fine: requests are small).
    func send(_ line: String) throws {
        let bytes = Array((line + "\n").utf8)
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + off, $0.count - off, Int32(MSG_NOSIGNAL)) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) {
                var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&pfd, 1, 1000)
                continue
            }
            guard n > 0 else { throw HarnessError("send '\(line)': \(String(cString: strerror(errno)))") }
            off += n
        }
    }

    /// The next JSON object line (reply or event); throws on time-out.
    func nextObject(timeout: Double = 5) throws -> [String: Any] {
        guard let l = reader.nextLine(timeout: timeout) else {
            throw HarnessError("no line within \(timeout) s (eof \(reader.eof)); seen:\n\(reader.history.joined(separator: "\n"))")
        }
        return try JSONValue.object(l)
    }

    /// Objects up to and including the first that satisfies `stop`.
    func objects(until description: String, timeout: Double = 5,
                 _ stop: ([String: Any]) throws -> Bool) throws -> [[String: Any]] {
        var objects: [[String: Any]] = []
        _ = try reader.lines(until: description, timeout: timeout) { line in
            let o = try JSONValue.object(line)
            objects.append(o)
            return try stop(o)
        }
        return objects
    }

    /// Sends a request and returns the events that arrived before its reply, and the reply (the first object
    /// without an "event" key).
    func request(_ line: String, timeout: Double = 5) throws -> (events: [[String: Any]], reply: [String: Any]) {
        try send(line)
        var all = try objects(until: "the reply to \(line)", timeout: timeout) { $0["event"] == nil }
        let reply = all.removeLast()
        return (all, reply)
    }

    /// `SUBSCRIBE topics`: checks the acknowledgement and returns it with the snapshot.
    @discardableResult
    func subscribe(_ topics: String) throws -> (ack: [String: Any], snapshot: [String: Any]) {
        try send("SUBSCRIBE \(topics)")
        let ack = try nextObject()
        guard (try? JSONValue.bool(ack, "ok")) == true else { throw HarnessError("SUBSCRIBE \(topics) failed: \(ack)") }
        let snapshot = try nextObject()
        guard snapshot["event"] as? String == "snapshot" else {
            throw HarnessError("expected the snapshot after SUBSCRIBE, got \(snapshot)")
        }
        return (ack, snapshot)
    }
}

/// A Unix datagram socket bound to a path, standing in for the service manager's notify socket.
final class NotifyReceiver: @unchecked Sendable {
    let fd: Int32
    let path: String
    /// Every datagram received, in order.
    private(set) var received: [String] = []

    init(path: String) throws {
        self.path = path
        let s = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        let r = try withUnixAddress(path) { bind(s, $0, $1) }
        guard r == 0 else {
            let e = errno
            Glibc.close(s)
            throw HarnessError("bind \(path): \(String(cString: strerror(e)))")
        }
        fd = s
    }

    func close() {
        Glibc.close(fd)
        unlink(path)
    }

    /// The next datagram, waiting at most `timeout` seconds.
    func receive(timeout: Double) -> String? {
        let deadline = monotonicNow() + timeout
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let remaining = deadline - monotonicNow()
            if remaining <= 0 { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32(remaining * 1000) + 1) > 0 else { continue }
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                let s = String(decoding: buf[0..<n], as: UTF8.self)
                received.append(s)
                return s
            }
        }
    }

    /// Datagrams up to and including the first that satisfies `stop` (bounded).
    func datagrams(until description: String, timeout: Double = 5, _ stop: (String) -> Bool) throws -> [String] {
        let deadline = monotonicNow() + timeout
        var seen: [String] = []
        while true {
            let remaining = deadline - monotonicNow()
            guard remaining > 0, let d = receive(timeout: remaining) else {
                throw HarnessError("timed out after \(timeout) s waiting for \(description); datagrams seen:\n"
                    + seen.map { $0.replacingOccurrences(of: "\n", with: "\\n") }.joined(separator: "\n"))
            }
            seen.append(d)
            if stop(d) { return seen }
        }
    }
}

/// The `KEY=value` fields of a notify datagram.
func notifyFields(_ datagram: String) -> [String: String] {
    var fields: [String: String] = [:]
    for line in datagram.split(separator: "\n") {
        guard let eq = line.firstIndex(of: "=") else { continue }
        fields[String(line[..<eq])] = String(line[line.index(after: eq)...])
    }
    return fields
}

/// Microseconds on CLOCK_MONOTONIC, as MONOTONIC_USEC= reports them.
func monotonicMicroseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
}

/// Writes all of `text` to a pipe or socket (small writes; blocking is fine).
func writeText(toFD fd: Int32, _ text: String) throws {
    let bytes = Array(text.utf8)
    var off = 0
    while off < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + off, $0.count - off) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { throw HarnessError("write: \(String(cString: strerror(errno)))") }
        off += n
    }
}

/// The executable a running process has (its /proc/PID/exe), nil once it has gone.
func procExecutable(of pid: pid_t) -> String? {
    try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")
}
