// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// Unix stream sockets: addresses, connecting, listening, accepting, and what the kernel says about the peer.
public enum UnixSocket {
    /// Fills a sockaddr_un; nil when the path does not fit.
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

    private static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) throws(Errno) -> T)
        throws(Errno) -> T {
        guard var addr = address(path) else { throw .nameTooLong }
        return try withUnsafePointer(to: &addr) { p in
            Result { () throws(Errno) -> T in
                try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                    Result { () throws(Errno) -> T in try body(sa, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }.get()
            }
        }.get()
    }

    private static func streamSocket() throws(Errno) -> Int32 {
        try sys { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0) }
    }

    /// Connects a blocking stream socket to `path`.
    public static func connect(_ path: String) throws(Errno) -> Int32 {
        let fd = try streamSocket()
        do {
            _ = try withAddress(path) { (sa, len) throws(Errno) in try sys { Glibc.connect(fd, sa, len) } }
        } catch {
            FD.close(fd)
            throw error
        }
        return fd
    }

    /// Binds `path` with the socket file's `mode` (set atomically through the umask, which bind applies to 0777)
    /// and listens.
    public static func listen(_ path: String, mode: mode_t, backlog: Int32 = 4096) throws(Errno) -> Int32 {
        let fd = try streamSocket()
        do { try passCredentials(fd) } catch {
            FD.close(fd)
            throw error
        }
        let old = umask(~mode & 0o777)
        defer { umask(old) }
        do {
            _ = try withAddress(path) { (sa, len) throws(Errno) in try sys { bind(fd, sa, len) } }
            _ = try sys { Glibc.listen(fd, backlog) }
        } catch {
            FD.close(fd)
            throw error
        }
        return fd
    }

    /// The next pending connection, non-blocking and close-on-exec; nil when there is none.
    public static func accept(_ listenFD: Int32) throws(Errno) -> Int32? {
        try sysNonBlocking { CLinux.accept4(listenFD, nil, nil, Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)) }
    }

    /// The peer's pid, effective uid and gid as of connect() (SO_PEERCRED).
    public static func peerCredentials(_ fd: Int32) throws(Errno) -> Credentials {
        var cred = np_ucred()
        var len = socklen_t(MemoryLayout<np_ucred>.size)
        _ = try sys { getsockopt(fd, SOL_SOCKET, NP_SO_PEERCRED, &cred, &len) }
        return Credentials(pid: cred.pid, uid: cred.uid, gid: cred.gid)
    }

    /// SO_PASSCRED: every read of the socket then says who sent its bytes (`receive`). Since Linux 6.16 a socket
    /// takes its listener's flags at connect(), so both need it: the listener before clients connect (then their
    /// every byte carries credentials), and each accepted socket for clients that connected before (their bytes
    /// sent before the accept carry credentials; bytes sent between accept and this call carry none).
    /// The socket's send buffer (SO_SNDBUF, as the kernel counts it) and how much of it holds bytes the peer has
    /// not read (SIOCOUTQ), in the same units: what is still room for.
    public static func sendBuffer(_ fd: Int32) throws(Errno) -> (size: Int, used: Int) {
        var size: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        _ = try sys { getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &len) }
        return (Int(size), try sendQueue(fd))
    }

    /// SIOCOUTQ alone.
    public static func sendQueue(_ fd: Int32) throws(Errno) -> Int {
        Int(try sys { np_send_queue(fd) })
    }

    public static func passCredentials(_ fd: Int32) throws(Errno) {
        var on: Int32 = 1
        _ = try sys { setsockopt(fd, SOL_SOCKET, NP_SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size)) }
    }

    /// One non-blocking read of a socket with SO_PASSCRED, and the credentials the kernel attached to its bytes
    /// (SCM_CREDENTIALS), nil when there were none. With SO_PASSCRED the kernel never merges bytes of different
    /// senders into one read of a stream socket, so the credentials hold for every byte read.
    public static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno)
        -> (read: FD.Read, sender: Credentials?) {
        var cred = np_ucred()
        var has: Int32 = 0
        guard let n = try sysNonBlocking({ np_recv_credentials(fd, buffer.baseAddress, UInt(buffer.count), &cred, &has) }) else {
            return (.wouldBlock, nil)
        }
        let sender = has != 0 ? Credentials(pid: cred.pid, uid: cred.uid, gid: cred.gid) : nil
        return (n == 0 ? .end : .bytes(n), sender)
    }

    /// The peer's supplementary groups as of connect() (SO_PEERGROUPS).
    public static func peerGroups(_ fd: Int32) throws(Errno) -> [UInt32] {
        var groups = [gid_t](repeating: 0, count: 64)
        while true {
            var len = socklen_t(groups.count * MemoryLayout<gid_t>.size)
            do {
                _ = try sys { getsockopt(fd, SOL_SOCKET, NP_SO_PEERGROUPS, &groups, &len) }
                return Array(groups.prefix(Int(len) / MemoryLayout<gid_t>.size))
            } catch where error.code == ERANGE {
                // len now says how much is needed.
                groups = [gid_t](repeating: 0, count: Int(len) / MemoryLayout<gid_t>.size + 1)
            }
        }
    }

    /// A pidfd for the peer process (SO_PEERPIDFD, Linux 6.5), nil where the kernel has none.
    public static func peerPidfd(_ fd: Int32) -> Int32? {
        var pidfd: Int32 = -1
        var len = socklen_t(MemoryLayout<Int32>.size)
        guard (try? sys { getsockopt(fd, SOL_SOCKET, NP_SO_PEERPIDFD, &pidfd, &len) }) != nil, pidfd >= 0 else { return nil }
        return pidfd
    }
}

/// Who connected or sent bytes, in the kernel's words. `pid` is 0 when the process lives in a pid namespace this
/// one cannot see (or the kernel attached no credentials); uid and gid are then the overflow ids.
public struct Credentials: Equatable, Hashable, Sendable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    public init(pid: Int32, uid: UInt32, gid: UInt32) { self.pid = pid; self.uid = uid; self.gid = gid }

    /// Bytes nobody vouched for: no process, and ids that match no one.
    public static let unknown = Credentials(pid: 0, uid: UInt32.max, gid: UInt32.max)

    /// What SCM_CREDENTIALS says of bytes the kernel attached no credentials to (sent before either socket had
    /// SO_PASSCRED): no pid, and the overflow ids (65534 unless the admin changed kernel.overflowuid).
    public var isUnattached: Bool { pid == 0 && uid == 65534 && gid == 65534 }
}

/// Socket options the edges set.
public enum SocketOption {
    /// SO_RCVBUF, or SO_RCVBUFFORCE (root may exceed net.core.rmem_max).
    public static func setReceiveBuffer(_ fd: Int32, bytes: Int32, force: Bool) throws(Errno) {
        var size = bytes
        _ = try sys { setsockopt(fd, SOL_SOCKET, force ? SO_RCVBUFFORCE : SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
    }
}
