// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A real `systemd --user` (Debian's systemd 252) of a test uid, run in the test's own pid namespace, the initial one,
/// where the kernel's process events are heard (a container's PID 1 and everything below it are in a namespace of
/// their own, whose processes the events name by pids the daemon cannot see, and whose listeners the kernel
/// ignores). It runs in the test's network namespace, in a delegated cgroup tree of the test's own,
/// `npt-um-PID-UID.slice/user-UID.slice/user@UID.service`, with its own mount namespace: cgroup v2 where systemd looks
/// for it, `/run/systemd/system` (systemd runs a user manager only on a system booted with systemd), and an
/// `/etc/passwd` naming the uid. Its private socket and its bus (Debian's dbus-user-session: dbus.socket and
/// dbus.service in session.slice, as on a desktop) are in `/run/user/UID`, as everywhere. Stopped, its cgroups
/// killed and removed, at teardown.
final class HostUserManager {
    let uid: UInt32
    let runtime: String
    /// The manager's cgroup (absolute path in the test's hierarchy).
    let cgroup: String
    private let top: String
    private let scratch: String
    private var process: ChildProcess?
    private var madeRunUser = false

    init(_ test: IntegrationTestCase, netns: String, uid: UInt32, environment: [String] = []) throws {
        self.uid = uid
        runtime = "/run/user/\(uid)"
        let root = try EnforcementBed.cgroupRoot()
        top = root + "/npt-um-\(getpid())-\(uid).slice"
        cgroup = top + "/user-\(uid).slice/user@\(uid).service"
        scratch = try test.makeTempDir()
        test.addTeardownBlock { [self] in stop() }
        try FileManager.default.createDirectory(atPath: cgroup, withIntermediateDirectories: true)
        for f in ["", "/cgroup.procs", "/cgroup.subtree_control", "/cgroup.threads"] { chown(cgroup + f, uid, uid) }
        madeRunUser = mkdir("/run/user", 0o755) == 0
        guard mkdir(runtime, 0o700) == 0 else { throw HarnessError("mkdir \(runtime): \(String(cString: strerror(errno)))") }
        chown(runtime, uid, uid)
        let home = scratch + "/home"
        mkdir(home, 0o700)
        chown(home, uid, uid)
        chmod(scratch, 0o755)
        try (String(contentsOfFile: "/etc/passwd", encoding: .utf8) + "npt\(uid):x:\(uid):\(uid)::\(home):/bin/sh\n")
            .write(toFile: scratch + "/passwd", atomically: true, encoding: .utf8)
        try (String(contentsOfFile: "/etc/group", encoding: .utf8) + "npt\(uid):x:\(uid):\n")
            .write(toFile: scratch + "/group", atomically: true, encoding: .utf8)
        mkdir(scratch + "/run-systemd", 0o755)
        mkdir(scratch + "/run-systemd/system", 0o755)
        let env = ["HOME=\(home)", "USER=npt\(uid)", "XDG_RUNTIME_DIR=\(runtime)", "PATH=/usr/local/bin:/usr/bin:/bin"]
            + environment
        // The launching shell moves itself into the tree first; the mounts are its own namespace's (unshare
        // makes them private).
        let script = #"""
            set -e
            echo $$ > "$1/cgroup.procs"
            mount --bind "$2/passwd" /etc/passwd
            mount --bind "$2/group" /etc/group
            mount --bind "$2/run-systemd" /run/systemd
            [ -e /sys/fs/cgroup/cgroup.controllers ] || mount --bind "$3" /sys/fs/cgroup
            shift 3
            exec "$@"
            """#
        process = try Subprocess.spawn(["nsenter", "--net=/run/netns/\(netns)", "unshare", "--mount", "sh", "-c", script,
                                        "sh", cgroup, scratch, root, "setpriv", "--reuid=\(uid)", "--regid=\(uid)",
                                        "--clear-groups", "env", "-i"] + env + ["/lib/systemd/systemd", "--user"],
                                       stdin: .devNull, stdout: .appendFile(scratch + "/manager.log"),
                                       stderr: .appendFile(scratch + "/manager.log"))
        test.showOnFailure("systemd --user of uid \(uid)") { [scratch] in
            (try? String(contentsOfFile: scratch + "/manager.log", encoding: .utf8)) ?? ""
        }
        try test.waitUntil("the user manager of uid \(uid) answers", timeout: 20, interval: 0.05) {
            if let s = process?.poll() { throw HarnessError("systemd --user exited \(s)") }
            guard access(runtime + "/systemd/private", F_OK) == 0 else { return (false, "no private socket yet") }
            let r = try Subprocess.run(asUser(["systemctl", "--user", "show", "--property=SystemState", "--value"]))
            return (["running", "degraded"].contains(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), r.summary)
        }
    }

    /// `argv` as the uid, with its session's runtime directory and bus.
    func asUser(_ argv: [String], environment: [String] = []) -> [String] {
        ["setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "env", "XDG_RUNTIME_DIR=\(runtime)",
         "DBUS_SESSION_BUS_ADDRESS=unix:path=\(runtime)/bus"] + environment + argv
    }

    /// A cgroup below the manager's (made by root, as a desktop's own tree would be made by the user), removed with it.
    func makeCgroup(_ relative: String) throws -> String {
        let path = cgroup + "/" + relative
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Also after a start that failed half-way: what was made before the failure goes too.
    private func stop() {
        if let p = process {
            process = nil
            p.signal(SIGTERM)
            if p.wait(timeout: 10) == nil { _ = p.killAndReap() }
        }
        guard access(top, F_OK) == 0 || access(runtime, F_OK) == 0 else { return }
        // Whatever the manager left (its units' processes, the test's own) dies with the tree.
        let kill = cgroup + "/cgroup.kill"
        if access(kill, F_OK) == 0 { try? "1".write(toFile: kill, atomically: false, encoding: .utf8) }
        var dirs: [String] = []
        if let e = FileManager.default.enumerator(atPath: top) {
            for case let rel as String in e {
                var isDir: ObjCBool = false
                if FileManager.default.fileExists(atPath: top + "/" + rel, isDirectory: &isDir), isDir.boolValue {
                    dirs.append(top + "/" + rel)
                }
            }
        }
        dirs.sort { $0.count > $1.count }
        EnforcementBed.removeCgroups((dirs + [top]).reversed().map { Array($0.utf8CString) })
        if rmdir(top) != 0 && errno != ENOENT { XCTFail("\(top) is left behind: \(String(cString: strerror(errno)))") }
        try? FileManager.default.removeItem(atPath: runtime)
        if madeRunUser { rmdir("/run/user") }
    }
}
