// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermIO
import NetpermPolicy
import NetpermProtocol

/// Identifies the processes that send requests, from the kernel's word only: the credentials it attaches to each
/// message (SCM_CREDENTIALS) or recorded at connect (SO_PEERCRED, SO_PEERGROUPS), a pidfd to pin the process, and
/// /proc/PID/exe and /proc/PID/cgroup. Identities are kept per process (pid and pidfd), so many connections from
/// one process cost one reading of /proc; a kept identity is used again only while the process's executable is
/// the one it was read with.
public final class PeerIdentities {
    /// A process, as long as the system runs: its pid and the number of its pidfd's inode (pidfs).
    private struct Process: Hashable {
        var pid: Int32
        var inode: UInt64
    }

    public static let capacity = 1024
    private var known: [Process: PeerIdentity] = [:]
    /// In the order they were added: the oldest goes first when the cache is full.
    private var order: [Process] = []

    public init() {}

    /// Who sent a request on the connection `fd` that `connector` opened. `sender` is what the kernel attached to
    /// the request's bytes.
    public func identify(sender attached: Credentials, socket fd: Int32, connector: Credentials) -> PeerIdentity {
        // Bytes nobody vouched for were sent on a socket that had no SO_PASSCRED yet (a client that connected
        // before the daemon set it on a listener passed to it, and wrote just as it was accepted): the process that
        // connected is the best the kernel can say.
        let sender = attached == .unknown || attached.isUnattached ? connector : attached
        guard sender.pid > 0 else {
            // No credentials, or a process in a pid namespace the daemon cannot see: nothing to read in /proc.
            return PeerIdentity(pid: 0, uid: sender.uid, gids: sender == .unknown ? [] : [sender.gid],
                                executable: nil, unit: nil,
                                problem: sender == .unknown ? "the kernel did not say who sent the request"
                                                            : "the sender is not visible in the daemon's pid namespace")
        }
        if sender.pid == connector.pid {
            // The process that connected: the kernel's record of connect(), its effective ids and groups, and a
            // pidfd of exactly that process.
            let gids = [connector.gid] + ((try? UnixSocket.peerGroups(fd)) ?? [])
            return identify(connector, groups: gids, pidfd: UnixSocket.peerPidfd(fd))
        }
        // Another process that holds the socket: the ids the kernel attached to its message (its real ones unless
        // it named another of its own), its groups from /proc.
        return identify(sender, groups: nil, pidfd: Pidfd.open(sender.pid))
    }

    /// Who made a call on the system bus: the pid and uid the bus daemon recorded when the caller connected
    /// (GetConnectionCredentials), never ones the caller named; its groups and the rest from /proc.
    public func identify(busCaller pid: Int32, uid: UInt32, authorized: Bool) -> PeerIdentity {
        var identity: PeerIdentity
        if pid > 0 {
            identity = identify(Credentials(pid: pid, uid: uid, gid: Self.primaryGroup(pid) ?? UInt32.max), groups: nil,
                                pidfd: Pidfd.open(pid))
            // The process now holding the pid is not the caller's uid's: it exited and another took its number.
            if identity.problem == nil, Self.realUID(pid) != uid {
                identity = PeerIdentity(pid: pid, uid: uid, gids: [], executable: nil, unit: nil,
                                        problem: "the process exited before it could be identified")
            }
        } else {
            identity = PeerIdentity(pid: 0, uid: uid, gids: [], executable: nil, unit: nil,
                                    problem: "the bus did not say which process called")
        }
        identity.via = .bus(authorized: authorized)
        return identity
    }

    /// The real gid, and uid, in /proc/PID/status ("Gid:\treal effective ...").
    static func primaryGroup(_ pid: Int32) -> UInt32? { statusID(pid, "Gid:") }
    static func realUID(_ pid: Int32) -> UInt32? { statusID(pid, "Uid:") }

    private static func statusID(_ pid: Int32, _ key: String) -> UInt32? {
        guard let status = FD.readText("/proc/\(pid)/status") else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(key) {
            return line.dropFirst(key.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { UInt32($0) }
        }
        return nil
    }

    /// `groups`: primary then supplementary, when the kernel recorded them; nil to read them from /proc.
    private func identify(_ cred: Credentials, groups: [UInt32]?, pidfd: Int32?) -> PeerIdentity {
        defer { if let pidfd { FD.close(pidfd) } }
        let pid = cred.pid
        var exe: String?
        var problem: String?
        do { exe = try Files.readLink("/proc/\(pid)/exe") } catch { problem = "cannot read /proc/\(pid)/exe: \(error)" }
        if let path = exe, let lie = Self.pathMisnames(pid: pid, path: path) {
            exe = nil
            problem = lie
        }
        let process = pidfd.flatMap(Pidfd.processID).map { Process(pid: pid, inode: $0) }
        if let process, let pidfd, let kept = known[process], let exe, kept.executable == exe, kept.uid == cred.uid,
           kept.gids == groups ?? kept.gids, kept.gids.first == cred.gid,
           // Alive now, so the pid was never anyone else's while exe was read.
           Pidfd.isAlive(pidfd) {
            return kept
        }
        let cgroup = FD.readText("/proc/\(pid)/cgroup")
        let gids = groups ?? ([cred.gid] + Self.supplementaryGroups(pid))
        if let pidfd, !Pidfd.isAlive(pidfd) {
            // Gone: what was read may belong to a newcomer with its pid.
            return PeerIdentity(pid: pid, uid: cred.uid, gids: gids, executable: nil, unit: nil,
                                problem: "the process exited before it could be identified")
        }
        let unit = cgroup.flatMap(PeerIdentity.unitAndManager(fromCgroup:))
        let identity = PeerIdentity(pid: pid, uid: cred.uid, gids: gids, executable: exe, unit: unit?.unit,
                                    userUnit: unit?.user ?? false, unitFollowed: unit?.followed ?? true,
                                    slice: unit?.slice, problem: problem, enclosing: unit?.enclosing)
        if let process, problem == nil { keep(identity, for: process) }
        return identity
    }

    /// /proc/PID/exe is the path of the executable in the process's own mount namespace. Anyone may make one of
    /// their own (unshare -Urm; unprivileged user namespaces are on by default) and bind any file over
    /// /usr/bin/anything in it: the path would then name another program than the one running. So the path counts
    /// only if it names, as the daemon sees it, the very file that runs. A path the daemon cannot see (its sandbox
    /// hides /home and has its own /tmp) is taken as it is: there is nothing to compare.
    static func pathMisnames(pid: Int32, path: String) -> String? {
        guard let running = try? Files.fileID("/proc/\(pid)/exe") else { return nil }
        switch Result(catching: { () throws(Errno) -> Files.FileID in try Files.fileID(path) }) {
        case let .success(named) where named == running:
            return nil
        case .success:
            return "/proc/\(pid)/exe says \(SafeText.excerpt(path, maxBytes: 200)), but that path names another file for netpermd "
                + "(the process runs in a mount namespace of its own): not used to match Executable="
        case let .failure(e) where e == .notFound || e == .accessDenied || e == Errno(ENOTDIR):
            return nil
        case let .failure(e):
            return "cannot check \(SafeText.excerpt(path, maxBytes: 200)): \(e); not used to match Executable="
        }
    }

    private func keep(_ identity: PeerIdentity, for process: Process) {
        if known.updateValue(identity, forKey: process) == nil { order.append(process) }
        if order.count > Self.capacity {
            let evicted = order.count - Self.capacity * 3 / 4
            for p in order.prefix(evicted) { known[p] = nil }
            order.removeFirst(evicted)
        }
    }

    /// The supplementary groups in /proc/PID/status ("Groups:\t60 100 ..."); none when it cannot be read, so a
    /// privilege that depends on a group is refused rather than guessed.
    static func supplementaryGroups(_ pid: Int32) -> [UInt32] {
        guard let status = FD.readText("/proc/\(pid)/status") else { return [] }
        for line in status.split(separator: "\n") where line.hasPrefix("Groups:") {
            return line.dropFirst("Groups:".count).split(whereSeparator: { $0 == " " || $0 == "\t" })
                .compactMap { UInt32($0) }
        }
        return []
    }
}
