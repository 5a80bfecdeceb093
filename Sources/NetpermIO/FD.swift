import Glibc

/// Small wrappers over descriptors, all through `sys`.
public enum FD {
    public static func setNonBlocking(_ fd: Int32) throws(Errno) {
        let flags = try sys { fcntl(fd, F_GETFL) }
        _ = try sys { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }

    public static func close(_ fd: Int32) {
        // Never retry close on EINTR: Linux has already released the descriptor.
        _ = Glibc.close(fd)
    }

    /// Reads at most `count` bytes; returns 0 at end of file. Throws `.again` when nothing is there.
    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try sys { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// Writes without blocking; returns how much was written (possibly less than asked).
    public static func send(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try sys { Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
    }

    /// Appends up to `max` bytes read from `fd` to `buffer`; returns the count (0 at end of file).
    public static func read(_ fd: Int32, appendingTo buffer: inout [UInt8], max: Int = 16384) throws(Errno) -> Int {
        var chunk = [UInt8](repeating: 0, count: max)
        let result = chunk.withUnsafeMutableBytes { b in Result { () throws(Errno) -> Int in try read(fd, into: b) } }
        let n = try result.get()
        buffer.append(contentsOf: chunk[0..<n])
        return n
    }

    /// Writes `bytes[from...]` without blocking; returns how much was written.
    public static func send(_ fd: Int32, _ bytes: [UInt8], from: Int = 0) throws(Errno) -> Int {
        var result: Result<Int, Errno> = .success(0)
        bytes.withUnsafeBytes { b in
            result = Result { () throws(Errno) -> Int in try send(fd, UnsafeRawBufferPointer(rebasing: b[from...])) }
        }
        return try result.get()
    }

    /// The whole content of a small file (sysfs, /proc, config), or nil if it cannot be read.
    public static func readFile(_ path: String, limit: Int = 1 << 24) -> [UInt8]? {
        guard let fd = try? sys({ open(path, O_RDONLY | O_CLOEXEC) }) else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        while out.count < limit {
            guard let n = try? read(fd, appendingTo: &out) else { return nil }
            if n == 0 { break }
        }
        return out
    }

    public static func readText(_ path: String) -> String? {
        readFile(path).map { String(decoding: $0, as: UTF8.self) }
    }

    public static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }
}
