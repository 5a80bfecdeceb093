// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `netpermctl agent` on a real terminal (tmux, a server of the test's own, read with capture-pane): one key answers
/// and the question says which keys; a prompt that expires is taken off the screen; a key that crosses the expiry is
/// refused by the daemon and stores nothing; an agent killed mid-question leaves the prompt open for the next.
extension PromptTests {
    func testTheTerminalAgentUnderTmux() throws {
        _ = try Repository.requireTool("tmux", package: "tmux")
        let s = try makeSetup(promptTimeout: 2)
        let socket = s.socket, asker = s.asker, dir = s.dir
        func stored() -> String { (try? String(contentsOfFile: s.decisionsFile, encoding: .utf8)) ?? "" }

        // A tmux server of the test's own (its socket in the test's directory), one wide window.
        let server = dir + "/tmux.sock"
        @discardableResult
        func tmux(_ args: [String]) throws -> CommandResult { try Subprocess.check(["tmux", "-S", server] + args) }
        addTeardownBlock { _ = try? Subprocess.run(["tmux", "-S", server, "kill-server"]) }
        // The agent runs under the pane's shell, not as the pane's own process: tmux continues a pane process that
        // stops, and the test stops the agent.
        func startAgent() throws -> pid_t {
            try tmux(["new-session", "-d", "-s", "agent", "-x", "200", "-y", "40", "\(netpermctl) --socket \(socket) agent; true"])
            let shell = try tmux(["display-message", "-p", "-t", "agent", "#{pane_pid}"]).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
            var child: pid_t?
            try waitUntil("the agent runs under the pane's shell") {
                child = ((try? readProcFile("/proc/\(shell)/task/\(shell)/children")) ?? "").split(separator: " ")
                    .first.flatMap { pid_t($0) }
                return (child.flatMap(procExecutable)?.hasSuffix("/netpermctl") == true, "shell \(shell), child \(child.map(String.init) ?? "-")")
            }
            return child!
        }
        func screen() throws -> String { try tmux(["capture-pane", "-p", "-t", "agent"]).stdout }
        func waitForScreen(_ what: String, timeout: Double = 5, _ ok: @escaping (String) -> Bool) throws {
            try waitUntil(what, timeout: timeout) {
                let s = try screen()
                return (ok(s), s)
            }
        }
        let keys = "  [y] Allow  [n] Wi-Fi only  [o] Allow once (until netpermd restarts or its policy changes)  [s] skip"

        var agent = try startAgent()
        try waitForScreen("the agent waits") { $0.contains("waiting for prompts") }
        let app = try runningAsker(s)

        // One key, no Enter: the question says which.
        XCTAssertEqual(try app.ask("QUERY")["reason"] as? String, "awaiting-decision")
        try waitForScreen("the question") { $0.contains(keys) }
        // Prompt ids are the daemon's own (not 1, 2, ...: they would tell users how many others were asked).
        func openID() throws -> Int {
            try XCTUnwrap((try self.request(socket, "PROMPTS")["prompts"] as? [[String: Any]])?.first?["id"] as? Int)
        }
        let first = try openID()
        XCTAssertTrue(try screen().contains("prompt \(first): asker (\(asker), run by root) asks to use cellular data via wwan0 (cellular, metered)."))
        try tmux(["send-keys", "-t", "agent", "y"])
        try waitForScreen("the answer") { $0.contains("asker: Allow (cellular data allowed, for everyone)") }
        let answered = try screen()
        XCTAssertFalse(answered.contains("asks to use"), "the question is taken off: \(answered)")
        XCTAssertTrue(stored().contains("[App asker]\nWWAN=allow\n"), stored())

        // Left unanswered: at its expiry the question goes, and the screen says nothing was stored.
        XCTAssertEqual(try ctl(["--socket", socket, "forget", "asker"]).stdout, "forgotten\n")
        XCTAssertEqual(try app.ask("QUERY")["reason"] as? String, "awaiting-decision")
        let second = try openID()
        try waitForScreen("the second question") { $0.contains("prompt \(second): asker") }
        try waitForScreen("the expiry", timeout: 6) { $0.contains("prompt \(second) for asker expired unanswered: nothing was stored") }
        let expired = try screen()
        XCTAssertFalse(expired.contains("prompt \(second): asker"), "the expired question is cleared: \(expired)")
        XCTAssertFalse(stored().contains("[App asker]"), stored())

        // A key that crosses the expiry (typed while the agent had not yet heard of it) is refused.
        XCTAssertEqual(try app.ask("QUERY")["reason"] as? String, "awaiting-decision")
        let third = try openID()
        try waitForScreen("the third question") { $0.contains("prompt \(third): asker") }
        Glibc.kill(agent, SIGSTOP)
        try waitUntil("prompt 3 expires", timeout: 6) {
            let open = try self.request(socket, "PROMPTS")["prompts"] as? [Any]
            return (open?.isEmpty == true, "\(open ?? [])")
        }
        try tmux(["send-keys", "-t", "agent", "y"])
        // tmux writes the key on its own time: it must be waiting on the agent's terminal before the agent goes on.
        let tty = open("/proc/\(agent)/fd/0", O_RDONLY | O_NONBLOCK | O_NOCTTY)
        XCTAssertGreaterThanOrEqual(tty, 0, "the agent's terminal")
        defer { close(tty) }
        try waitUntil("the key waits on the agent's terminal") {
            var pending: Int32 = 0
            return (ioctl(tty, UInt(FIONREAD), &pending) == 0 && pending > 0, "\(pending) bytes")
        }
        Glibc.kill(agent, SIGCONT)
        try waitForScreen("the refusal") { $0.contains("too late: prompt \(third) is not open: it expired") }
        XCTAssertFalse(stored().contains("[App asker]"), "a late key stores nothing: \(stored())")
        let refused = try screen()
        XCTAssertFalse(refused.contains("prompt \(third): asker"), refused)

        // Killed mid-question: the prompt stays open, and the next agent is asked it.
        XCTAssertEqual(try app.ask("QUERY")["reason"] as? String, "awaiting-decision")
        let fourth = try openID()
        try waitForScreen("the fourth question") { $0.contains("prompt \(fourth): asker") }
        Glibc.kill(agent, SIGKILL)
        try waitUntil("the agent is gone") { (Glibc.kill(agent, 0) != 0, "pid \(agent)") }
        let open = try request(socket, "PROMPTS")["prompts"] as? [[String: Any]]
        XCTAssertEqual(open?.compactMap { $0["id"] as? Int }, [fourth], "still pending: \(open ?? [])")
        _ = try? tmux(["kill-session", "-t", "agent"])
        agent = try startAgent()
        try waitForScreen("the next agent is asked it") { $0.contains("prompt \(fourth): asker") }
        try tmux(["send-keys", "-t", "agent", "n"])
        try waitForScreen("its answer") { $0.contains("asker: Wi-Fi only (cellular data denied, for everyone)") }
        XCTAssertTrue(stored().contains("[App asker]\nWWAN=deny\n"), stored())

        // A user's process asks: the admin's answer is that user's, unless they press e (issue 36, 7).
        XCTAssertEqual(try ctl(["--socket", socket, "forget", "asker"]).stdout, "forgotten\n")
        let nobodys = try HeldAsker(self, ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", asker, "-t", "60",
                                           "-", "UNIX-CONNECT:\(socket)"])
        XCTAssertEqual(try nobodys.ask("QUERY")["reason"] as? String, "awaiting-decision")
        let fifth = try openID()
        try waitForScreen("a user's question") { $0.contains("prompt \(fifth): asker") }
        let asked = try screen()
        XCTAssertTrue(asked.contains("Answers are for nobody's own processes"), asked)
        XCTAssertTrue(asked.contains("[e] Allow for everyone"), asked)
        try tmux(["send-keys", "-t", "agent", "y"])
        try waitForScreen("the answer for nobody") { $0.contains("asker: Allow (cellular data allowed, for nobody's own processes)") }
        XCTAssertTrue(stored().contains("[User 65534 asker]\nWWAN=allow\n"), stored())
        XCTAssertFalse(stored().contains("[App asker]"), "not for everyone: \(stored())")
        XCTAssertEqual(try app.ask("QUERY")["reason"] as? String, "awaiting-decision", "root's asker is still asked")
        let sixth = try openID()
        try waitForScreen("root's question") { $0.contains("prompt \(sixth): asker") }
        XCTAssertFalse(try screen().components(separatedBy: "prompt \(sixth)").last!.contains("[e]"), "root's is everyone's already")
        try tmux(["send-keys", "-t", "agent", "e"])
        try waitForScreen("e is not offered for it") { $0.contains("press y, n, o or s.") }
    }
}
