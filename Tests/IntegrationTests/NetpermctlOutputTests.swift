import Foundation
import XCTest

/// netpermctl's output formats: the links table and one link in detail.
extension NetpermctlTests {
    func testLinksTableFitsAHundredColumns() throws {
        let f = try makeFixture()
        // The longest name the kernel allows (IFNAMSIZ - 1), as USB Ethernet adapters get, with four addresses.
        let long = "enx00e04c680001"
        try f.ns.addVethPair(long, peer: "enxpeer")
        let addresses = ["192.168.100.200/24", "192.168.101.200/24", "10.200.30.40/16", "172.31.254.254/12"]
        for a in addresses { try f.ns.ip("addr", "add", a, "dev", long) }
        try f.ns.ip("route", "add", "default", "via", "192.168.100.1", "dev", long, "metric", "20600")
        try f.ns.ip("addr", "add", "10.1.0.1/24", "dev", "wlan0")
        try f.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "600")
        try waitForLinks(f.socket, "\(long) usable with its addresses, wlan0 usable") { l in
            l[name: long]?.usable == true && l[name: long]?.addresses.count == 4 && l[name: "wlan0"]?.usable == true
        }
        let r = try ctl(["--socket", f.socket, "links"])
        XCTAssertEqual(r.status, 0, r.summary)
        for line in r.lines {
            XCTAssertLessThanOrEqual(line.count, 100, "a line wider than 100 columns:\n\(r.stdout)")
        }
        let row = try XCTUnwrap(r.lines.first { $0.split(separator: " ").dropFirst().first == Substring(long) },
                                r.stdout)
        let cells = row.split(separator: " ").map(String.init)
        XCTAssertEqual(Array(cells.suffix(6)), ["routable", "v4", "20600", "yes"] + [cells.suffix(2).first!, "+3"], row)
        XCTAssertTrue(addresses.contains(cells[cells.count - 2]), "the first address is one of the link's: \(row)")
        XCTAssertEqual(cells.count, 10, row)
    }

    func testLinksIfaceShowsOneLinkInDetail() throws {
        let f = try makeFixture()
        try f.ns.ip("addr", "add", "10.1.0.1/24", "dev", "wlan0")
        try f.ns.ip("addr", "add", "10.1.1.1/24", "dev", "wlan0")
        try f.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "100")
        let links = try waitForLinks(f.socket, "wlan0 usable with two addresses") { l in
            l[name: "wlan0"]?.usable == true && l[name: "wlan0"]?.addresses.count == 2
        }
        let wlan0 = try XCTUnwrap(links[name: "wlan0"])
        let r = try ctl(["--socket", f.socket, "links", "wlan0"])
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.lines, [
            "\(wlan0.index): wlan0",
            "kind:          wifi (classified by config:[Interface wlan0])",
            "metered:       no",
            "state:         routable",
            "admin:         up",
            "carrier:       on",
            "operstate:     up",
            "addresses:     \(wlan0.addresses[0])",
            "               \(wlan0.addresses[1])",
            "default route: ipv4 yes, ipv6 no, metric 100",
            "usable:        yes",
        ], r.stdout)
        XCTAssertEqual(Set(wlan0.addresses), ["10.1.0.1/24", "10.1.1.1/24"])

        // Not usable, and why: its peer is down, so no carrier; and it has no default route.
        try f.ns.ip("link", "set", "wwan0p", "down")
        let afterDown = try waitForLinks(f.socket, "wwan0 without carrier") { $0[name: "wwan0"]?.carrier == false }
        let wwan0 = try XCTUnwrap(afterDown[name: "wwan0"])
        let down = try ctl(["--socket", f.socket, "links", "wwan0"])
        XCTAssertEqual(down.status, 0, down.summary)
        for line in ["state:         no-carrier", "carrier:       off", "addresses:     -",
                     "default route: ipv4 no, ipv6 no", "usable:        no (no carrier, no default route)"] {
            XCTAssertTrue(down.lines.contains(line), "expected '\(line)' in:\n\(down.stdout)")
        }
        XCTAssertEqual(down.lines.first, "\(wwan0.index): wwan0", down.stdout)

        // Admin down comes first among the reasons.
        try f.ns.ip("link", "set", "wwan0", "down")
        try waitForLinks(f.socket, "wwan0 admin down") { $0[name: "wwan0"]?.adminUp == false }
        let off = try ctl(["--socket", f.socket, "links", "wwan0"])
        XCTAssertTrue(off.lines.contains("state:         off"), off.stdout)
        XCTAssertTrue(off.lines.contains("usable:        no (admin down, no carrier, no default route)"), off.stdout)

        // --json: the daemon's object for that link.
        let json = try ctl(["--socket", f.socket, "--json", "links", "wlan0"])
        XCTAssertEqual(json.status, 0, json.summary)
        let o = try JSONValue.object(try XCTUnwrap(json.lines.first))
        XCTAssertEqual(try DaemonLink(o).description, wlan0.description, json.stdout)
        XCTAssertEqual(json.lines.count, 1, json.stdout)

        // A name the daemon does not know is an error, decided here from LINKS.
        for args in [["links", "nosuch0"], ["--json", "links", "nosuch0"]] {
            let missing = try ctl(["--socket", f.socket] + args)
            XCTAssertEqual(missing.status, 1, missing.summary)
            XCTAssertEqual(missing.stdout, "", missing.summary)
            XCTAssertEqual(missing.stderr, "netpermctl: no link named 'nosuch0'\n", missing.summary)
        }
    }
}
