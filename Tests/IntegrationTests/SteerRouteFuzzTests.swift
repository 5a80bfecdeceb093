// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Mode=steer's tables against the kernel after randomized route changes (seeded; NETPERMD_FUZZ_SEED=N replays):
/// routes added, replaced and deleted in the main table through the allowed link (wifi0) and the denied one
/// (wwan0), both families, and routes of another table (200) that steering must neither copy nor need to read.
/// After each burst every steering table the rules name must hold, as `ip -j route show table N` lists it, the main
/// table's routes through wifi0 (and lo) and an unreachable default per family, and nothing else.
final class SteerRouteFuzzTests: IntegrationTestCase {
    func testSteeringTablesFollowRandomRouteChanges() throws {
        try EnforcementBed.requireTools()
        let env = ProcessInfo.processInfo.environment
        let seed = env["NETPERMD_FUZZ_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("steer route fuzz: seed \(seed) (replay with NETPERMD_FUZZ_SEED=\(seed))")
        let dir = try makeTempDir()
        let bed = try SteerBed(self, dir: dir)
        let socket = dir + "/netpermd.sock"
        _ = try startDaemon(in: bed.ns, socket: socket, config: try writeConfig(SteerTests.policy, in: dir), nsenter: true)
        try waitUntil("steering") {
            let e = try self.request(socket, "STATUS")["enforcement"] as? [String: Any]
            return ((e?["steering"] as? [String: Any])?["state"] as? String == "steering", "\(e ?? [:])")
        }
        var rng = SplitMix64(state: seed)
        var history: [String] = []
        for burst in 0..<12 {
            var ops: [String] = []
            for _ in 0..<(1 + rng.below(6)) {
                let v6 = rng.below(2) == 1, n = rng.below(4)
                let dst = v6 ? "fd5\(n)::/64" : "10.20\(n).0.0/24"
                let (dev, via) = rng.below(2) == 0 ? ("wifi0", v6 ? "fd00:82::2" : "10.82.0.2")
                                                   : ("wwan0", v6 ? "fd00:81::2" : "10.81.0.2")
                let metric = String(100 * (1 + rng.below(3)))
                var args: [String]
                switch rng.below(5) {
                case 0, 1: args = ["route", "replace", dst, "via", via, "dev", dev, "metric", metric]
                case 2: args = ["route", "add", dst, "dev", dev, "metric", metric]
                case 3: args = ["route", "del", dst]
                default: args = ["route", rng.below(2) == 0 ? "replace" : "del", dst, "dev", "wifi0", "table", "200"]
                }
                if v6 { args.insert("-6", at: 0) }
                _ = try Subprocess.run(["ip", "-n", bed.ns.name] + args)
                ops.append(args.joined(separator: " "))
            }
            history.append("burst \(burst): " + ops.joined(separator: "; "))
            var last = ""
            do {
                try waitUntil("the steering tables follow the main table", timeout: 4) {
                    last = try Self.disagreement(bed)
                    return (last.isEmpty, last)
                }
            } catch {
                return XCTFail("seed \(seed), burst \(burst): \(last)\n" + history.suffix(6).joined(separator: "\n"))
            }
        }
        print("steer route fuzz: seed \(seed): \(history.count) bursts agreed")
    }

    /// What differs between each steering table and what it must hold; empty when they agree.
    private static func disagreement(_ bed: SteerBed) throws -> String {
        let tables = Set(try bed.rules().compactMap { $0.components(separatedBy: "lookup ").last.flatMap { Int($0) } })
        guard !tables.isEmpty else { return "no steering rules" }
        var out: [String] = []
        for family in ["-4", "-6"] {
            // Loopback is always allowed: its routes are copied too.
            let main = try routes(bed, family, "main").filter { ["wifi0", "lo"].contains($0.dev) && $0.type == "unicast" }
            for t in tables.sorted() {
                let have = try routes(bed, family, String(t))
                let want = main + [Route(dst: "default", gateway: "", dev: "", metric: 0, type: "unreachable")]
                let h = Set(have.map(\.key)), w = Set(want.map(\.key))
                if h != w {
                    out.append("table \(t) \(family): missing \(w.subtracting(h).sorted()), extra \(h.subtracting(w).sorted())")
                }
            }
        }
        return out.joined(separator: "; ")
    }

    private struct Route {
        var dst: String, gateway: String, dev: String, metric: Int, type: String
        var key: String { "\(type) \(dst) via \(gateway) dev \(dev) metric \(metric)" }
    }

    private static func routes(_ bed: SteerBed, _ family: String, _ table: String) throws -> [Route] {
        let r = try Subprocess.run(["ip", "-n", bed.ns.name, "-j", family, "route", "show", "table", table])
        guard r.status == 0, let data = r.stdout.data(using: .utf8), !r.stdout.isEmpty else { return [] }
        let items = (try JSONSerialization.jsonObject(with: data) as? [[String: Any]]) ?? []
        return items.map { o in
            Route(dst: o["dst"] as? String ?? "", gateway: o["gateway"] as? String ?? "",
                  // An unreachable route lists `lo` (IPv6) or no device: steering's has none.
                  dev: (o["type"] as? String ?? "unicast") == "unreachable" ? "" : o["dev"] as? String ?? "",
                  metric: (o["type"] as? String ?? "unicast") == "unreachable" ? 0 : o["metric"] as? Int ?? 0,
                  type: o["type"] as? String ?? "unicast")
        }
    }
}
