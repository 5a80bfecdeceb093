// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// netpermd-settings, the settings app, as a notification's "Settings" action opens it: on PATH, started in a
/// session of its own (setsid --fork) so that the agent neither waits for it nor is left with a child to reap.
enum SettingsApp {
    static let program = "netpermd-settings"
    static let key = "settings"

    static var installed: Bool {
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").contains { access("\($0)/\(program)", X_OK) == 0 }
    }

    static func open() {
        var pid: pid_t = 0
        let argv = ["setsid", "--fork", program]
        var cargs = argv.map { strdup($0) } + [nil]
        defer { for p in cargs where p != nil { free(p) } }
        let r = posix_spawnp(&pid, "setsid", nil, nil, &cargs, environ)
        guard r == 0 else {
            Screen.err("netpermctl: cannot start \(program): \(String(cString: strerror(r)))\n")
            return
        }
        // setsid --fork exits at once, its child carrying on.
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }
}
