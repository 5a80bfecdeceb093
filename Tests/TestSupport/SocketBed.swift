// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermControl
import NetpermIO

/// A control socket's path in a directory of its own, and clients of it read and written while a TestLoop runs:
/// for the transport's tests and the daemon library's. `close()` removes all of it.
public final class SocketBed {
    public let loop: TestLoop
    public let directory: String
    public var path: String { directory + "/s.sock" }
    public private(set) var clients: [Int32] = []

    public init(loop: TestLoop, prefix: String) throws(Errno) {
        self.loop = loop
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        guard let d = mkdtemp(&template) else { throw Errno(errno) }
        directory = String(cString: d)
    }

    /// The listening socket at `path`.
    public func listen() throws -> Int32 { try SocketPath.bindListening(path) }

    /// A non-blocking client; the test waits for the server to accept it.
    public func connect() throws(Errno) -> Int32 {
        let fd = try UnixSocket.connect(path)
        clients.append(fd)
        try FD.setNonBlocking(fd)
        return fd
    }

    /// Closes a client before `close()` would.
    public func disconnect(_ fd: Int32) {
        clients.removeAll { $0 == fd }
        FD.close(fd)
    }

    /// Writes all of `text`, letting the loop run while the socket is full.
    public func write(_ fd: Int32, _ text: String) throws(Errno) {
        let bytes = Array(text.utf8)
        var off = 0
        while off < bytes.count {
            if let n = try FD.send(fd, bytes, from: off) { off += n } else { loop.runOnce(timeoutMilliseconds: 1) }
        }
    }

    /// What the client can read now, after letting the loop run until `done` holds for it (or the stream ends, or
    /// `timeout` seconds pass).
    public func read(_ fd: Int32, until done: (String) -> Bool, timeout: Double = 5) -> String {
        var got: [UInt8] = []
        var ended = false
        _ = loop.run(until: {
            while !ended, let r = try? FD.read(fd, appendingTo: &got) {
                if r == .end { ended = true }
                if r != .end, case .bytes = r { continue }
                break
            }
            return ended || done(String(decoding: got, as: UTF8.self))
        }, timeout: timeout)
        return String(decoding: got, as: UTF8.self)
    }

    /// Reads until `count` whole lines have come (or the time-out); returns them without their newlines.
    public func readLines(_ fd: Int32, count: Int, timeout: Double = 5) -> [String] {
        read(fd, until: { $0.split(separator: "\n").count >= count && $0.hasSuffix("\n") }, timeout: timeout)
            .split(separator: "\n").map(String.init)
    }

    public func close() {
        for c in clients { FD.close(c) }
        clients = []
        Self.removeTree(directory)
    }

    /// A directory and all in it (what a test made there: files, directories, sockets).
    public static func removeTree(_ path: String) {
        for name in (try? Files.list(path)) ?? [] where (try? Files.remove(path + "/" + name)) == nil {
            removeTree(path + "/" + name)
        }
        rmdir(path)
    }
}
