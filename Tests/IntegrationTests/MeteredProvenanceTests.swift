// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// metered_by end to end: the daemon reads systemd-networkd's lease files under its `--run` root, and reads a link's
/// facts again when the link's addresses change (a DHCP client writes its lease about when it adds the address).
final class MeteredProvenanceTests: IntegrationTestCase {
    func testAndroidMeteredLeaseMakesLinkMeteredByDHCP() throws {
        let ns = try makeNamespace()
        try ns.addVethPair("lan0", peer: "lan0p")
        let dir = try makeTempDir()
        let run = "\(dir)/run"
        let leases = "\(run)/systemd/netif/leases"
        try FileManager.default.createDirectory(atPath: leases, withIntermediateDirectories: true)
        let config = try writeConfig(in: dir)
        let socket = "\(dir)/netpermd.sock"
        _ = try startDaemon(in: ns, socket: socket, config: config, extraArgs: ["--run", run])

        let before = try waitForLinks(socket, "lan0 is listed") { $0[name: "lan0"] != nil }
        let lan0 = try XCTUnwrap(before[name: "lan0"])
        XCTAssertFalse(lan0.metered)
        XCTAssertEqual(lan0.meteredBy, "default")

        // What networkd 252 writes for a lease from an Android hotspot whose uplink is metered (option 43).
        let lease = """
            # This is private data. Do not parse.
            ADDRESS=10.9.0.1
            NETMASK=255.255.255.0
            ROUTER=10.9.0.2
            VENDOR_SPECIFIC=414e44524f49445f4d455445524544

            """
        try lease.write(toFile: "\(leases)/\(lan0.index)", atomically: true, encoding: .utf8)
        try ns.ip("addr", "add", "10.9.0.1/24", "dev", "lan0")
        let after = try waitForLinks(socket, "lan0 is metered by dhcp once its address is there") {
            $0[name: "lan0"].map { $0.metered && $0.meteredBy == "dhcp" } ?? false
        }
        XCTAssertEqual(after[name: "lan0"]?.kind, "other", "the kind does not change, only metered")
        // The peer has no lease: untouched.
        XCTAssertEqual(after[name: "lan0p"]?.meteredBy, "default")
    }
}
