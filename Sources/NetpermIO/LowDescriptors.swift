// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// A few descriptor numbers below FD_SETSIZE (1024) kept for libraries that still wait with select(2), whose
/// fd_set holds no larger number: libnftables does (its netlink socket), and glibc's fortified FD_SET aborts the
/// process on a descriptor of 1024 or more. A daemon holding a thousand clients or unit cgroups hands out nothing
/// lower, so a new libnftables context crashed the daemon (1,100 idle connections and one DECIDE did). The reserve
/// is taken at start-up, while low numbers are free, as descriptors of /dev/null; `whileFree` lets them go for the
/// duration of its body, so that what the body opens gets them (the kernel gives the lowest free number), and takes
/// back as many as it can get below FD_SETSIZE afterwards: a body that closes such a descriptor (freeing the
/// library's context) gives its number back to the reserve, before anyone else can take it. Descriptors held for
/// long in numbers (unit cgroups') go above it (`FD.moveAbove`).
public enum LowDescriptors {
    /// The event loop's thread is the only caller.
    nonisolated(unsafe) private static var held: [Int32] = []
    nonisolated(unsafe) private static var wanted = 0
    /// Numbers below this are what select(2) can wait on.
    public static let selectable: Int32 = 1024

    /// Takes `count` low descriptors (fewer if low numbers are already scarce), or none under a limit of open files
    /// (`limit`, the soft limit now) of at most FD_SETSIZE: every number the process can get is then one select(2)
    /// can wait on, and the reserve would only take descriptors from the daemon's own (`prlimit --nofile=64`: 8 of
    /// the 32 kept for it).
    public static func reserve(_ count: Int = 8, limit: Int? = Limits.openFiles()) {
        if let limit, limit <= Int(selectable) {
            for fd in held { FD.close(fd) }
            held = []
            wanted = 0
            return
        }
        wanted = count
        topUp()
    }

    /// Runs `body` with the reserve free.
    public static func whileFree<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        // A number another thread held a moment when the reserve was last taken back may be free again.
        topUp()
        for fd in held { FD.close(fd) }
        held = []
        defer { topUp() }
        return try body()
    }

    private static func topUp() {
        while held.count < wanted {
            guard let fd = try? sys({ open("/dev/null", O_RDONLY | O_CLOEXEC) }) else { return }
            guard fd < selectable else {
                // No low number left free (another thread took one meanwhile): try again next time.
                FD.close(fd)
                return
            }
            held.append(fd)
        }
    }

    /// How many are held (for the tests).
    public static var count: Int { held.count }
}
