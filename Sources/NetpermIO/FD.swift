// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// Small wrappers over descriptors, all through `sys`.
public enum FD {
    public static func setNonBlocking(_ fd: Int32) throws(Errno) {
        let flags = try sys { fcntl(fd, F_GETFL) }
        _ = try sys { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }

    public static func setCloseOnExec(_ fd: Int32) throws(Errno) {
        _ = try sys { fcntl(fd, F_SETFD, FD_CLOEXEC) }
    }

    /// The same file at a number of at least `floor` (the old one closed), so that low numbers stay free
    /// (LowDescriptors); `fd` itself when the limit on descriptors leaves no such number.
    public static func moveAbove(_ fd: Int32, _ floor: Int32) -> Int32 {
        guard fd < floor, let moved = try? sys({ fcntl(fd, F_DUPFD_CLOEXEC, floor) }) else { return fd }
        close(fd)
        return moved
    }

    public static func close(_ fd: Int32) {
        // Never retry close on EINTR: Linux has already released the descriptor.
        _ = Glibc.close(fd)
    }

    /// What one read from a descriptor gave.
    public enum Read: Equatable, Sendable {
        case bytes(Int)
        case end
        /// Nothing there now (a non-blocking descriptor).
        case wouldBlock
    }

    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Read {
        guard let n = try sysNonBlocking({ Glibc.read(fd, buffer.baseAddress, buffer.count) }) else { return .wouldBlock }
        return n == 0 ? .end : .bytes(n)
    }

    /// Appends up to `max` bytes read from `fd` to `buffer`.
    public static func read(_ fd: Int32, appendingTo buffer: inout [UInt8], max: Int = 16384) throws(Errno) -> Read {
        var chunk = [UInt8](repeating: 0, count: max)
        let r = try chunk.withUnsafeMutableBytes { b in Result { () throws(Errno) -> Read in try read(fd, into: b) } }.get()
        if case let .bytes(n) = r { buffer.append(contentsOf: chunk[0..<n]) }
        return r
    }

    /// Writes without blocking; nil when the socket's buffer is full.
    public static func send(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(Errno) -> Int? {
        try sysNonBlocking { Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
    }

    /// Writes `bytes[from...]` without blocking; nil when the socket's buffer is full.
    public static func send(_ fd: Int32, _ bytes: [UInt8], from: Int = 0) throws(Errno) -> Int? {
        try bytes.withUnsafeBytes { b in
            Result { () throws(Errno) -> Int? in try send(fd, UnsafeRawBufferPointer(rebasing: b[from...])) }
        }.get()
    }

    /// Waits until `fd` is ready for `events` (poll(2)); -1 waits for ever. Returns the ready events (0: time-out).
    @discardableResult
    public static func wait(_ fd: Int32, for events: Int16, timeoutMilliseconds: Int32 = -1) throws(Errno) -> Int16 {
        var p = pollfd(fd: fd, events: events, revents: 0)
        _ = try sys { poll(&p, 1, timeoutMilliseconds) }
        return p.revents
    }

    /// A small text file the kernel writes (sysfs, /proc), or nil when it cannot be read.
    public static func readText(_ path: String) -> String? {
        (try? Files.read(path, limit: 1 << 20)).map { String(decoding: $0, as: UTF8.self) }
    }

    public static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }
}
