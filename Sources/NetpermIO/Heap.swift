// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// The C heap, as glibc keeps it (malloc.h comes through CLinux: Swift's Glibc module leaves it out). A reload
/// reads, decodes and parses files of up to many megabytes on a thread of its own, then frees it all; glibc would
/// keep most of it: that thread gets an arena of its own, whose free top is never given back by malloc_trim, and
/// each large block freed raises the mmap threshold, so the next reload's blocks stay in the heap.
public enum Heap {
    /// One arena for every thread, so that `releaseFree()` reaches what the reload's thread freed. The daemon has
    /// one thread but while a reload runs: there is nothing to contend for. Call it before any thread starts.
    public static func useOneArena() { _ = mallopt(M_ARENA_MAX, 1) }

    /// Gives every free page back to the kernel (malloc_trim(3)): after a reload, RSS is what the daemon keeps,
    /// not what it read.
    public static func releaseFree() { _ = malloc_trim(0) }
}
