import CLinux
import Glibc

/// bpf(2), through the chokepoint: the attribute block is the command's `union bpf_attr` member, laid out by the
/// caller (NetpermBPF). Bytes past what this kernel knows must be zero; shorter blocks are fine.
public enum BPFSyscall {
    @discardableResult
    public static func call(_ command: Int32, _ attr: inout [UInt8]) throws(Errno) -> Int32 {
        let size = UInt32(attr.count)
        let r = try attr.withUnsafeMutableBytes { b in
            Result { () throws(Errno) -> Int in try sys { np_bpf(command, b.baseAddress, size) } }
        }.get()
        return Int32(truncatingIfNeeded: r)
    }

    /// The cookie of the daemon's network namespace (`SO_NETNS_COOKIE` on a socket of its own): what a program
    /// compares `bpf_get_netns_cookie()` with to act in this namespace only.
    public static func netnsCookie() throws(Errno) -> UInt64 {
        let fd = try sys { socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        defer { close(fd) }
        var cookie: UInt64 = 0
        var length = socklen_t(MemoryLayout<UInt64>.size)
        _ = try sys { getsockopt(fd, SOL_SOCKET, NP_SO_NETNS_COOKIE, &cookie, &length) }
        return cookie
    }
}
