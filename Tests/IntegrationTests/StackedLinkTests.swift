// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 15: stacked links and tunnels take the kind of what carries them, on a real kernel. A tun held open by a
/// process carries the default route; the host route to its (fake) server leaves by a veth the config makes
/// wwan, then by one it makes wifi: the verdict follows, as the kernel's `ip route get` does.
final class StackedLinkTests: IntegrationTestCase {
    static let config = """
        [Interface vw*]
        Kind=wwan

        [Interface vf*]
        Kind=wifi

        [Defaults]
        WiFi=allow
        WWAN=deny
        Ethernet=allow
        Other=allow

        [App cellno]
        Executable=/nonexistent/cellno

        """

    static let endpoint = "192.0.2.7"

    private struct Setup {
        var ns: TestNamespace
        var dir: String
        var socket: String
        var sub: EvSubscriber
    }

    /// vw0 (wwan) and vf0 (wifi), each a veth with its peer up and an address; a daemon; a subscriber.
    private func makeSetup() throws -> Setup {
        let ns = try makeNamespace()
        try ns.addVethPair("vw0", peer: "vw0p")
        try ns.addVethPair("vf0", peer: "vf0p")
        try ns.ip("addr", "add", "10.1.0.1/24", "dev", "vw0")
        try ns.ip("addr", "add", "10.2.0.1/24", "dev", "vf0")
        let dir = try makeTempDir()
        let config = try writeConfig(Self.config, in: dir)
        let socket = "\(dir)/netpermd.sock"
        _ = try startDaemon(in: ns, socket: socket, config: config)
        let sub = try EvSubscriber(EvChannel.connect(socket, name: "subscriber"))
        return Setup(ns: ns, dir: dir, socket: socket, sub: sub)
    }

    /// Reads events until one satisfies `matches` (others pass: a change brings several), bounded.
    @discardableResult
    private func awaitEvent(_ sub: EvSubscriber, _ description: String, timeout: Double = 5,
                            _ matches: ([String: Any]) -> Bool) throws -> [String: Any] {
        let deadline = monotonicNow() + timeout
        var seen: [String] = []
        while true {
            let left = deadline - monotonicNow()
            guard left > 0 else {
                throw HarnessError("timed out after \(timeout) s awaiting \(description); events seen:\n"
                    + seen.joined(separator: "\n"))
            }
            let e: [String: Any]
            do { e = try sub.nextEvent(timeout: left) } catch {
                throw HarnessError("awaiting \(description): \(error); events seen:\n" + seen.joined(separator: "\n"))
            }
            if matches(e) { return e }
            seen.append(EvSubscriber.brief(e))
        }
    }

    private func link(_ e: [String: Any], _ name: String) -> DaemonLink? {
        guard e["event"] as? String == "link", let o = e["link"] as? [String: Any],
              let l = try? DaemonLink(o), l.name == name else { return nil }
        return l
    }

    /// The app event's IPv4 egress link (name, over), when the event is `app`'s.
    private func appEgress(_ e: [String: Any], _ app: String) -> (verdict: VerdictView, name: String?, over: String?)? {
        guard e["event"] as? String == "app", e["app"] as? String == app, let v = VerdictView(e) else { return nil }
        let egress = (e["egress"] as? [String: Any])?["ipv4"] as? [String: Any]
        return (v, egress?["name"] as? String, egress?["over"] as? String)
    }

    /// `ip -j route get DST` in the namespace: the output link the kernel chooses.
    private func kernelRoute(_ ns: TestNamespace, _ destination: String) throws -> String? {
        let r = try ns.ip("-j", "route", "get", destination)
        let array = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [[String: Any]]
        return array?.first?["dev"] as? String
    }

    /// `ip -d -j link show NAME`: the rtnl kind the kernel reports.
    private func kernelKind(_ ns: TestNamespace, _ name: String) throws -> String? {
        let r = try ns.ip("-d", "-j", "link", "show", name)
        let array = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [[String: Any]]
        return (array?.first?["linkinfo"] as? [String: Any])?["info_kind"] as? String
    }

    func testTunOverWwanIsCellularAndFollowsItsEndpointRoute() throws {
        let s = try makeSetup()
        // A tun device exists while a process holds /dev/net/tun for it: socat does, reading into /dev/null.
        let tun = try Subprocess.spawn(
            ["ip", "netns", "exec", s.ns.name, "socat", "-u",
             "TUN:10.8.0.2/24,tun-name=tun0,tun-type=tun,iff-up,iff-no-pi", "OPEN:/dev/null"],
            stdin: .devNull, stdout: .devNull, stderr: .appendFile("\(s.dir)/socat-tun.log"))
        addTeardownBlock { _ = tun.killAndReap() }
        try awaitEvent(s.sub, "tun0 with carrier") { link($0, "tun0")?.carrier == true }
        XCTAssertEqual(try kernelKind(s.ns, "tun0"), "tun")

        // The VPN's routes: its server by the wwan veth, everything else into the tunnel.
        try s.ns.ip("route", "add", "\(Self.endpoint)/32", "via", "10.1.0.2", "dev", "vw0")
        try s.ns.ip("route", "add", "default", "dev", "tun0")
        let overWwan = try awaitEvent(s.sub, "cellno denied, its traffic in tun0 over vw0") {
            guard let (v, name, over) = appEgress($0, "cellno") else { return false }
            return !v.available && v.reason == "denied" && v.denied == ["wwan"] && name == "tun0" && over == "vw0"
        }
        XCTAssertNil(VerdictView(overWwan)?.via, "denied: no via")
        // The kernel agrees: traffic enters tun0, the server's route leaves by vw0.
        XCTAssertEqual(try kernelRoute(s.ns, "1.1.1.1"), "tun0")
        XCTAssertEqual(try kernelRoute(s.ns, Self.endpoint), "vw0")
        var tun0 = try XCTUnwrap(links(s.socket)[name: "tun0"])
        XCTAssertEqual(tun0.kind, "wwan", "\(tun0)")
        XCTAssertEqual(tun0.metered, true, "\(tun0)")
        XCTAssertEqual(tun0.classifiedBy, "host-route:vw0", "\(tun0)")
        XCTAssertEqual(tun0.over, try kernelRoute(s.ns, Self.endpoint))
        XCTAssertTrue(tun0.usable, "\(tun0)")
        XCTAssertNil(try links(s.socket)[name: "vw0"]?.over, "vw0 is not stacked")
        let denied = try ctl(["--socket", s.socket, "query", "cellno"])
        XCTAssertTrue(denied.stdout.contains("no: denied on wwan (via tun0 over vw0)"), denied.stdout)
        let status = try ctl(["--socket", s.socket, "status"])
        XCTAssertTrue(status.stdout.contains("primary:   tun0 over vw0 (wwan)"), status.stdout)

        // The server is now reached by the wifi veth: the tunnel is Wi-Fi, and the app may use it.
        try s.ns.ip("route", "replace", "\(Self.endpoint)/32", "via", "10.2.0.2", "dev", "vf0")
        let overWifi = try awaitEvent(s.sub, "cellno ok via tun0 over vf0") {
            guard let (v, name, over) = appEgress($0, "cellno") else { return false }
            return v.available && v.reason == "ok" && v.via == "tun0/wifi/false" && name == "tun0" && over == "vf0"
        }
        XCTAssertEqual((overWifi["via"] as? [String: Any])?["over"] as? String, "vf0")
        XCTAssertEqual(try kernelRoute(s.ns, Self.endpoint), "vf0")
        tun0 = try XCTUnwrap(links(s.socket)[name: "tun0"])
        XCTAssertEqual(tun0.kind, "wifi", "\(tun0)")
        XCTAssertEqual(tun0.metered, false, "\(tun0)")
        XCTAssertEqual(tun0.classifiedBy, "host-route:vf0", "\(tun0)")
        XCTAssertEqual(tun0.over, try kernelRoute(s.ns, Self.endpoint))
        let ok = try ctl(["--socket", s.socket, "query", "cellno"])
        XCTAssertTrue(ok.stdout.contains("yes, via tun0 over vf0 (wifi)"), ok.stdout)

        // Without the host route the tunnel is carried by nothing the kernel can name, and no other link has a
        // default route: it is what its own rule says (other), and the app, allowed other, may use it.
        try s.ns.ip("route", "del", "\(Self.endpoint)/32")
        try awaitEvent(s.sub, "tun0 back to its own rule") {
            guard let l = link($0, "tun0") else { return false }
            return l.kind == "other" && l.over == nil && l.classifiedBy == "rtnl-kind:tun"
        }
    }

    /// A macvlan on the wwan veth is wwan and metered (it used to be `other`: a way around WWAN=deny).
    func testMacvlanOnWwanIsWwan() throws {
        let s = try makeSetup()
        let made = try Subprocess.run(["ip", "-n", s.ns.name, "link", "add", "mv0", "link", "vw0", "type", "macvlan",
                                       "mode", "bridge"])
        guard made.status == 0 else {
            throw XCTSkip("this kernel cannot make a macvlan in a namespace: \(made.summary)")
        }
        try s.ns.ip("link", "set", "mv0", "up")
        try s.ns.ip("addr", "add", "10.1.0.9/24", "dev", "mv0")
        try s.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "mv0")
        try awaitEvent(s.sub, "cellno denied, its traffic by mv0 over vw0") {
            guard let (v, name, over) = appEgress($0, "cellno") else { return false }
            return !v.available && v.reason == "denied" && v.denied == ["wwan"] && name == "mv0" && over == "vw0"
        }
        let mv0 = try XCTUnwrap(links(s.socket)[name: "mv0"])
        XCTAssertEqual(mv0.kind, "wwan", "\(mv0)")
        XCTAssertEqual(mv0.metered, true, "\(mv0)")
        XCTAssertEqual(mv0.classifiedBy, "lower:vw0", "\(mv0)")
        // The kernel's view: mv0 is a macvlan whose link is vw0, and traffic leaves by it.
        XCTAssertEqual(try kernelKind(s.ns, "mv0"), "macvlan")
        let r = try s.ns.ip("-j", "link", "show", "mv0")
        let k = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [[String: Any]]
        XCTAssertEqual(k?.first?["link"] as? String, mv0.over)
        XCTAssertEqual(try kernelRoute(s.ns, "1.1.1.1"), "mv0")
    }
}
