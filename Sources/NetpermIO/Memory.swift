// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// The process's heap.
public enum Memory {
    /// Returns freed heap at the top and in whole free pages to the kernel (malloc_trim). Costs a pass over the
    /// free lists: call it after a burst, not per request.
    public static func release() {
        _ = malloc_trim(0)
    }
}
