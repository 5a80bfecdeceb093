import Foundation
import XCTest

/// netpermctl as a user runs it: exit codes, human output, --json.
final class NetpermctlTests: IntegrationTestCase {
    func testExitsThreeWhenNoDaemonRuns() throws {
        let dir = try makeTempDir()
        let missing = "\(dir)/missing.sock"
        for args in [["status"], ["links"], ["ping"], ["--json", "status"]] {
            let r = try ctl(["--socket", missing] + args)
            XCTAssertEqual(r.status, 3, "netpermctl \(args) without a daemon: \(r.summary)")
            XCTAssertEqual(r.stdout, "", "nothing on stdout: \(r.summary)")
            XCTAssertTrue(r.stderr.contains("cannot reach netpermd at \(missing)"), r.summary)
            XCTAssertTrue(r.stderr.contains("is the daemon running?"), r.summary)
        }

        // A socket file with nobody behind it is no better.
        let stalePath = "\(dir)/stale.sock"
        let stale = try BoundUnlistenedSocket(path: stalePath)
        addTeardownBlock { stale.close() }
        let r = try ctl(["--socket", stalePath, "status"])
        XCTAssertEqual(r.status, 3, r.summary)
        XCTAssertTrue(r.stderr.contains("cannot reach netpermd at \(stalePath)"), r.summary)
    }

    func testStatusHumanOutput() throws {
        let f = try makeFixture()
        let s = try status(f.socket)
        let before = try ctl(["--socket", f.socket, "status"])
        XCTAssertEqual(before.status, 0, before.summary)
        XCTAssertEqual(before.stderr, "")
        for line in ["version:   \(s.version)", "ready:     yes", "links:     \(s.links)", "network:   unavailable",
                     "primary:   -"] {
            XCTAssertTrue(before.lines.contains(line), "expected the line '\(line)' in:\n\(before.stdout)")
        }

        try f.ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        try f.ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0", "metric", "200")
        try waitForStatus(f.socket, "wwan0 is primary") { $0.primary == "wwan0" }
        let after = try ctl(["--socket", f.socket, "status"])
        XCTAssertEqual(after.status, 0, after.summary)
        for line in ["network:   available", "primary:   wwan0 (wwan)"] {
            XCTAssertTrue(after.lines.contains(line), "expected the line '\(line)' in:\n\(after.stdout)")
        }
    }

    func testLinksHumanOutputShowsEveryLink() throws {
        let f = try makeFixture()
        try f.ns.ip("addr", "add", "10.1.0.1/24", "dev", "wlan0")
        try f.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "100")
        let links = try waitForLinks(f.socket, "wlan0 usable, every link with carrier") { l in
            l[name: "wlan0"]?.usable == true && ["wlan0p", "wwan0", "wwan0p"].allSatisfy { l[name: $0]?.carrier == true }
        }
        let r = try ctl(["--socket", f.socket, "links"])
        XCTAssertEqual(r.status, 0, r.summary)
        let rows = r.lines
        let header = ["IDX", "NAME", "KIND", "METERED", "ADMIN", "CARRIER", "OPER", "DEFAULT", "METRIC", "USABLE",
                      "ADDRESSES", "CLASSIFIED", "BY"]
        XCTAssertEqual(rows.first?.split(separator: " ").map(String.init), header, r.stdout)
        XCTAssertEqual(rows.count, links.count + 1, "a header and one row per link:\n\(r.stdout)")
        for l in links {
            // Every column but the last is one word; CLASSIFIED BY may contain spaces.
            guard let row = rows.dropFirst().first(where: { $0.split(separator: " ").dropFirst().first == Substring(l.name) }) else {
                XCTFail("no row for \(l.name):\n\(r.stdout)")
                continue
            }
            let cells = row.split(separator: " ", maxSplits: 11, omittingEmptySubsequences: true)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            let expected = [
                String(l.index), l.name, l.kind, l.metered ? "yes" : "no", l.adminUp ? "up" : "down",
                l.carrier ? "on" : "off", l.operstate, l.defaultRouteV4 ? "v4" : "-",
                l.metric.map(String.init) ?? "-", l.usable ? "yes" : "no",
                l.addresses.isEmpty ? "-" : l.addresses.joined(separator: ","), l.classifiedBy,
            ]
            XCTAssertEqual(cells, expected, "row for \(l.name): '\(row)'")
        }
        XCTAssertTrue(rows.contains { $0.contains("wlan0") && $0.contains("wifi") && $0.contains("10.1.0.1/24")
            && $0.hasSuffix("config:[Interface wlan0]") }, r.stdout)
    }

    func testJsonPrintsTheDaemonsReply() throws {
        let f = try makeFixture()
        try waitForLinks(f.socket, "every veth has carrier") { l in
            ["wlan0", "wlan0p", "wwan0", "wwan0p"].allSatisfy { l[name: $0]?.carrier == true }
        }
        for (command, verb) in [("status", "STATUS"), ("links", "LINKS"), ("ping", "PING")] {
            let direct = try socat(f.socket, [verb])
            let r = try ctl(["--socket", f.socket, "--json", command])
            XCTAssertEqual(r.status, 0, r.summary)
            XCTAssertEqual(r.stdout, direct.joined(separator: "\n") + "\n",
                           "netpermctl --json \(command) prints the daemon's reply line as it is")
        }
        let ping = try ctl(["--socket", f.socket, "ping"])
        XCTAssertEqual(ping.status, 0, ping.summary)
        XCTAssertEqual(ping.stdout, "pong\n")
    }
}
