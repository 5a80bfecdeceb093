// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicyFiles
import XCTest

/// The passwd and group look-ups the policy and the start-up make. Their strings point into the buffer the
/// reentrant call was given: `home(of:)` used to copy the home directory after that buffer was freed, which crashed
/// 4-10 of 16 start-ups with users logged in (and is an AddressSanitizer report in `make asan`).
final class SystemAccountsTests: XCTestCase {
    func testEntriesAreReadWhileTheirBufferLives() {
        let accounts = SystemAccounts()
        // Many times over, with allocations between, so that a freed buffer is reused under a copy made too late.
        for _ in 0..<2000 {
            XCTAssertEqual(accounts.home(of: 0), "/root")
            XCTAssertEqual(accounts.name(ofUser: 0), "root")
            XCTAssertEqual(accounts.uid(forUser: "root"), 0)
            XCTAssertEqual(accounts.gid(forGroup: "root"), 0)
            _ = [UInt8](repeating: 0x41, count: 4096)
        }
    }

    func testWhatIsNotThereIsNil() {
        let accounts = SystemAccounts()
        XCTAssertNil(accounts.uid(forUser: "npt-no-such-user-\(getpid())"))
        XCTAssertNil(accounts.gid(forGroup: "npt-no-such-group-\(getpid())"))
        XCTAssertNil(accounts.home(of: 3_999_999_999))
        XCTAssertNil(accounts.name(ofUser: 3_999_999_999))
    }
}
