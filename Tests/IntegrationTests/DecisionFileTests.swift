// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// A corrupt decisions file never keeps the daemon from starting: it is moved aside with a logged error and the
/// daemon starts with no decisions.
final class DecisionFileTests: IntegrationTestCase {
    func testCorruptDecisionsFileIsMovedAsideAndTheDaemonStarts() throws {
        let ns = try makeNamespace()
        try ns.addVethPair("wwan0", peer: "wwan0p")
        let dir = try makeTempDir()
        let config = try writeConfig(IntegrationTestCase.standardConfig + "\n[App asker]\nUser=4242\nWWAN=ask\n", in: dir)
        let state = dir + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let corrupt = "[App asker]\nWWAN=allow\nthis line is not INI\n"
        try corrupt.write(toFile: state + "/decisions.conf", atomically: true, encoding: .utf8)

        let socket = dir + "/netpermd.sock"
        let daemon = try startDaemon(in: ns, socket: socket, config: config)

        // Started with no decisions: the corrupt file's WWAN=allow is not in force (undecided, and with no agent
        // to ask, a deny).
        let q = try request(socket, "QUERY asker")
        XCTAssertEqual((q["permissions"] as? [String: Any])?["wwan"] as? String, "deny", "\(q)")
        XCTAssertEqual((q["sources"] as? [String: Any])?["wwan"] as? String, "no-agent", "\(q)")

        // Moved aside, whole, and the log says so with the reason.
        let names = try FileManager.default.contentsOfDirectory(atPath: state)
        let aside = names.filter { $0.hasPrefix("decisions.conf.corrupt-") }
        XCTAssertEqual(aside.count, 1, "files in the state dir: \(names)")
        XCTAssertFalse(names.contains("decisions.conf"), "the corrupt file is still in place: \(names)")
        if let a = aside.first {
            XCTAssertEqual(try String(contentsOfFile: state + "/" + a, encoding: .utf8), corrupt)
        }
        XCTAssertTrue(daemon.logTail.contains("decisions file is unusable"), daemon.logTail)
        XCTAssertTrue(daemon.logTail.contains("decisions.conf:3"), "the error names the line: \(daemon.logTail)")

        // A new decision is stored in a fresh file.
        XCTAssertEqual(try request(socket, "DECIDE asker wwan deny")["ok"] as? Bool, true)
        let stored = try String(contentsOfFile: state + "/decisions.conf", encoding: .utf8)
        XCTAssertTrue(stored.contains("[App asker]\nWWAN=deny\n"), stored)
    }

    /// Issue 22, point 13: in a 10-minute soak one QUERY took 3,583 ms. The loop was writing the decisions file: a
    /// DECIDE's write and fsync ran on it, and under another process's heavy writes one fsync took 1.1-1.4 s in a
    /// bounded soak here (bench `soak`). The write runs on a thread of its own now: with the state directory's
    /// file system frozen (fsfreeze), a DECIDE waits for it and its reply says ok only once it is on disk, while
    /// everyone else is answered at once.
    func testWritingTheDecisionsHoldsNoOneElseUp() throws {
        let ns = try makeNamespace()
        try ns.addVethPair("wwan0", peer: "wwan0p")
        let dir = try makeTempDir()
        let config = try writeConfig(IntegrationTestCase.standardConfig + "\n[App asker]\nUser=4242\nWWAN=ask\n", in: dir)
        // The state directory is a small ext4 of its own, mounted in the daemon's mount namespace only (`ip netns
        // exec` gives it one): it goes with the daemon, and only it can be frozen.
        let image = dir + "/state.img", state = dir + "/state"
        try Subprocess.check(["truncate", "-s", "16M", image])
        try Subprocess.check(["mkfs.ext4", "-q", "-F", image])
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let socket = dir + "/netpermd.sock"
        let daemon = try startDaemon(in: ns, socket: socket, config: config,
                                     wrapper: ["sh", "-c", "mount -o loop \(image) \(state) && exec \"$@\"", "sh"])
        let inDaemon = ["nsenter", "--mount=/proc/\(daemon.pid)/ns/mnt"]
        XCTAssertTrue(try Subprocess.run(inDaemon + ["findmnt", "-n", state]).stdout.contains("ext4"), "mounted")
        // Thawed before the daemon is stopped (teardown blocks run last first): a frozen write never ends.
        addTeardownBlock { _ = try? Subprocess.run(inDaemon + ["fsfreeze", "--unfreeze", state]) }
        XCTAssertEqual(try request(socket, "DECIDE asker wwan deny")["ok"] as? Bool, true)

        try Subprocess.check(inDaemon + ["fsfreeze", "--freeze", state])
        let decider = try EvChannel.connect(socket, name: "decider")
        defer { decider.close() }
        try decider.send("DECIDE asker wwan allow\n")
        // Everyone else is answered meanwhile, however long the write waits.
        let other = try EvChannel.connect(socket, name: "other")
        defer { other.close() }
        for _ in 0..<3 {
            let t = monotonicNow()
            let q = try other.request("QUERY asker", timeout: 2)
            XCTAssertLessThan(monotonicNow() - t, 0.5, "answered while the decisions are being written")
            XCTAssertEqual((q["sources"] as? [String: Any])?["wwan"] as? String, "decision", "the old decision holds: \(q)")
            XCTAssertEqual((q["permissions"] as? [String: Any])?["wwan"] as? String, "deny", "\(q)")
            usleep(200_000)
        }
        XCTAssertNil(try? decider.readLine(timeout: 0.2), "no reply before the decision is on disk")
        try Subprocess.check(inDaemon + ["fsfreeze", "--unfreeze", state])
        let reply = try XCTUnwrap(try decider.readLine(timeout: 5), "the reply once written")
        XCTAssertEqual(try JSONValue.bool(JSONValue.object(reply), "ok"), true, reply)
        let q = try other.request("QUERY asker")
        XCTAssertEqual((q["permissions"] as? [String: Any])?["wwan"] as? String, "allow", "\(q)")
        let stored = try Subprocess.run(inDaemon + ["cat", state + "/decisions.conf"]).stdout
        XCTAssertTrue(stored.contains("[App asker]\nWWAN=allow\n"), stored)
    }
}
