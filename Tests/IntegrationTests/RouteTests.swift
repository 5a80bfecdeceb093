// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// Default routes make links usable; the usable link with the lowest metric is the primary one.
final class RouteTests: IntegrationTestCase {
    private func expect(_ f: Fixture, _ what: String, available: Bool, primary: String?, kind: String?,
                        usable: [String: Bool], metric: [String: Int?]) throws {
        try waitForStatus(f.socket, "\(what): available \(available), primary \(primary ?? "null")") {
            $0.available == available && $0.primary == primary && $0.primaryKind == kind
        }
        try waitForLinks(f.socket, "\(what): usable \(usable), metric \(metric)") { links in
            usable.allSatisfy { links[name: $0.key]?.usable == $0.value }
                && metric.allSatisfy { name, m in links[name: name].map { $0.metric == m } ?? false }
        }
        // netpermctl agrees, in its own words.
        let r = try ctl(["--socket", f.socket, "status"])
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertTrue(r.lines.contains("network:   \(available ? "available" : "unavailable")"), "\(what): \(r.summary)")
        XCTAssertTrue(r.lines.contains("primary:   \(primary.map { "\($0) (\(kind ?? "?"))" } ?? "-")"),
                      "\(what): \(r.summary)")
    }

    func testDefaultRoutesDriveUsableAvailableAndPrimary() throws {
        let f = try makeFixture()
        try f.ns.ip("addr", "add", "10.1.0.1/24", "dev", "wlan0")
        try f.ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        try expect(f, "addresses but no default route", available: false, primary: nil, kind: nil,
                   usable: ["wlan0": false, "wwan0": false], metric: ["wlan0": nil, "wwan0": nil])

        try f.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "100")
        try expect(f, "default via wlan0", available: true, primary: "wlan0", kind: "wifi",
                   usable: ["wlan0": true, "wwan0": false], metric: ["wlan0": 100, "wwan0": nil])
        let l = try links(f.socket)
        XCTAssertEqual(l[name: "wlan0"]?.defaultRouteV4, true)
        XCTAssertEqual(l[name: "wlan0"]?.addresses, ["10.1.0.1/24"])
        XCTAssertEqual(l[name: "lo"]?.usable, false)

        try f.ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0", "metric", "200")
        try expect(f, "wwan0 too, with a higher metric", available: true, primary: "wlan0", kind: "wifi",
                   usable: ["wlan0": true, "wwan0": true], metric: ["wlan0": 100, "wwan0": 200])

        try f.ns.ip("route", "del", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "100")
        try expect(f, "wlan0's route deleted", available: true, primary: "wwan0", kind: "wwan",
                   usable: ["wlan0": false, "wwan0": true], metric: ["wlan0": nil, "wwan0": 200])

        // Lowest metric wins, not the first link or the oldest route.
        try f.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "300")
        try expect(f, "wlan0 back with metric 300", available: true, primary: "wwan0", kind: "wwan",
                   usable: ["wlan0": true, "wwan0": true], metric: ["wlan0": 300, "wwan0": 200])

        try f.ns.ip("route", "del", "default", "via", "10.2.0.2", "dev", "wwan0", "metric", "200")
        try expect(f, "wwan0's route deleted", available: true, primary: "wlan0", kind: "wifi",
                   usable: ["wlan0": true, "wwan0": false], metric: ["wlan0": 300, "wwan0": nil])

        try f.ns.ip("route", "del", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "300")
        try expect(f, "no default route left", available: false, primary: nil, kind: nil,
                   usable: ["wlan0": false, "wwan0": false], metric: ["wlan0": nil, "wwan0": nil])
    }

    /// The kernel drops a link's IPv4 routes when it goes admin down without telling route listeners.
    func testAdminDownDropsTheDefaultRoute() throws {
        let f = try makeFixture()
        try f.ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        try f.ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0", "metric", "200")
        try expect(f, "default via wwan0", available: true, primary: "wwan0", kind: "wwan",
                   usable: ["wwan0": true], metric: ["wwan0": 200])

        try f.ns.ip("link", "set", "wwan0", "down")
        XCTAssertEqual(try f.ns.kernelDefaultRoutes(), [:], "the kernel flushed the route")
        try expect(f, "wwan0 admin down", available: false, primary: nil, kind: nil,
                   usable: ["wwan0": false], metric: ["wwan0": nil])

        try f.ns.ip("link", "set", "wwan0", "up")
        let up = try waitForLinks(f.socket, "wwan0 admin up with carrier") {
            $0[name: "wwan0"]?.adminUp == true && $0[name: "wwan0"]?.carrier == true
        }
        XCTAssertNil(up[name: "wwan0"]?.metric, "the route does not come back by itself: \(up)")
        XCTAssertEqual(up[name: "wwan0"]?.usable, false)
    }
}
