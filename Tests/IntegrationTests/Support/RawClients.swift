// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// Raw connections by the hundred or thousand, for the tests of connection limits and connect bursts, and what
// the daemon's process costs meanwhile.

/// One connection as a client sees it: bytes sent, and what came back up to the end of the stream.
final class RawClient {
    let fd: Int32
    private var buffer: [UInt8] = []
    /// How the stream ended: nil while open, "eof" after an orderly close, else the error (e.g. a reset).
    private(set) var end: String?

    /// A blocking connect, bounded by SO_SNDTIMEO (a full backlog makes connect wait for the daemon's accept).
    init(path: String, timeout: Double = 10) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let r = try withUnixAddress(path) { Glibc.connect(fd, $0, $1) }
        guard r == 0 else {
            let e = errno
            Glibc.close(fd)
            throw HarnessError("connect \(path): \(String(cString: strerror(e)))")
        }
        Subprocess.setNonBlocking(fd)
    }

    deinit { Glibc.close(fd) }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard n == bytes.count else { throw HarnessError("send: \(n < 0 ? String(cString: strerror(errno)) : "short")") }
    }

    /// The next line, or nil when the stream ended first; throws when `timeout` passes first.
    func readLine(timeout: Double) throws -> String? {
        let deadline = monotonicNow() + timeout
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) {
                defer { buffer.removeSubrange(0...nl) }
                return String(decoding: buffer[0..<nl], as: UTF8.self)
            }
            if end != nil { return nil }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 { buffer.append(contentsOf: chunk[0..<n]); continue }
            if n == 0 { end = "eof"; continue }
            if errno == EINTR { continue }
            guard errno == EAGAIN else { end = String(cString: strerror(errno)); continue }
            let remaining = deadline - monotonicNow()
            guard remaining > 0 else { throw HarnessError("no line within \(timeout) s") }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, Int32(min(remaining, 1) * 1000) + 1)
        }
    }

    /// Sends `line` and returns the reply line (nil if the stream ended instead).
    func request(_ line: String, timeout: Double = 5) throws -> String? {
        try send(line + "\n")
        return try readLine(timeout: timeout)
    }
}

/// The daemon process as the kernel accounts for it.
enum ProcessStats {
    /// User plus system CPU time in seconds (/proc/PID/stat, fields 14 and 15, in clock ticks).
    static func cpuSeconds(_ pid: pid_t) throws -> Double {
        let text = try readProcFile("/proc/\(pid)/stat")
        // The command name may hold spaces; the fields after its closing parenthesis do not.
        guard let close = text.lastIndex(of: ")") else { throw HarnessError("bad /proc/\(pid)/stat: \(text)") }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state), so utime (14) and stime (15) are fields[11] and fields[12].
        guard fields.count > 12, let u = Double(fields[11]), let s = Double(fields[12]) else {
            throw HarnessError("bad /proc/\(pid)/stat: \(text)")
        }
        return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// How many descriptors the process has open.
    static func openDescriptors(_ pid: pid_t) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
    }

    /// Raises this process's soft RLIMIT_NOFILE towards `want` (up to the hard limit); returns the soft limit now.
    static func raiseOpenFiles(to want: Int) -> Int {
        var lim = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &lim)
        if lim.rlim_cur < rlim_t(want) {
            lim.rlim_cur = min(lim.rlim_max, rlim_t(want))
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lim)
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &lim)
        }
        return Int(lim.rlim_cur)
    }
}

/// A value shared with a thread of the test.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.lock(); defer { lock.unlock() }; return value }
    func set(_ v: Value) { lock.lock(); value = v; lock.unlock() }
}

extension Subprocess {
    /// The system's Python (what `make test` installs): a wrapper in front of it, such as pyenv's shims, costs a
    /// shell per run and may live where other users cannot read.
    static var python: String { access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : resolve("python3") }
}
