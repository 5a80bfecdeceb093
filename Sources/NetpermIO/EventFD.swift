// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// A counter one thread signals and another waits on (eventfd(2), non-blocking).
public enum EventFD {
    public static func make() throws(Errno) -> Int32 {
        try sys { eventfd(0, NP_EFD_NONBLOCK | NP_EFD_CLOEXEC) }
    }

    public static func signal(_ fd: Int32) {
        var one: UInt64 = 1
        _ = try? sys { write(fd, &one, 8) }
    }

    /// Reads the counter back to zero (nothing when it is).
    public static func drain(_ fd: Int32) {
        var n: UInt64 = 0
        _ = try? sysNonBlocking { read(fd, &n, 8) }
    }
}
