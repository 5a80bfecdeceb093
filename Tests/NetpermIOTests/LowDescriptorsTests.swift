// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
@testable import NetpermIO
import XCTest

/// libnftables waits on its socket with select(2), which aborts the process for a descriptor of 1024 or more: what
/// it opens inside `LowDescriptors.whileFree` gets a low number however many the process holds.
final class LowDescriptorsTests: XCTestCase {
    func testWhatOpensWhileFreeGetsALowNumberWhenAllOthersAreTaken() throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let saved = limit
        limit.rlim_cur = max(limit.rlim_cur, min(4096, limit.rlim_max))
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        defer { var s = saved; setrlimit(Int32(RLIMIT_NOFILE.rawValue), &s) }
        guard limit.rlim_cur >= 1200 else { return XCTFail("the descriptor limit is \(limit.rlim_cur), below 1,200") }
        /// The number the next descriptor would get.
        func nextFree() -> Int32 {
            let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
            close(fd)
            return fd
        }

        LowDescriptors.reserve(4)
        XCTAssertEqual(LowDescriptors.count, 4)
        // A daemon holding a thousand clients: every number below 1024 is taken.
        var taken: [Int32] = []
        defer { for fd in taken { close(fd) } }
        while true {
            let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
            XCTAssertGreaterThanOrEqual(fd, 0)
            taken.append(fd)
            if fd >= 1100 { break }
        }
        XCTAssertGreaterThanOrEqual(nextFree(), 1024, "nothing low is free")

        let socketFD = LowDescriptors.whileFree { socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        XCTAssertGreaterThanOrEqual(socketFD, 0)
        XCTAssertLessThan(socketFD, LowDescriptors.selectable, "the library's socket is one select(2) can wait on")
        XCTAssertEqual(LowDescriptors.count, 3, "the rest of the reserve taken back")
        // Closed inside, as a context is freed: its number goes back to the reserve, before anyone else takes it.
        _ = LowDescriptors.whileFree { close(socketFD) }
        XCTAssertEqual(LowDescriptors.count, 4)
        XCTAssertGreaterThanOrEqual(nextFree(), 1024, "and nothing low is left free")
    }

    /// Under a limit of at most 1024 descriptors every number is low: nothing is held back from the daemon's own.
    func testUnderALimitOfAtMostFDSetSizeNothingIsHeld() {
        LowDescriptors.reserve(4, limit: 4096)
        XCTAssertEqual(LowDescriptors.count, 4)
        LowDescriptors.reserve(4, limit: 64)
        XCTAssertEqual(LowDescriptors.count, 0)
        LowDescriptors.reserve(4, limit: 1024)
        XCTAssertEqual(LowDescriptors.count, 0)
        // A body still runs (nothing to free around it).
        XCTAssertEqual(LowDescriptors.whileFree { 7 }, 7)
        XCTAssertEqual(LowDescriptors.count, 0)
    }
}
