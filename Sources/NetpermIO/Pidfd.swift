// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// Process file descriptors: a handle on one process that a recycled pid can never be mistaken for.
public enum Pidfd {
    /// pidfd_open(2) of `pid`; nil when there is no such process (or the kernel has no pidfds).
    public static func open(_ pid: Int32) -> Int32? { try? opening(pid) }

    /// The same, saying why not: ESRCH is a process that has gone.
    public static func opening(_ pid: Int32) throws(Errno) -> Int32 {
        guard pid > 0 else { throw Errno(ESRCH) }
        return try sys { np_pidfd_open(pid) }
    }

    /// Whether the process still exists, so its pid is still its own (a zombie's is too, until it is reaped).
    /// Signal 0 checks without sending; EPERM (a daemon without CAP_KILL asking about someone else's process)
    /// also means it exists.
    public static func isAlive(_ pidfd: Int32) -> Bool {
        do { _ = try sys { np_pidfd_send_signal(pidfd, 0) } } catch { return error == .notPermitted }
        return true
    }

    /// A number naming the process for as long as the system runs: its pidfs inode (Linux 6.9). nil where pidfds
    /// are anonymous inodes, all with one number.
    public static func processID(_ pidfd: Int32) -> UInt64? {
        if isPidfs == nil {
            var fs = statfs()
            isPidfs = (try? sys { fstatfs(pidfd, &fs) }) != nil && UInt(bitPattern: fs.f_type) == UInt(NP_PIDFS_MAGIC)
        }
        guard isPidfs == true else { return nil }
        var st = stat()
        guard (try? sys { fstat(pidfd, &st) }) != nil else { return nil }
        return UInt64(st.st_ino)
    }

    /// Learned from the first pidfd: the kernel does not change under a running daemon.
    private nonisolated(unsafe) static var isPidfs: Bool?
}
