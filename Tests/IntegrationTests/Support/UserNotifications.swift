// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation

/// python-dbusmock's notification server as a service of a user's own manager in a RealSystemd container (its bus
/// activated by dbus.socket), and Support/notifications.py to read what it was asked and to click its actions.
struct UserNotifications {
    let sd: RealSystemd
    /// `argv` as the user, with their session bus.
    let user: ([String]) -> [String]
    /// Copied in: the container's /tmp is its own, so a checkout under /tmp is not there.
    static let script = "/usr/local/lib/npt/notifications.py"

    /// Starts the server (`bus`: the DBUS_SESSION_BUS_ADDRESS=... assignment) and waits until it answers.
    init(_ test: IntegrationTestCase, _ sd: RealSystemd, bus: String, user: @escaping ([String]) -> [String]) throws {
        self.sd = sd
        self.user = user
        try sd.check(user(["systemd-run", "--user", "--unit=npt-notifications", "--setenv=" + bus, "/usr/bin/python3", "-m",
                           "dbusmock", "--session", "--template", "notification_daemon", "-p",
                           #"{"capabilities": "body actions"}"#]))
        try sd.write(try String(contentsOfFile: Repository.path("Tests/IntegrationTests/Support/notifications.py"),
                                encoding: .utf8), to: Self.script)
        try test.waitUntil("the notification server answers", timeout: 10) {
            let r = try sd.run(user(["/usr/bin/python3", Self.script, "calls"]))
            return (r.status == 0, r.summary)
        }
    }

    /// What it was asked, in order: {"method", "args"}.
    func calls() throws -> [[String: Any]] {
        try sd.check(user(["/usr/bin/python3", Self.script, "calls"])).lines.map(JSONValue.object)
    }

    /// The person clicks action `key` of notification `id`.
    func click(_ id: Int, _ key: String) throws {
        try sd.check(user(["/usr/bin/python3", Self.script, "action", String(id), key]))
    }
}
