// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The membership reports (IGMPv3, MLDv2) the kernel sends for an app's multicast joins (issue 22, point 5): they
/// carry group and source addresses the app chose, out of the link it joined on, from no socket of the app's (a
/// timer sends them once setsockopt() has returned), so no rule can tell whose they are. Judged by sniffers on the
/// far ends of wwan0 and wifi0: none of a denied app's reports leaves a wwan link, in block and in steer mode, and on
/// the other kinds they still do ("What escapes" in docs/ENFORCEMENT.md).
final class MembershipReportTests: IntegrationTestCase {
    /// Joins groups as the policy's denied app would: on wwan0 by index, by its address (IPv4 source-specific), and
    /// naming no link (the kernel takes the main table's route: wwan0 for IPv4, the first `ff00::/8` route for
    /// IPv6), any-source and source-specific, IPv4 and IPv6; and on wifi0 by index. Prints each join's outcome, then
    /// "LINK HEX" for each address it chose (groups and sources, as a report carries them), then holds the
    /// memberships until it is killed.
    static let joins = """
        import socket, struct, sys, time
        wwan, wifi = socket.if_nametoindex("wwan0"), socket.if_nametoindex("wifi0")
        chosen, said = [], []
        def a4(s): return socket.inet_aton(s)
        def a6(s): return socket.inet_pton(socket.AF_INET6, s)
        def storage(fam, packed):
            b = struct.pack("<HH4s", fam, 0, packed) if fam == socket.AF_INET else struct.pack("<HHI16sI", fam, 0, 0, packed, 0)
            return b + bytes(128 - len(b))
        def join(what, link, sock, level, name, value, *addrs):
            try:
                sock.setsockopt(level, name, value); said.append(what + " ok")
            except OSError as e:
                said.append("%s %s" % (what, e.strerror))
            chosen.extend("%s %s" % (link, a.hex()) for a in addrs)
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        MCAST_JOIN_GROUP, MCAST_JOIN_SOURCE_GROUP, IP_ADD_SOURCE_MEMBERSHIP = 42, 46, 39
        g = a4("239.1.2.3")
        join("v4-index", "wwan", u, socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, g + bytes(4) + struct.pack("i", wwan), g)
        g, src = a4("239.4.5.6"), a4("10.20.30.40")
        join("v4-source", "wwan", u, socket.IPPROTO_IP, IP_ADD_SOURCE_MEMBERSHIP, g + a4("10.71.0.1") + src, g, src)
        g = a4("239.7.7.7")
        join("v4-route", "wwan", u, socket.IPPROTO_IP, MCAST_JOIN_GROUP, struct.pack("I4x", 0) + storage(socket.AF_INET, g), g)
        g = a6("ff15::dead:beef")
        join("v6-index", "wwan", s, socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, g + struct.pack("i", wwan), g)
        g, src = a6("ff35::1234"), a6("2001:db8::c0ff:ee")
        join("v6-source", "wwan", s, socket.IPPROTO_IPV6, MCAST_JOIN_SOURCE_GROUP,
             struct.pack("I4x", wwan) + storage(socket.AF_INET6, g) + storage(socket.AF_INET6, src), g, src)
        g = a6("ff15::77")
        join("v6-route", "any", s, socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, g + struct.pack("i", 0), g)
        g = a4("239.10.10.10")
        join("wifi-v4", "wifi", u, socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, g + bytes(4) + struct.pack("i", wifi), g)
        g = a6("ff15::aaaa")
        join("wifi-v6", "wifi", s, socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, g + struct.pack("i", wifi), g)
        print(" ".join(said))
        print("\\n".join(chosen), flush=True)
        time.sleep(60)
        """

    /// An app denied WWAN and Wi-Fi joins groups on both, in `Mode=block` and `Mode=steer`: every join succeeds (it
    /// sees nothing), the IPv4 join that names no link is on wwan0 (the main table's route, steering or not), no
    /// report naming any of its addresses (nor any other report) reaches wwan0's far end, and on wifi0, whose
    /// reports are not dropped, they do. Once the app is allowed WWAN, its reports leave wwan0 again. Before, all of
    /// them reached wwan0's far end while it was denied.
    func testNoMembershipReportOfADeniedAppLeavesAWwanLink() throws {
        for mode in ["block", "steer"] {
            let dir = try makeTempDir(), socket = dir + "/netpermd.sock"
            let bed = try EnforcementBed(self)
            try bed.addLink("wwan0", subnet: 71)
            try bed.addLink("wifi0", subnet: 72)
            try bed.ns.ip("route", "add", "default", "via", "10.71.0.2", "dev", "wwan0")
            // MLD reports leave from the link-local address (or ::, while it is tentative).
            func sources(_ link: String, _ v4: String) throws -> [String] {
                let ll = try bed.ns.ip("-6", "-o", "addr", "show", "dev", link, "scope", "link").stdout
                    .split(separator: " ").first { $0.hasPrefix("fe80:") }.map { String($0.prefix { $0 != "/" }) }
                return [v4, "::"] + (ll.map { [$0] } ?? [])
            }
            let wwan = try Sniffer(self, in: bed.peer, interface: "p71", sources: try sources("wwan0", "10.71.0.1"), dir: dir)
            let wifi = try Sniffer(self, in: bed.peer, interface: "p72", sources: try sources("wifi0", "10.72.0.1"), dir: dir)
            func policy(wwan: String) -> String {
                "[Enforcement]\nMode=\(mode)\n\n[Interface wwan*]\nKind=wwan\n\n[Interface wifi*]\nKind=wifi\n\n"
                    + "[App denied]\nUser=4012\nWWAN=\(wwan)\nWiFi=deny\n"
            }
            _ = try startDaemon(in: bed.ns, socket: socket, config: try writeConfig(policy(wwan: "deny"), in: dir), nsenter: true)
            try waitForEnforcing(socket, "\(mode): the rules are in force")
            let enforced = monotonicNow()

            /// The app's joins, as uid 4012: what it said, once it has joined.
            func join(_ out: String) throws -> (ChildProcess, [String]) {
                let p = try Subprocess.spawn(["nsenter", "--net=/run/netns/\(bed.ns.name)", "setpriv", "--reuid", "4012",
                                              "--regid", "4012", "--clear-groups", EnforcementBed.python, "-c", Self.joins],
                                             stdin: .devNull, stdout: .appendFile(out), stderr: .appendFile(out))
                addTeardownBlock { p.killAndReap() }
                var lines: [String] = []
                try waitUntil("\(mode): the app has joined") {
                    lines = ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
                    return (lines.count == 11, lines.joined(separator: " / "))
                }
                return (p, lines)
            }
            let (app, lines) = try join(dir + "/joins.out")
            XCTAssertEqual(lines[0], "v4-index ok v4-source ok v4-route ok v6-index ok v6-source ok v6-route ok wifi-v4 ok "
                           + "wifi-v6 ok", "\(mode): the app is told nothing")
            let chosen = lines.dropFirst().map { $0.split(separator: " ").map(String.init) }
            // /proc/net/igmp: a line per link ("3\twwan0 : ..."), then its groups in host order (239.7.7.7: 070707EF).
            let igmp = try Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)", "cat", "/proc/net/igmp"]).stdout
            var link = "", routed = ""
            for line in igmp.split(separator: "\n") {
                let f = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                if !line.hasPrefix("\t"), f.count > 1 { link = String(f[1]) }
                if f.first == "070707EF" { routed = link }
            }
            XCTAssertEqual(routed, "wwan0", "\(mode): the IPv4 join naming no link takes the main table's route: \(igmp)")

            // The wifi0 reports were sent after wwan0's; root's datagram after them: everything before it was judged.
            try waitUntil("\(mode): wifi0's far end sees the app's reports") {
                let seen = wifi.packets.map(\.message).joined(separator: " ")
                return (chosen.filter { $0[0] == "wifi" }.allSatisfy { seen.contains($0[1]) }, seen)
            }
            try wwan.flush(self, bed.ns, to: "10.71.0.2", port: 9998)
            let leaked = wwan.packets.filter { p in chosen.contains { p.message.contains($0[1]) } }
            XCTAssertEqual(leaked.map(\.description), [], "\(mode): reports naming the app's addresses on wwan0's far end")
            // IGMP, or MLD's listener report (131), done (132) and v2 report (143): the kernel's own too, once in force.
            let reports = wwan.packets.filter {
                $0.time > enforced && ($0.proto == 2 || $0.proto == 58 && ["83", "84", "8f"].contains($0.message.prefix(2)))
            }
            XCTAssertEqual(reports.map(\.description), [], "\(mode): no membership report leaves wwan0 while an app is denied it")
            app.killAndReap()

            // Allowed WWAN (a reload: its elements and wwan's chain change): its reports leave wwan0 again.
            _ = try writeConfig(policy(wwan: "allow"), in: dir)
            XCTAssertEqual(try request(socket, "RELOAD")["ok"] as? Bool, true)
            try waitUntil("\(mode): wwan's chain drops no reports") {
                let chain = try bed.nft("list", "chain", "inet", "netpermd", "kind_wwan").stdout
                return (!chain.isEmpty && !chain.contains("igmp"), chain)
            }
            let allowed = monotonicNow()
            let (again, _) = try join(dir + "/joins-allowed.out")
            try waitUntil("\(mode): wwan0's far end sees the allowed app's reports") {
                let seen = wwan.packets.filter { $0.time > allowed }.map(\.message).joined(separator: " ")
                return (chosen.filter { $0[0] == "wwan" }.allSatisfy { seen.contains($0[1]) }, seen)
            }
            again.killAndReap()
        }
    }
}
