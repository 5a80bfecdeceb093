// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `netpermctl run` by a user whose own service manager cannot be reached (no systemd needed: these are the cases
/// where there is none): exit 5 before COMMAND runs or the daemon is asked, and one line that says what was tried
/// and the way out, never a bare errno of sd-bus. RealSystemdUserRunTests has the same under a real systemd.
final class RunWithoutManagerTests: IntegrationTestCase {
    static let uid: uid_t = 4010

    /// `netpermctl run --app tool -- touch MARKER` as uid 4010 with `environment` only; checks exit 5, nothing on
    /// stdout, COMMAND not run, and returns the message after "cannot start the scope app-netpermd-tool-TAG.scope: ".
    private func refused(_ environment: [String], file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let dir = try makeTempDir()
        chown(dir, Self.uid, Self.uid)
        let marker = dir + "/ran"
        let r = try Subprocess.run(["setpriv", "--reuid", "\(Self.uid)", "--regid", "\(Self.uid)", "--clear-groups",
                                    "env", "-i"] + environment
                                   + [netpermctl, "--socket", dir + "/missing.sock", "run", "--app", "tool", "--",
                                      "touch", marker])
        XCTAssertEqual(r.status, 5, r.summary, file: file, line: line)
        XCTAssertEqual(r.stdout, "", r.summary, file: file, line: line)
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "COMMAND ran: \(r.summary)", file: file, line: line)
        let head = try XCTUnwrap(r.stderr.range(of: #"^netpermctl: cannot start the scope app-netpermd-tool-[0-9]+_[0-9a-f]+\.scope: "#,
                                                options: .regularExpression), r.summary, file: file, line: line)
        return String(r.stderr[head.upperBound...])
    }

    /// A bare `su`, a cron job, a service: no session environment at all.
    func testNoRuntimeDirectory() throws {
        XCTAssertEqual(try refused([]), "no user service manager reachable: XDG_RUNTIME_DIR is not set (it names the "
            + "directory of your user manager's socket, /run/user/4010 in a login session) and neither is "
            + "DBUS_SESSION_BUS_ADDRESS\n")
    }

    /// The user's own runtime directory, with no manager in it (stopped, or never started).
    func testNoManagerInTheRuntimeDirectory() throws {
        let runtime = try makeTempDir()
        chown(runtime, Self.uid, Self.uid)
        XCTAssertEqual(try refused(["XDG_RUNTIME_DIR=\(runtime)"]), "no user service manager reachable: tried "
            + "\(runtime)/systemd/private (No such file or directory) and the user bus unix:path=\(runtime)/bus "
            + "(No such file or directory); is your user manager (user@4010.service) running? It runs while you are "
            + "logged in, and always after `loginctl enable-linger`\n")
        // DBUS_SESSION_BUS_ADDRESS, when set, is the user bus sd-bus tries (and the message names it).
        XCTAssertEqual(try refused(["XDG_RUNTIME_DIR=\(runtime)", "DBUS_SESSION_BUS_ADDRESS=unix:path=\(runtime)/b"]),
                       "no user service manager reachable: tried \(runtime)/systemd/private (No such file or directory) "
            + "and the user bus unix:path=\(runtime)/b (No such file or directory); is your user manager "
            + "(user@4010.service) running? It runs while you are logged in, and always after `loginctl enable-linger`\n")
    }

    /// Another user's runtime directory, as `su` and `sudo` keep XDG_RUNTIME_DIR: named as such, not "Permission
    /// denied" from two sockets.
    func testAnotherUsersRuntimeDirectory() throws {
        let root = try makeTempDir()
        XCTAssertEqual(try refused(["XDG_RUNTIME_DIR=\(root)"]), "no user service manager reachable: XDG_RUNTIME_DIR is "
            + "\(root), which belongs to uid 0, not to you (uid 4010); was it kept from another user's session (su, "
            + "sudo)? Yours is /run/user/4010\n")
        XCTAssertEqual(try refused(["XDG_RUNTIME_DIR=\(root)/gone"]), "no user service manager reachable: "
            + "XDG_RUNTIME_DIR is \(root)/gone: Permission denied\n")
    }
}
