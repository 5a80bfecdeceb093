// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// A burst of link changes must end with the daemon's view equal to the kernel's, also when the netlink
/// socket overruns and the daemon has to read everything again.
final class BurstTests: IntegrationTestCase {
    /// 500 toggles (wlan0p and wwan0 take turns, each going down, up, down, ... 250 times), then both set down:
    /// the end state differs from the start (all up), so a daemon that missed the end of the burst cannot pass.
    static let burst: [String] = (0..<500).map { i in
        let link = i % 2 == 0 ? "wlan0p" : "wwan0"
        return "link set \(link) \((i / 2) % 2 == 0 ? "down" : "up")"
    } + ["link set wlan0p down", "link set wwan0 down"]

    private func runBurst(extraArgs: [String], subscribe: Bool = false) throws -> Fixture {
        XCTAssertEqual(Self.burst.last, "link set wwan0 down")
        XCTAssertEqual(Self.burst[Self.burst.count - 2], "link set wlan0p down")
        let f = try makeFixture(extraArgs: extraArgs)
        // A default route through wwan0: the kernel flushes it, silently, when wwan0 goes down.
        try f.ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        try f.ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0", "metric", "200")
        try waitForLinks(f.socket, "every link up with carrier and wwan0 usable before the burst") { links in
            ["wlan0", "wlan0p", "wwan0", "wwan0p"].allSatisfy { links[name: $0]?.carrier == true }
                && links[name: "wwan0"]?.usable == true
        }

        if subscribe {
            subscriber = try EvChannel.connect(f.socket, name: "subscriber")
            try subscriber!.send("SUBSCRIBE links\n")
            _ = try subscriber!.readLine(timeout: 5)
            for (name, terse) in [("monitor", false), ("monitor -t", true)] {
                let m = try EvPipedCommand([netpermctl, "--socket", f.socket] + (terse ? ["-t"] : []) + ["monitor"],
                                           stderrPath: "\(f.dir)/\(name).err", name: name)
                addTeardownBlock { m.stop() }
                monitors.append(m)
                // Its snapshot is out once it has printed something.
                _ = try m.channel.readLine(timeout: 5)
            }
        }
        try f.ns.batch(Self.burst, scratchDir: f.dir)

        let expected: [String: (admin: Bool, carrier: Bool)] = [
            "wlan0": (true, false), "wlan0p": (false, false), "wwan0": (false, false), "wwan0p": (true, false),
        ]
        var lastDiff = ""
        try waitUntil("the daemon's links equal `ip -j link` after the burst", timeout: 10) {
            let before = try f.ns.kernelLinks()
            let daemon = try links(f.socket)
            let after = try f.ns.kernelLinks()
            let routes = try f.ns.kernelDefaultRoutes()
            // Compare only while the kernel held still across the LINKS request.
            let view = daemon.map(\.kernelView).sorted { $0.name < $1.name }
            let daemonRoutes = Dictionary(uniqueKeysWithValues: daemon.compactMap { l in l.metric.map { (l.name, $0) } })
            let settled = expected.allSatisfy { name, e in
                before.first { $0.name == name }.map { $0.adminUp == e.admin && $0.carrier == e.carrier } ?? false
            }
            lastDiff = "kernel: \(after)\ndaemon: \(view)\nkernel default routes: \(routes)\n"
                + "daemon default routes: \(daemonRoutes)\nkernel settled in the expected end state: \(settled)"
            return (settled && before == after && view == after && daemonRoutes == routes, lastDiff)
        }
        // Nothing left over: the final states are what the burst's last lines say.
        let final = try links(f.socket)
        XCTAssertEqual(final[name: "wwan0"]?.metric, nil, "wwan0's route went with admin down")
        XCTAssertEqual(final[name: "wlan0p"]?.operstate, "down")
        XCTAssertEqual(final[name: "wlan0"]?.operstate, "lowerlayerdown")
        let status = try status(f.socket)
        XCTAssertFalse(status.available, "\(status)")
        XCTAssertEqual(status.links, try f.ns.kernelLinks().count)
        return f
    }

    func testBurstOfToggles() throws {
        _ = try runBurst(extraArgs: [])
    }

    func testBurstOfTogglesWithOverrunNetlinkSocket() throws {
        let f = try runBurst(extraArgs: ["--netlink-rcvbuf", "4096"], subscribe: true)
        // The point of the tiny buffer: the kernel did drop events and the daemon noticed.
        XCTAssertTrue(f.daemon.log.contains("reading everything again"),
                      "expected an overrun (ENOBUFS) and a resync with --netlink-rcvbuf 4096")
        // And said so to its subscriber: a resync with the whole picture, after which the subscriber's view (the
        // last resync, then the link events after it) is the daemon's.
        let sub = try XCTUnwrap(subscriber)
        try sub.send("PING\n")
        var view: [String: [String: Any]] = [:]
        var resyncs = 0
        while let line = try sub.readLine(timeout: 5), !line.contains("\"pong\"") {
            let o = try JSONValue.object(line)
            switch o["event"] as? String {
            case "snapshot"?, "resync"?:
                if o["event"] as? String == "resync" {
                    resyncs += 1
                    XCTAssertEqual(o["why"] as? String, "netlink-overrun")
                }
                view = [:]
                for l in o["links"] as? [[String: Any]] ?? [] { view[l["name"] as? String ?? ""] = l }
            case "link"?:
                let l = o["link"] as? [String: Any] ?? [:]
                view[l["name"] as? String ?? ""] = o["change"] as? String == "removed" ? nil : l
            default:
                break
            }
        }
        XCTAssertGreaterThan(resyncs, 0, "the subscriber was told it missed something")
        // netpermctl monitor says so too, in its two forms.
        for (m, expected) in zip(monitors, ["resync: netpermd lost kernel messages", ":resync:netlink-overrun"]) {
            var seen: [String] = []
            while let line = try m.channel.readLine(timeout: 5) {
                seen.append(line)
                if line.contains(expected) { break }
            }
            XCTAssertTrue(seen.contains { $0.contains(expected) }, "\(m.channel): \(seen.suffix(5))")
        }
        let daemon = try links(f.socket)
        for l in daemon {
            XCTAssertEqual(view[l.name]?["carrier"] as? Bool, l.carrier, "\(l.name) in the subscriber's view")
            XCTAssertEqual(view[l.name]?["admin_up"] as? Bool, l.adminUp, "\(l.name) in the subscriber's view")
        }
    }

    /// Subscribed to links before the burst (runBurst with `subscribe`), and `netpermctl monitor` and `-t monitor`.
    private var subscriber: EvChannel?
    private var monitors: [EvPipedCommand] = []
}
