import Glibc
import NetpermCore

/// Identifies the process at the other end of a Unix socket from the kernel's word only.
public enum Peer {
    /// `struct ucred` (not exported by Swift's Glibc module without _GNU_SOURCE).
    struct Cred { var pid: Int32 = 0; var uid: UInt32 = 0; var gid: UInt32 = 0 }
    static let SO_PEERCRED: Int32 = 17
    /// Not in Debian 12's headers; Linux 6.5+.
    static let SO_PEERPIDFD: Int32 = 77

    /// SO_PEERCRED gives pid/uid/gid as of connect(). With SO_PEERPIDFD the pid is pinned: after reading
    /// /proc/PID we check the pidfd still names a live process with that pid, so a recycled pid is never
    /// mistaken for the peer. Without a pidfd (older kernels) we fall back to the pid and say so.
    public static func identify(fd: Int32) -> PeerIdentity? {
        var cred = Cred()
        var len = socklen_t(MemoryLayout<Cred>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 else { return nil }
        var pidfd: Int32 = -1
        var plen = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &plen) != 0 { pidfd = -1 }
        defer { if pidfd >= 0 { FD.close(pidfd) } }

        var problems: [String] = []
        var exe: String?
        switch readLink("/proc/\(cred.pid)/exe") {
        case let .success(p): exe = p
        case let .failure(e): problems.append("cannot read /proc/\(cred.pid)/exe: \(e)")
        }
        let cgroup = FD.readText("/proc/\(cred.pid)/cgroup")
        var gids = [cred.gid]
        if let status = FD.readText("/proc/\(cred.pid)/status") {
            for line in status.split(separator: "\n") where line.hasPrefix("Groups:") {
                gids += line.dropFirst("Groups:".count).split(separator: " ").compactMap { UInt32($0) }
            }
        }
        if pidfd >= 0 {
            // fdinfo's "Pid:" is -1 once the process is gone; then what we read may belong to a newcomer.
            guard pidOf(pidfd: pidfd) == cred.pid else {
                return PeerIdentity(pid: cred.pid, uid: cred.uid, gids: [cred.gid], executable: nil, unit: nil,
                                    problem: "the peer exited before it could be identified")
            }
        }
        return PeerIdentity(pid: cred.pid, uid: cred.uid, gids: gids, executable: exe,
                            unit: cgroup.flatMap(PeerIdentity.unit(fromCgroup:)),
                            problem: problems.isEmpty ? nil : problems.joined(separator: "; "))
    }

    static func pidOf(pidfd: Int32) -> Int32? {
        guard let info = FD.readText("/proc/self/fdinfo/\(pidfd)") else { return nil }
        for line in info.split(separator: "\n") where line.hasPrefix("Pid:") {
            return Int32(line.dropFirst(4).split(separator: "\t").first.map(String.init)?
                .split(separator: " ").first.map(String.init) ?? "")
        }
        return nil
    }

    public static func readLink(_ path: String) -> Result<String, Errno> {
        var buf = [CChar](repeating: 0, count: 4097)
        let n = readlink(path, &buf, 4096)
        guard n >= 0 else { return .failure(Errno.current) }
        return .success(String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
}

/// User and group names from the system's databases (NSS).
public struct SystemAccounts: AccountResolver {
    public init() {}
    public func uid(forUser name: String) -> UInt32? { getpwnam(name)?.pointee.pw_uid }
    public func gid(forGroup name: String) -> UInt32? { getgrnam(name)?.pointee.gr_gid }
}
