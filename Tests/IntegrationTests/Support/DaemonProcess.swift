// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real netpermd started inside a test namespace, its stdout and stderr going to a log file.
final class DaemonProcess: @unchecked Sendable {
    let process: ChildProcess
    var pid: pid_t { process.pid }
    let socketPath: String
    let logPath: String
    let argv: [String]
    var exitStatus: Int32? { process.exitStatus }

    /// Starts `ip netns exec NS [WRAPPER...] netpermd --socket ... --config ... --state-dir ... --log-level debug
    /// EXTRA...`. `ip netns exec` execs the daemon in place (and so must a wrapper such as `prlimit --nofile=64:64`),
    /// so `pid` is the daemon's own. `stateDir` keeps the daemon away from the host's /var/lib/netpermd.
    /// With `nsenter`, `nsenter --net=/run/netns/NS` instead: it enters only the network namespace, where `ip netns
    /// exec` also remounts /sys and so hides the cgroup hierarchy (enforcement needs it; FACTS.md).
    /// The daemon reads desktop files from `XDG_DATA_DIRS` set to a directory of the state dir that holds none
    /// (a `wrapper` of `env XDG_DATA_DIRS=...` comes after and wins): the machine's own (`vim.desktop`) would be
    /// listed by APPS and make tests depend on what happens to be installed.
    init(binary: String, namespace: String, socketPath: String, configPath: String, stateDir: String,
         logPath: String, extraArgs: [String] = [], wrapper: [String] = [], nsenter: Bool = false) throws {
        self.socketPath = socketPath
        self.logPath = logPath
        argv = (nsenter ? ["nsenter", "--net=/run/netns/\(namespace)"] : ["ip", "netns", "exec", namespace])
            + ["env", "XDG_DATA_DIRS=\(stateDir)/no-desktop-files"] + wrapper + [binary, "--socket", socketPath, "--config", configPath,
                "--state-dir", stateDir, "--log-level", "debug"] + extraArgs
        process = try Subprocess.spawn(argv, stdin: .devNull, stdout: .appendFile(logPath), stderr: .appendFile(logPath))
    }

    /// Everything the daemon has logged so far.
    var log: String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "(no log at \(logPath))"
    }

    /// The log's tail, for failure messages.
    var logTail: String {
        let l = log
        return l.count > 6000 ? "…" + l.suffix(6000) : l
    }

    /// The exit status if the daemon has exited (reaping it), nil while it runs.
    func pollExit() -> Int32? { process.poll() }

    var isRunning: Bool { process.isRunning }

    /// Bounded wait for the daemon to exit.
    func waitForExit(timeout: Double) -> Int32? { process.wait(timeout: timeout) }

    func signal(_ sig: Int32) { process.signal(sig) }

    /// SIGKILL and reap; used by teardown so nothing outlives a test.
    func forceStop() { process.killAndReap() }
}
