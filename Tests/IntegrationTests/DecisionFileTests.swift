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
}
