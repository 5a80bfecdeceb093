// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The socket file's life: one daemon per path, stale files replaced, removed on SIGTERM.
final class LifecycleTests: IntegrationTestCase {
    static let pong = #"{"ok":true,"pong":true}"#

    func testSecondDaemonOnTheSamePathRefusesToStart() throws {
        let f = try makeFixture()
        let second = try startDaemon(in: f.ns, socket: f.socket, config: f.config, logName: "second.log",
                                     waitForAnswer: false)
        let status = second.waitForExit(timeout: 5)
        XCTAssertNotNil(status, "the second daemon is still running")
        XCTAssertNotEqual(status, 0, "the second daemon must fail")
        XCTAssertTrue(second.log.contains(f.socket), "its message names the path: \(second.log)")
        XCTAssertTrue(second.log.contains("already"), "its message says why: \(second.log)")

        XCTAssertTrue(f.daemon.isRunning, "the first daemon keeps running")
        XCTAssertTrue(isSocketFile(f.socket), "the first daemon's socket file is still there")
        XCTAssertEqual(try socat(f.socket, ["PING"]), [Self.pong], "the first daemon still answers on the path")
        let ctlPing = try ctl(["--socket", f.socket, "ping"])
        XCTAssertEqual(ctlPing.status, 0, ctlPing.summary)
    }

    func testBoundButUnlistenedSocketFileIsReplaced() throws {
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        let config = try writeConfig(in: dir)
        let path = "\(dir)/netpermd.sock"
        let stale = try BoundUnlistenedSocket(path: path)
        addTeardownBlock { stale.close() }
        // The precondition: a socket file nobody accepts on.
        XCTAssertTrue(isSocketFile(path))
        let refused = try socatRun(path, input: Array("PING\n".utf8))
        XCTAssertNotEqual(refused.status, 0, "connecting to the stale socket must fail: \(refused.summary)")

        let d = try startDaemon(in: ns, socket: path, config: config)
        XCTAssertEqual(try socat(path, ["PING"]), [Self.pong])
        XCTAssertTrue(d.isRunning)
    }

    func testSocketLeftByAKilledDaemonIsReplaced() throws {
        let f = try makeFixture()
        f.daemon.signal(SIGKILL)
        XCTAssertEqual(f.daemon.waitForExit(timeout: 5), 128 + SIGKILL)
        XCTAssertTrue(isSocketFile(f.socket), "kill -9 leaves the socket file behind")
        XCTAssertNotEqual(try socatRun(f.socket, input: Array("PING\n".utf8)).status, 0, "nobody answers on it")

        let second = try startDaemon(in: f.ns, socket: f.socket, config: f.config, logName: "second.log")
        XCTAssertEqual(try socat(f.socket, ["PING"]), [Self.pong])
        XCTAssertTrue(try status(f.socket).ready)
        XCTAssertTrue(second.isRunning)
    }

    func testSigtermAndSigintRemoveTheSocketFile() throws {
        let f = try makeFixture()
        // An idle client connected at the time must not keep the daemon alive.
        let idleIn = try Subprocess.makePipe()
        let idle = try Subprocess.spawn(["socat", "-", "UNIX-CONNECT:\(f.socket)"], stdin: .fd(idleIn.read),
                                        stdout: .devNull, stderr: .devNull)
        close(idleIn.read)
        addTeardownBlock {
            close(idleIn.write)
            idle.killAndReap()
        }
        XCTAssertEqual(try socat(f.socket, ["PING"]), [Self.pong])

        XCTAssertTrue(isSocketFile(f.socket))
        stopDaemon(f.daemon)   // asserts exit 0 within 5 s and the file gone
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.socket))
        XCTAssertTrue(f.daemon.log.contains("SIGTERM"), "the daemon says why it stops")
        XCTAssertNotNil(idle.wait(timeout: 5), "the idle client was disconnected")

        // SIGINT (Ctrl-C in a terminal) does the same.
        let second = try startDaemon(in: f.ns, socket: f.socket, config: f.config, logName: "second.log")
        second.signal(SIGINT)
        XCTAssertEqual(second.waitForExit(timeout: 5), 0, "exit status after SIGINT")
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.socket), "SIGINT removes the socket file")
    }

    /// SIGTERM the moment the socket file appears (as a service manager stopping a daemon it just started
    /// would): the daemon must still exit cleanly and remove the file.
    func testSigtermDuringStartupRemovesTheSocketFile() throws {
        let ns = try makeNamespace()
        try ns.addVethPair("wlan0", peer: "wlan0p")
        let dir = try makeTempDir()
        let config = try writeConfig(in: dir)
        let path = "\(dir)/netpermd.sock"
        let d = try startDaemon(in: ns, socket: path, config: config, waitForAnswer: false)
        try waitUntil("the socket file appears", timeout: 5, interval: 0.0002) {
            if let status = d.pollExit() { throw HarnessError("netpermd exited with status \(status) while starting") }
            return (isSocketFile(path), "no socket file at \(path)")
        }
        d.signal(SIGTERM)
        let status = d.waitForExit(timeout: 5)
        XCTAssertEqual(status, 0, "exit status after a SIGTERM during start-up (\(128 + SIGTERM) means it was killed "
            + "by the signal before its handler was in place)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "a SIGTERM during start-up left \(path) behind")
    }

    /// Only a socket nobody listens on is stale; any other file at the path is not the daemon's to delete.
    func testRegularFileAtTheSocketPathIsNotReplaced() throws {
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        let config = try writeConfig(in: dir)
        let path = "\(dir)/netpermd.sock"
        let content = "not a socket: somebody's data\n"
        try content.write(toFile: path, atomically: true, encoding: .utf8)

        let d = try startDaemon(in: ns, socket: path, config: config, waitForAnswer: false)
        let status = d.waitForExit(timeout: 5)
        XCTAssertNotNil(status, "netpermd is running on a path that held a regular file")
        XCTAssertNotEqual(status, 0)
        XCTAssertFalse(isSocketFile(path), "the regular file was replaced by a socket")
        XCTAssertEqual(try? String(contentsOfFile: path, encoding: .utf8), content, "the file is intact")
        XCTAssertTrue(d.log.contains(path), "the error names the path: \(d.log)")
    }
}
