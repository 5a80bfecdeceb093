// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The control socket is mode 0666 (anyone may connect; the daemon decides what each peer may see) and the
/// directory the daemon creates for it 0755, whatever umask the daemon was started with. Under umask 0 the
/// socket used to come out 0777.
final class SocketModeTests: IntegrationTestCase {
    func testSocketIs0666AndItsDirectory0755UnderAnyUmask() throws {
        let ns = try makeNamespace()
        for mask: mode_t in [0, 0o077, 0o022] {
            let dir = try makeTempDir()
            let config = try writeConfig(in: dir)
            // A directory that does not exist yet: the daemon creates it.
            let socket = dir + "/run/netpermd.sock"
            let old = umask(mask)
            let started = Result { try startDaemon(in: ns, socket: socket, config: config, waitForAnswer: false) }
            umask(old)
            let daemon = try started.get()
            try waitUntilAnswering(daemon)
            var st = stat()
            XCTAssertEqual(lstat(socket, &st), 0, "umask \(String(mask, radix: 8)): \(socket)")
            XCTAssertEqual(st.st_mode & S_IFMT, S_IFSOCK, "umask \(String(mask, radix: 8))")
            XCTAssertEqual(String(st.st_mode & 0o7777, radix: 8), "666", "the socket's mode under umask \(String(mask, radix: 8))")
            XCTAssertEqual(lstat(dir + "/run", &st), 0)
            XCTAssertEqual(String(st.st_mode & 0o7777, radix: 8), "755",
                           "the socket's directory's mode under umask \(String(mask, radix: 8))")
            stopDaemon(daemon)
        }
    }
}
