// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real systemd booted as PID 1 of its own pid, mount, uts, ipc and cgroup namespaces, inside a test network
/// namespace, on a tmpfs overlay of `/`, in a cgroup-v2 subtree of its own (boot-systemd.sh does the inside).
/// What `make install-files` installs is copied into its root first, so the units under test are the installed
/// ones. The host's units, mounts and links are never touched: teardown kills the whole subtree, the namespaces
/// and their mounts go with their last process, and the cgroup and network namespace are removed.
final class RealSystemd: @unchecked Sendable {
    nonisolated(unsafe) private static var counter = 0

    let name: String
    let namespace: TestNamespace
    /// The cgroup subtree on the host, e.g. /sys/fs/cgroup/unified/npt-systemd-test-123-1.
    let cgroup: String
    let consoleLog: String
    private let launcher: ChildProcess
    /// systemd's pid as the host sees it.
    private(set) var pid1: pid_t = 0
    private var stopped = false

    /// The container's root as the host reaches it (for writing files into it).
    var root: String { "/proc/\(pid1)/root" }

    /// Boots, waiting at most `timeout` seconds for `systemctl is-system-running` to say running.
    /// `staged` is a `make install-files DESTDIR=...` tree; `scratch` an empty directory.
    init(namespace: TestNamespace, staged: String, scratch: String, timeout: Double = 30) throws {
        Self.counter += 1
        name = "npt-systemd-test-\(getpid())-\(Self.counter)"
        self.namespace = namespace
        consoleLog = scratch + ".console"
        cgroup = try Self.cgroup2Mount() + "/" + name
        guard mkdir(cgroup, 0o755) == 0 else {
            throw HarnessError("mkdir \(cgroup): \(String(cString: strerror(errno)))")
        }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("boot-systemd.sh").path
        // The launching shell moves itself into the subtree, so everything it starts is in it; `unshare --fork`
        // makes the script PID 1 of the new pid namespace.
        let launch = "echo $$ > \"$1/cgroup.procs\" && exec nsenter --net=/run/netns/$2 unshare --pid --fork --mount "
            + "--uts --ipc --cgroup --propagation private /bin/sh \"$3\" \"$4\" \"$5\" \"$6\""
        do {
            launcher = try Subprocess.spawn(["sh", "-c", launch, "sh", cgroup, namespace.name, script, scratch, name, staged],
                                            stdin: .devNull, stdout: .appendFile(consoleLog),
                                            stderr: .appendFile(consoleLog))
        } catch {
            rmdir(cgroup)
            throw error
        }
        do {
            try waitForBoot(timeout: timeout)
        } catch {
            shutdown()
            throw error
        }
    }

    /// The unified (v2) hierarchy's mount point from /proc/self/mountinfo: /sys/fs/cgroup on ordinary systems,
    /// /sys/fs/cgroup/unified on hybrid ones.
    static func cgroup2Mount() throws -> String {
        let info = try readProcFile("/proc/self/mountinfo")
        for line in info.split(separator: "\n") {
            // "... MOUNTPOINT OPTIONS [optional fields] - FSTYPE SOURCE SUPEROPTIONS"
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2, halves[1].hasPrefix("cgroup2 ") else { continue }
            let fields = halves[0].split(separator: " ")
            if fields.count > 4 { return String(fields[4]) }
        }
        throw HarnessError("no cgroup2 file system is mounted (see /proc/self/mountinfo)")
    }

    private var console: String { (try? String(contentsOfFile: consoleLog, encoding: .utf8)) ?? "" }

    private func waitForBoot(timeout: Double) throws {
        let deadline = monotonicNow() + timeout
        var last = "(not asked yet)"
        while monotonicNow() < deadline {
            if let status = launcher.poll() {
                throw HarnessError("the container's init exited with status \(status) before systemd ran:\n\(console)")
            }
            if pid1 == 0, let text = try? readProcFile("/proc/\(launcher.pid)/task/\(launcher.pid)/children"),
               let child = text.split(separator: " ").first.flatMap({ pid_t($0) }) {
                pid1 = child
            }
            if pid1 != 0, procExecutable(of: pid1)?.hasSuffix("/systemd/systemd") == true,
               let r = try? run(["systemctl", "is-system-running"], timeout: 5) {
                last = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) + " " + r.stderr
                if r.stdout.hasPrefix("running") { return }
                if r.stdout.hasPrefix("degraded") {
                    let failed = (try? run(["systemctl", "--failed", "--no-legend"]))?.stdout ?? ""
                    throw HarnessError("systemd booted degraded; failed units:\n\(failed)")
                }
            }
            usleep(50_000)
        }
        throw HarnessError("systemd did not reach 'running' within \(timeout) s (last: \(last)); console:\n\(console)")
    }

    /// Runs a command inside every namespace of the container (nsenter -a), as root.
    @discardableResult
    func run(_ argv: [String], input: String = "", timeout: Double = 30) throws -> CommandResult {
        try Subprocess.run(["nsenter", "-t", String(pid1), "-a"] + argv, input: Array(input.utf8), timeout: timeout)
    }

    /// Runs a command inside and throws unless it exits 0.
    @discardableResult
    func check(_ argv: [String], timeout: Double = 30) throws -> CommandResult {
        let r = try run(argv, timeout: timeout)
        guard r.status == 0 else { throw HarnessError("in the container: \(r.summary)") }
        return r
    }

    /// `systemctl show -p PROPERTY --value UNIT`.
    func property(_ unit: String, _ property: String) throws -> String {
        try check(["systemctl", "show", "-p", property, "--value", unit]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Writes a file inside the container's root (creating its directory).
    func write(_ text: String, to path: String) throws {
        let full = root + path
        try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try text.write(toFile: full, atomically: false, encoding: .utf8)
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: root + path) }

    /// The unit's journal as (priority, message) pairs, oldest first.
    func journal(unit: String) throws -> [(priority: Int, message: String)] {
        let r = try check(["journalctl", "--no-pager", "-o", "json", "-u", unit])
        return try r.lines.compactMap { line in
            let o = try JSONValue.object(line)
            guard let m = o["MESSAGE"] as? String, let p = (o["PRIORITY"] as? String).flatMap({ Int($0) }) else {
                return nil
            }
            return (p, m)
        }
    }

    /// Kills everything in the subtree, reaps the launcher, removes the cgroups. Bounded; safe to call twice.
    func shutdown() {
        guard !stopped else { return }
        stopped = true
        _ = try? "1".write(toFile: cgroup + "/cgroup.kill", atomically: false, encoding: .utf8)
        if launcher.wait(timeout: 10) == nil { launcher.killAndReap() }
        // Killed processes leave their cgroups a moment later; children before parents.
        let deadline = monotonicNow() + 10
        while FileManager.default.fileExists(atPath: cgroup) && monotonicNow() < deadline {
            let dirs = ((try? FileManager.default.subpathsOfDirectory(atPath: cgroup)) ?? [])
                .map { cgroup + "/" + $0 }
                .filter { var st = stat(); return lstat($0, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR }
                .sorted { $0.count > $1.count }
            for d in dirs { rmdir(d) }
            if rmdir(cgroup) != 0 { usleep(20_000) }
        }
        // Beside the scratch directory, which its test removes: this file is the container's own to remove.
        unlink(consoleLog)
    }
}
