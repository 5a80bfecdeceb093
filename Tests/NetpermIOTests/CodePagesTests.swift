// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import Glibc
@testable import NetpermIO
import XCTest

/// `CodePages.release()` unmaps pages of the running process, so which mappings it picks must be exactly the ones
/// that hold nothing but their file's bytes.
final class CodePagesTests: XCTestCase {
    /// One smaps entry, with the fields the scan reads and a few it must skip.
    private func entry(_ header: String, rss: Int, anonymous: Int = 0, swap: Int = 0,
                       flags: String = "rd ex mr mw me") -> String {
        """
        \(header)
        Size:               1028 kB
        KernelPageSize:        4 kB
        MMUPageSize:           4 kB
        Rss:                \(rss) kB
        Pss:                 \(rss / 2) kB
        Pss_Dirty:             0 kB
        Shared_Clean:          0 kB
        Shared_Dirty:          0 kB
        Private_Clean:       \(rss) kB
        Private_Dirty:        \(anonymous) kB
        Referenced:          \(rss) kB
        Anonymous:            \(anonymous) kB
        KSM:                   0 kB
        LazyFree:              0 kB
        AnonHugePages:         0 kB
        ShmemPmdMapped:        0 kB
        FilePmdMapped:         0 kB
        Shared_Hugetlb:        0 kB
        Private_Hugetlb:       0 kB
        Swap:                  \(swap) kB
        SwapPss:               0 kB
        Locked:                0 kB
        THPeligible:           0
        ProtectionKey:         0
        VmFlags: \(flags)

        """
    }

    private var sample: String {
        [
            entry("5614c9c81000-5614c9d82000 r--p 00000000 fe:01 1311 /usr/local/bin/netpermd", rss: 272,
                  flags: "rd mr mw me"),
            entry("5614c9d82000-5614ca1b5000 r-xp 00100000 fe:01 1311 /usr/local/bin/netpermd", rss: 3208),
            // RELRO: read-only now, but the loader wrote relocations into it.
            entry("5614ca1b5000-5614ca1cf000 r--p 00533000 fe:01 1311 /usr/local/bin/netpermd", rss: 104,
                  anonymous: 104, flags: "rd mr mw me ac"),
            entry("5614ca1cf000-5614ca2db000 rw-p 0054d000 fe:01 1311 /usr/local/bin/netpermd", rss: 304,
                  anonymous: 80, flags: "rd wr mr mw me ac"),
            entry("5614cb000000-5614cb041000 rw-p 00000000 00:00 0                          [heap]", rss: 116,
                  anonymous: 116, flags: "rd wr mr mw me ac"),
            // Resident nothing: no call needed.
            entry("7fe31cab0000-7fe31cab3000 r--p 00000000 fe:01 2001 /usr/lib/x86_64-linux-gnu/liblz4.so.1.9.4",
                  rss: 0, flags: "rd mr mw me"),
            // Written once, then swapped out: its page is in swap, not in the file.
            entry("7fe31cab3000-7fe31cad1000 r-xp 00003000 fe:01 2001 /usr/lib/x86_64-linux-gnu/liblz4.so.1.9.4",
                  rss: 64, swap: 4),
            // Locked: MADV_DONTNEED would refuse it.
            entry("7fe31cd33000-7fe31ce89000 r-xp 00028000 fe:01 2002 /usr/lib/x86_64-linux-gnu/libc.so.6",
                  rss: 1152, flags: "rd ex mr mw me lo"),
            // Shared: not a private copy of a file's bytes.
            entry("7fe31ce89000-7fe31ce8a000 r--s 00000000 fe:01 2003 /var/lib/some.db", rss: 4,
                  flags: "rd sh mr mw me ms"),
            // A path with spaces, and a file replaced since it was mapped.
            entry("7fe31cf21000-7fe31cf66000 r-xp 00002000 fe:01 2004 /opt/my lib/libx.so (deleted)", rss: 276),
            entry("7ffd1a7f4000-7ffd1a7f6000 r-xp 00000000 00:00 0                          [vdso]", rss: 4,
                  flags: "rd ex mr mw me de"),
            entry("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]", rss: 0,
                  flags: "ex"),
        ].joined()
    }

    private let expected = [
        SmapsScan.Mapping(start: 0x5614c9c81000, end: 0x5614c9d82000, rssKB: 272),
        SmapsScan.Mapping(start: 0x5614c9d82000, end: 0x5614ca1b5000, rssKB: 3208),
        SmapsScan.Mapping(start: 0x7fe31cf21000, end: 0x7fe31cf66000, rssKB: 276),
    ]

    func testOnlyReadOnlyPrivateFileMappingsThatWereNeverWrittenAreReleasable() {
        var scan = SmapsScan()
        scan.feed(Array(sample.utf8))
        XCTAssertEqual(scan.end(), expected)
    }

    func testTheScanDoesNotDependOnWhereReadsSplitTheText() {
        let bytes = Array(sample.utf8)
        for size in [1, 7, 100, 4096] {
            var scan = SmapsScan()
            var i = 0
            while i < bytes.count {
                scan.feed(bytes[i..<min(i + size, bytes.count)])
                i += size
            }
            XCTAssertEqual(scan.end(), expected, "read \(size) bytes at a time")
        }
        // Without the final newline, too.
        var scan = SmapsScan()
        scan.feed(bytes.dropLast())
        XCTAssertEqual(scan.end(), expected)
    }

    /// On this very process: what is released is code and read-only data only, and all of it still works.
    func testReleasingThePagesOfThisProcessKeepsItWorking() throws {
        // Under AddressSanitizer (make asan) its shadow memory and allocator dominate RSS, so RSS says nothing about
        // code pages there; what still works is the point of the test elsewhere.
        try XCTSkipIf(dlsym(nil, "__asan_init") != nil, "RSS is AddressSanitizer's under make asan")
        let mappings = try XCTUnwrap(SmapsScan.ofSelf())
        XCTAssertFalse(mappings.isEmpty)
        let before = try rssKB()
        let released = CodePages.release()
        XCTAssertGreaterThan(released, 0)
        XCTAssertLessThan(try rssKB(), before)
        // Code comes back from the page cache; relocated data (RELRO, GOT) was never dropped.
        XCTAssertEqual(String(cString: strerror(ENOENT)), "No such file or directory")
        XCTAssertEqual([3, 1, 2].sorted(), [1, 2, 3])
        XCTAssertEqual("netpermd".uppercased(), "NETPERMD")
        XCTAssertEqual(Errno(ENOENT).description, "No such file or directory")
        XCTAssertNotNil(SmapsScan.ofSelf())
    }

    /// After the release, a released mapping's page comes back alone, not with the 64 KiB window of neighbours the
    /// kernel maps around a fault of a cached file: the request path's code then costs the pages it runs. The
    /// window's pages are all in the page cache first (read through the file), so fault-around would map them.
    func testAReleasedPageComesBackAloneNotWithItsWindow() throws {
        try XCTSkipIf(dlsym(nil, "__asan_init") != nil, "AddressSanitizer's own mappings")
        // The largest mapping of this test binary that the release unmaps (its code, or code and read-only data in
        // one): its middle is nothing a running test reads.
        let releasable = try XCTUnwrap(SmapsScan.ofSelf())
        CodePages.release()
        XCTAssertTrue(CodePages.faultsOnePage, "this kernel (6.18) has userfaultfd's asynchronous write-protect mode")
        var exe = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &exe, exe.count - 1)
        XCTAssertGreaterThan(n, 0)
        let path = String(cString: exe)
        let maps = try XCTUnwrap(FD.readText("/proc/self/maps")).split(separator: "\n")
        let ours = try maps.compactMap { line -> (start: Int, end: Int, offset: Int)? in
            let w = line.split(separator: " ", omittingEmptySubsequences: true)
            guard w.count >= 6, w[5] == path else { return nil }
            let range = w[0].split(separator: "-")
            return (try XCTUnwrap(Int(range[0], radix: 16)), try XCTUnwrap(Int(range[1], radix: 16)),
                    try XCTUnwrap(Int(w[2], radix: 16)))
        }
        let m = try XCTUnwrap(ours.filter { o in releasable.contains { $0.start == o.start } }
                                  .max { $0.end - $0.start < $1.end - $1.start }, "\(ours) of \(path)")
        let window = 65536, page = 4096
        XCTAssertGreaterThan(m.end - m.start, 4 * window, "\(m)")
        let windowStart = (m.start + (m.end - m.start) / 2) & ~(window - 1)
        // Every page of the window in the page cache, none of it mapped.
        let fd = try sys { open(path, O_RDONLY | O_CLOEXEC) }
        defer { FD.close(fd) }
        var bytes = [UInt8](repeating: 0, count: window)
        _ = try bytes.withUnsafeMutableBytes { b in try sys { pread(fd, b.baseAddress, window, off_t(windowStart - m.start + m.offset)) } }
        XCTAssertEqual(try present(windowStart, pages: window / page), 0, "the window is unmapped after the release")
        let touched = UnsafePointer<UInt8>(bitPattern: windowStart + 5 * page)!.pointee
        XCTAssertEqual(touched, bytes[5 * page], "the mapping reads the file's byte")
        XCTAssertEqual(try present(windowStart, pages: window / page), 1, "only the touched page is mapped")
    }

    /// How many of `pages` pages from `start` are mapped in this process (/proc/self/pagemap's present bit).
    private func present(_ start: Int, pages: Int) throws -> Int {
        let fd = try sys { open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) }
        defer { FD.close(fd) }
        var entries = [UInt64](repeating: 0, count: pages)
        let n = try entries.withUnsafeMutableBytes { b in try sys { pread(fd, b.baseAddress, b.count, off_t(start / 4096 * 8)) } }
        XCTAssertEqual(n, pages * 8)
        return entries.filter { $0 >> 63 == 1 }.count
    }

    private func rssKB() throws -> Int {
        let status = try XCTUnwrap(FD.readText("/proc/self/status"))
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        return try XCTUnwrap(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }
}
