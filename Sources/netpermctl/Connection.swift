// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO

/// A blocking line-oriented connection to the daemon.
final class Connection {
    let fd: Int32
    private var buffer: [UInt8] = []

    private let owned: Bool

    init(path: String) throws(Errno) {
        fd = try UnixSocket.connect(path)
        owned = true
    }

    /// Reads lines from a descriptor it does not own (standard input).
    init(reading fd: Int32) {
        self.fd = fd
        owned = false
    }

    deinit { if owned { FD.close(fd) } }

    func send(_ line: String) throws(Errno) {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        var off = 0
        while off < bytes.count {
            if let n = try FD.send(fd, bytes, from: off) {
                off += n
            } else {
                try FD.wait(fd, for: Int16(POLLOUT))
            }
        }
    }

    /// The next line, or nil at end of stream.
    func readLine() throws(Errno) -> String? {
        var scanFrom = 0
        while true {
            if let nl = buffer[scanFrom...].firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[0..<nl], as: UTF8.self)
                buffer.removeSubrange(0...nl)
                return line
            }
            scanFrom = buffer.count
            switch try FD.read(fd, appendingTo: &buffer) {
            case .bytes: continue
            case .end: return nil
            case .wouldBlock: try FD.wait(fd, for: Int16(POLLIN))
            }
        }
    }

    var hasLine: Bool { buffer.contains(0x0A) }

    /// One read of what is there (the caller polled); false at end of stream.
    func fill() throws(Errno) -> Bool {
        try FD.read(fd, appendingTo: &buffer) != .end
    }

    /// One request, one reply.
    func request(_ line: String) throws(Errno) -> String? {
        try send(line)
        return try readLine()
    }
}
