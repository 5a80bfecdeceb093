// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Users of the test's own, with passwd and group entries: copies of /etc/passwd and /etc/group with them added,
/// bound over the real ones in a private mount namespace of each process that must look them up (dbus-daemon
/// refuses a uid it cannot resolve). The host's /etc is never touched; the mounts go with the process.
final class TestUsers: @unchecked Sendable {
    let dir: String
    let uids: [UInt32]

    init(_ test: IntegrationTestCase, _ users: [(name: String, uid: UInt32)]) throws {
        dir = try test.makeTempDir()
        chmod(dir, 0o755)
        uids = users.map(\.uid)
        var passwd = try String(contentsOfFile: "/etc/passwd", encoding: .utf8)
        var group = try String(contentsOfFile: "/etc/group", encoding: .utf8)
        for u in users {
            passwd += "\(u.name):x:\(u.uid):\(u.uid)::\(home(u.uid)):/bin/sh\n"
            group += "\(u.name):x:\(u.uid):\n"
            try FileManager.default.createDirectory(atPath: home(u.uid), withIntermediateDirectories: true)
            chown(home(u.uid), u.uid, u.uid)
        }
        try passwd.write(toFile: dir + "/passwd", atomically: true, encoding: .utf8)
        try group.write(toFile: dir + "/group", atomically: true, encoding: .utf8)
    }

    /// The user's home: a directory of its own, for what dunst, Xvfb and python write there.
    func home(_ uid: UInt32) -> String { dir + "/home-\(uid)" }

    /// `argv` as `uid` (its own group, no other), with the test users known, nothing of root's environment but PATH,
    /// HOME its own, and `environment`; in a pid namespace of its own whose first process, the shell, dies with the
    /// unshare that is the spawned process (`--kill-child`), and every process of the namespace with it (so killing
    /// it ends what it started too: Xvfb under xvfb-run). The shell does not exec the command: setpriv changing the
    /// uid would clear that parent-death signal, and a command that is the namespace's init ignores signals it has no
    /// handler for (xvfb-run's wait for Xvfb never ended).
    func argv(_ uid: UInt32, _ argv: [String], environment: [String] = []) -> [String] {
        ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "sh", "-c",
         #"mount --bind "$0/passwd" /etc/passwd && mount --bind "$0/group" /etc/group && "$@""#, dir,
         "setpriv", "--reuid", String(uid), "--regid", String(uid), "--clear-groups",
         "env", "-i", "PATH=/usr/bin:/bin", "HOME=\(home(uid))"] + environment + argv
    }
}
