// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A network namespace plus a private mount namespace in which netpermd can run with every default path
/// (/run/netpermd/netpermd.sock, /etc/netpermd/netpermd.conf, /var/lib/netpermd) and commands can be run exactly
/// as the docs write them: /run is a fresh tmpfs, /etc and /var/lib are overlays whose writes land in a tmpfs, and
/// /sys is the namespace's own. Nothing reaches the host: the mounts live in the namespace, which goes with its
/// holder process.
final class DefaultsSandbox: @unchecked Sendable {
    let namespace: TestNamespace
    /// A process that only holds the mount namespace open; every command enters its namespaces.
    private let holder: ChildProcess
    private let holderLog: String

    init(namespace: TestNamespace, scratch: String) throws {
        self.namespace = namespace
        holderLog = scratch + ".log"
        guard mkdir(scratch, 0o700) == 0 else { throw HarnessError("mkdir \(scratch): \(String(cString: strerror(errno)))") }
        let script = """
            set -e
            s=$1
            mount -t tmpfs -o mode=0755 npt-docs "$s"
            mkdir "$s/etc-up" "$s/etc-work" "$s/lib-up" "$s/lib-work"
            mount -t overlay overlay -o "lowerdir=/etc,upperdir=$s/etc-up,workdir=$s/etc-work" /etc
            mount -t overlay overlay -o "lowerdir=/var/lib,upperdir=$s/lib-up,workdir=$s/lib-work" /var/lib
            mount -t tmpfs -o mode=0755,nosuid,nodev npt-run /run
            mount -t sysfs -o ro sysfs /sys
            mkdir -p /etc/netpermd
            echo ready
            exec sleep 3600
            """
        holder = try Subprocess.spawn(["nsenter", "--net=/run/netns/\(namespace.name)", "unshare", "--mount",
                                       "--propagation", "private", "/bin/sh", "-c", script, "sh", scratch],
                                      stdin: .devNull, stdout: .appendFile(holderLog), stderr: .appendFile(holderLog))
        let deadline = monotonicNow() + 10
        while !((try? String(contentsOfFile: holderLog, encoding: .utf8))?.contains("ready") ?? false) {
            if let status = holder.poll() {
                throw HarnessError("the sandbox's holder exited \(status): \(log)")
            }
            guard monotonicNow() < deadline else {
                holder.killAndReap()
                throw HarnessError("the sandbox was not ready within 10 s: \(log)")
            }
            usleep(10_000)
        }
    }

    private var log: String { (try? String(contentsOfFile: holderLog, encoding: .utf8)) ?? "" }

    /// The sandbox's root as the host reaches it (writes land in the overlays).
    var root: String { "/proc/\(holder.pid)/root" }

    /// argv inside the sandbox's network and mount namespaces.
    func argv(_ command: [String]) -> [String] {
        ["nsenter", "-t", String(holder.pid), "-m", "-n", "--"] + command
    }

    func write(_ text: String, to path: String) throws {
        try text.write(toFile: root + path, atomically: false, encoding: .utf8)
    }

    /// `netpermd` with no arguments at all (every default path), its output in `log`, stopped at the test's
    /// teardown; returns once it answers `netpermctl ping` on its default socket.
    func startDaemon(_ test: IntegrationTestCase, log: String) throws -> ChildProcess {
        let daemon = try Subprocess.spawn(argv([test.netpermd]), stdin: .devNull, stdout: .appendFile(log),
                                          stderr: .appendFile(log))
        test.addTeardownBlock {
            daemon.signal(SIGTERM)
            if daemon.wait(timeout: 5) == nil { daemon.killAndReap() }
        }
        try test.waitUntil("netpermd answers on its default socket") {
            if let s = daemon.poll() {
                throw HarnessError("netpermd exited \(s): \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
            }
            let r = try Subprocess.run(argv([test.netpermctl, "ping"]))
            return (r.status == 0, r.summary)
        }
        return daemon
    }

    /// Ends the holder; the namespace's mounts go with it.
    func close() {
        holder.killAndReap()
        try? FileManager.default.removeItem(atPath: holderLog)
    }
}
