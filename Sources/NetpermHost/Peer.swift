import NetpermCore
import NetpermIO

/// Identifies the process at the other end of a Unix socket from the kernel's word only.
public enum Peer {
    /// SO_PEERCRED gives pid/uid/gid as of connect(), SO_PEERGROUPS the supplementary groups. With SO_PEERPIDFD
    /// the pid is pinned: after reading /proc/PID we check the pidfd still names a live process with that pid, so a
    /// recycled pid is never mistaken for the peer. Without a pidfd (older kernels) we fall back to the pid.
    public static func identify(fd: Int32) -> PeerIdentity? {
        guard let cred = try? UnixSocket.peerCredentials(fd) else { return nil }
        let pidfd = UnixSocket.peerPidfd(fd)
        defer { if let pidfd { FD.close(pidfd) } }

        var problems: [String] = []
        var exe: String?
        do { exe = try Files.readLink("/proc/\(cred.pid)/exe") } catch {
            problems.append("cannot read /proc/\(cred.pid)/exe: \(error)")
        }
        let cgroup = FD.readText("/proc/\(cred.pid)/cgroup")
        let gids = [cred.gid] + ((try? UnixSocket.peerGroups(fd)) ?? [])
        if let pidfd {
            // fdinfo's "Pid:" is -1 once the process is gone; then what we read may belong to a newcomer.
            guard pidOf(pidfd: pidfd) == cred.pid else {
                return PeerIdentity(pid: cred.pid, uid: cred.uid, gids: gids, executable: nil, unit: nil,
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
            return Int32(line.dropFirst(4).split(whereSeparator: { $0 == "\t" || $0 == " " }).first ?? "")
        }
        return nil
    }
}
