import Glibc

/// Unix stream socket addresses and client connections, shared by the daemon and netpermctl.
public enum UnixSocket {
    /// Fills a sockaddr_un; false when the path does not fit.
    public static func address(_ path: String) -> sockaddr_un? {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &addr.sun_path) { dst in
            for (i, b) in bytes.enumerated() { dst[i] = b }
            dst[bytes.count] = 0
        }
        return addr
    }

    /// Connects a blocking stream socket to `path`.
    public static func connect(_ path: String) throws(Errno) -> Int32 {
        guard var addr = address(path) else { throw Errno(ENAMETOOLONG) }
        let fd = try sys { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0) }
        do {
            _ = try sys {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }
        } catch {
            FD.close(fd)
            throw error
        }
        return fd
    }

}
