// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation

/// Users and their own service managers in a RealSystemd container, as on a real machine: the account is made by
/// `useradd` (in the container's overlay, so the host's /etc is never touched), and `systemd --user` is the real
/// `user@UID.service`, started by the system manager with its own PAM stack (`systemd-user`).
///
/// What that PAM stack needs here: pam_unix's account check wants the user's shadow entry (without it
/// `unix_chkpwd` says "could not obtain user info" and the service fails with status 224/PAM); useradd writes one.
/// pam_systemd is optional in the stack and logind is masked in the container, so no session is registered, which
/// the user manager does not need. The runtime directory (/run/user/UID) comes from user-runtime-dir@UID.service,
/// which user@.service requires. So `systemctl start user@UID.service` is what logind itself does at a first login,
/// minus the session.
extension RealSystemd {
    func addUser(_ name: String, uid: Int) throws {
        try check(["useradd", "--uid", String(uid), "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                   "--shell", "/bin/sh", name])
    }

    /// Starts `user@UID.service` and waits (bounded by systemctl's job, at most `timeout` s) until it is ready: it is
    /// Type=notify, so its start job ends when the manager is up and its private socket listens.
    func startUserManager(uid: Int, timeout: Double = 30) throws {
        try check(["systemctl", "start", "user@\(uid).service"], timeout: timeout)
    }

    /// Stops the user manager and the runtime directory, as logind does at a last logout.
    func stopUserManager(uid: Int) {
        _ = try? run(["systemctl", "stop", "user@\(uid).service", "user-runtime-dir@\(uid).service"])
    }

    /// `argv` as `uid` (its groups too), with `environment` and nothing of root's; by default that of a login
    /// session: PATH, HOME and XDG_RUNTIME_DIR=/run/user/UID.
    func asUser(_ uid: Int, _ argv: [String], environment: [String]? = nil) -> [String] {
        let env = environment ?? ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "XDG_RUNTIME_DIR=/run/user/\(uid)"]
        return ["setpriv", "--reuid", String(uid), "--regid", String(uid), "--init-groups", "env", "-i"] + env + argv
    }
}
