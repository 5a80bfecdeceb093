// SPDX-License-Identifier: LGPL-2.1-or-later
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
        let r: Int32
        do {
            r = try withUnixAddress(path) { bind(fd, $0, $1) }
        } catch {
            Glibc.close(fd)
            throw error
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
