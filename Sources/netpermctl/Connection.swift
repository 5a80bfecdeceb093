import Glibc
import NetpermCore
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
            do {
                off += try FD.send(fd, bytes, from: off)
            } catch where error == .again {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = try sys { poll(&p, 1, -1) }
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
            if try FD.read(fd, appendingTo: &buffer) == 0 { return nil }
        }
    }

    var hasLine: Bool { buffer.contains(0x0A) }

    /// One read of what is there (the caller polled); false at end of stream.
    func fill() throws(Errno) -> Bool {
        try FD.read(fd, appendingTo: &buffer) != 0
    }

    /// One request, one reply.
    func request(_ line: String) throws(Errno) -> String? {
        try send(line)
        return try readLine()
    }
}
