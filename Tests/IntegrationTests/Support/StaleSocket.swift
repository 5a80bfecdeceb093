import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A Unix stream socket bound to a path but never listening: connecting to it is refused, like the file a
/// crashed daemon leaves behind, except that this one is still held open by a live process (us).
final class BoundUnlistenedSocket: @unchecked Sendable {
    let fd: Int32
    let path: String

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            Glibc.close(fd)
            throw HarnessError("socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { dst in
            for (i, b) in bytes.enumerated() { dst[i] = b }
        }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard r == 0 else {
            let e = errno
            Glibc.close(fd)
            throw HarnessError("bind \(path): \(String(cString: strerror(e)))")
        }
    }

    func close() { Glibc.close(fd) }
}

/// Whether `path` exists and is a socket.
func isSocketFile(_ path: String) -> Bool {
    var st = stat()
    guard lstat(path, &st) == 0 else { return false }
    return (st.st_mode & S_IFMT) == S_IFSOCK
}
