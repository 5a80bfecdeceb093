// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The installed user unit `netpermd-agent.service` under a real systemd (RealSystemd), started for a user through
/// their real `user@UID.service` (RealSystemdUsers), on that user's own session bus (dbus-user-session's
/// `dbus.socket`, /run/user/UID/bus) with python-dbusmock's notification server: the user's app asks, the unit's
/// agent shows the notification, and its action is the user's answer, for their own uid.
final class RealSystemdAgentTests: IntegrationTestCase {
    static let uid = 4020

    static let policy = """
        [Interface wlan0]
        Kind=wifi

        [Interface wwan0]
        Kind=wwan

        [App npt-user-app]
        User=4020
        WWAN=ask

        """

    func testTheAgentUnitAnswersForItsUser() throws {
        let sd = try bootRealSystemd(policy: Self.policy)
        try sd.check(["systemctl", "start", "netpermd.service"])
        try sd.addUser("npt-agent", uid: Self.uid)
        addTeardownBlock { sd.stopUserManager(uid: Self.uid) }
        try sd.startUserManager(uid: Self.uid)
        // The user's manager finds the unit where make install put it, wanted by graphical sessions.
        XCTAssertTrue(sd.exists("/usr/local/lib/systemd/user/graphical-session.target.wants/netpermd-agent.service"))
        let bus = "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/\(Self.uid)/bus"
        func user(_ argv: [String]) -> [String] {
            sd.asUser(Self.uid, argv, environment: ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent",
                                                    "XDG_RUNTIME_DIR=/run/user/\(Self.uid)", bus])
        }
        func agentState() throws -> String {
            try sd.run(user(["systemctl", "--user", "show", "-p", "ActiveState", "--value", "netpermd-agent.service"]))
                .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // A user unit's output is in the system's journal here (no persistent journal to split by user).
        func journal() throws -> String {
            try sd.check(["journalctl", "--no-pager", "-o", "cat", "_SYSTEMD_USER_UNIT=netpermd-agent.service"]).stdout
        }
        showOnFailure("the agent unit's journal") { (try? journal()) ?? "" }

        // The notification server, a service of the user's own (its bus activated by dbus.socket).
        let server = try UserNotifications(self, sd, bus: bus, user: user)
        func calls() throws -> [[String: Any]] { try server.calls() }

        try sd.check(user(["systemctl", "--user", "start", "netpermd-agent.service"]))
        try waitUntil("the agent unit runs", timeout: 10) {
            let state = try agentState()
            let asked = try calls().contains { $0["method"] as? String == "GetCapabilities" }
            return (state == "active" && asked, state)
        }

        // The user's app waits for itself; the agent's notification is its prompt.
        let waiter = try Subprocess.spawn(["nsenter", "-t", String(sd.pid1), "-a"]
                                              + user(["netpermctl", "--json", "wait", "--timeout", "20"]),
                                          stdin: .devNull, stdout: .appendFile(try makeTempDir() + "/wait"), stderr: .devNull)
        addTeardownBlock { waiter.killAndReap() }
        var notify: [Any] = []
        try waitUntil("the notification is shown", timeout: 10) {
            notify = try calls().last { $0["method"] as? String == "Notify" }?["args"] as? [Any] ?? []
            return (!notify.isEmpty, "\(try calls())")
        }
        XCTAssertEqual(notify[3] as? String, "Allow “npt-user-app” to use cellular data?", "\(notify)")
        XCTAssertTrue((notify[4] as? String)?.hasPrefix("npt-user-app (/usr/local/bin/netpermctl, run by ") == true, "\(notify)")
        XCTAssertTrue((notify[4] as? String)?.contains(") asks to use cellular data via wwan0") == true, "\(notify)")

        // The person clicks Allow: the unit's agent answers, for their uid; the app's wait ends.
        try server.click(1, "allow")
        XCTAssertEqual(waiter.wait(timeout: 10), 0, "the app's wait ends once the agent has answered")
        let decisions = try sd.check(["cat", "/var/lib/netpermd/decisions.conf"]).stdout
        XCTAssertTrue(decisions.contains("[User 4020 npt-user-app]\nWWAN=allow\n"), decisions)
        try waitUntil("the agent closes the notification") {
            let all = try calls()
            return (all.contains { $0["method"] as? String == "CloseNotification" }, "\(all)")
        }
        try waitUntil("the agent says what it answered") {
            let j = try journal()
            return (j.contains("npt-user-app: Allow (cellular data allowed, for ") && j.contains("'s own processes)"), j)
        }
        XCTAssertEqual(try agentState(), "active")
    }
}
