// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A stand-in for netpermd on a Unix socket, for what the real daemon cannot be made to send (every string of every
/// reply chosen by the test): each request line is answered with the lines `reply` returns for it, and the
/// connection stays open until the client closes it or the fake stops. One thread accepts, one serves each client.
final class FakeDaemon: @unchecked Sendable {
    let path: String
    private let listenFD: Int32
    private let reply: @Sendable (String) -> [String]
    private let lock = NSLock()
    private var clients: Set<Int32> = []
    private var stopping = false
    private let acceptDone = DispatchSemaphore(value: 0)

    init(path: String, reply: @escaping @Sendable (String) -> [String]) throws {
        self.path = path
        self.reply = reply
        listenFD = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listenFD >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        let bound = try withUnixAddress(path) { bind(listenFD, $0, $1) }
        guard bound == 0, listen(listenFD, 16) == 0 else {
            let e = errno
            close(listenFD)
            throw HarnessError("fake daemon at \(path): \(String(cString: strerror(e)))")
        }
        chmod(path, 0o666)
        Thread { [self] in acceptLoop() }.start()
    }

    private var isStopping: Bool { lock.lock(); defer { lock.unlock() }; return stopping }

    private func acceptLoop() {
        defer { acceptDone.signal() }
        while !isStopping {
            var pfd = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 50) > 0 else { continue }
            let fd = accept(listenFD, nil, nil)
            guard fd >= 0 else { continue }
            lock.lock()
            clients.insert(fd)
            lock.unlock()
            Thread { [self] in serve(fd) }.start()
        }
    }

    private func serve(_ fd: Int32) {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        loop: while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            buffer += chunk[0..<n]
            while let nl = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                let out = Array(reply(line).map { $0 + "\n" }.joined().utf8)
                var off = 0
                while off < out.count {
                    let w = out.withUnsafeBytes { write(fd, $0.baseAddress! + off, $0.count - off) }
                    if w < 0 && errno == EINTR { continue }
                    guard w > 0 else { break loop }
                    off += w
                }
            }
        }
        lock.lock()
        clients.remove(fd)
        lock.unlock()
        close(fd)
    }

    /// Ends every connection and stops listening; the socket file is removed.
    func stop() {
        lock.lock()
        let first = !stopping
        stopping = true
        for fd in clients { shutdown(fd, Int32(SHUT_RDWR)) }
        lock.unlock()
        guard first else { return }
        _ = acceptDone.wait(timeout: .now() + 5)
        close(listenFD)
        unlink(path)
    }
}
