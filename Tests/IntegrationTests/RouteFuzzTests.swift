// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Randomized sequences of what changes links and routes, each burst followed by a comparison of the daemon's
/// picture and verdicts with the kernel's own answers (KernelTruth). Seeded: the seed is printed, and
/// NETPERMD_FUZZ_SEED=N replays a run. A short run is part of `make test`; `make fuzz-routes` runs for
/// NETPERMD_FUZZ_SECONDS (600 by default there).
final class RouteFuzzTests: IntegrationTestCase {
    func testRandomizedChangesAgreeWithTheKernel() throws {
        let env = ProcessInfo.processInfo.environment
        let seed = env["NETPERMD_FUZZ_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        let seconds = env["NETPERMD_FUZZ_SECONDS"].flatMap { Double($0) }
        let bursts = seconds == nil ? 30 : Int.max
        print("route fuzz: seed \(seed) (replay with NETPERMD_FUZZ_SEED=\(seed))")

        let ns = try makeNamespace(ipv6: true)
        let away = try makeNamespace(ipv6: true)
        let dir = try makeTempDir()
        let config = try writeConfig(KernelTruth.policy, in: dir)
        let socket = dir + "/netpermd.sock"
        _ = try startDaemon(in: ns, socket: socket, config: config)
        let fuzz = RouteFuzzer(ns: ns, away: away, seed: seed)
        addTeardownBlock { fuzz.stopTuns() }

        let start = monotonicNow()
        var history: [String] = []
        var comparisons = 0
        for burst in 0..<bursts {
            if let seconds, monotonicNow() - start > seconds { break }
            let ops = try fuzz.burst()
            history.append("burst \(burst): " + ops.joined(separator: "; "))
            do {
                try assertAgrees(ns, socket, "burst \(burst)", timeout: 4)
                comparisons += 1
            } catch {
                XCTFail("seed \(seed), burst \(burst): the daemon disagrees with the kernel (replay with "
                    + "NETPERMD_FUZZ_SEED=\(seed)): \(error)\nlast bursts:\n" + history.suffix(8).joined(separator: "\n"))
                return
            }
        }
        print("route fuzz: seed \(seed): \(history.count) bursts, \(fuzz.operations) operations "
            + "(\(fuzz.failedOperations) refused by the kernel), \(comparisons) comparisons, 0 divergences, "
            + String(format: "%.0f s", monotonicNow() - start))
    }
}

/// SplitMix64: small, seedable, the same sequence everywhere (a seed replays a run).
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    mutating func pick<T>(_ a: [T]) -> T { a[below(a.count)] }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
}

/// Chooses and runs changes. Its choices depend only on the seed and its own bookkeeping of what it made (never
/// on what the kernel says), so a seed replays the same commands.
final class RouteFuzzer {
    let ns: TestNamespace
    let away: TestNamespace
    private var rng: SplitMix64
    /// Links it created in `ns` (veth ends whose peers are NAME + "p", bridges, tuns), and those moved away.
    private var links: [String] = []
    private var moved: [String] = []
    private var bridges: [String] = []
    private var tuns: [String: TunHolder] = [:]
    private var nexthops: [Int] = []
    private(set) var operations = 0
    private(set) var failedOperations = 0
    private var serial = 0

    static let names = ["eth0", "eth1", "wlan0", "wwan0", "wwan1", "usb0", "wg0"]

    init(ns: TestNamespace, away: TestNamespace, seed: UInt64) {
        self.ns = ns; self.away = away; rng = SplitMix64(state: seed)
    }

    /// Runs 1 to 5 changes; returns what it ran.
    func burst() throws -> [String] {
        var ran: [String] = []
        for _ in 0..<(1 + rng.below(5)) { ran.append(try step()) }
        return ran
    }

    /// A subnet number for a link name, stable for the run.
    private func net(_ link: String) -> Int { (link.unicodeScalars.reduce(7) { ($0 &* 31 &+ Int($1.value)) % 200 }) + 10 }

    @discardableResult
    private func ip(_ args: [String], in n: TestNamespace? = nil) throws -> Bool {
        operations += 1
        let r = try Subprocess.run(["ip", "-n", (n ?? ns).name] + args)
        if r.status != 0 { failedOperations += 1 }
        return r.status == 0
    }

    private func step() throws -> String {
        let family = rng.chance(50) ? "-4" : "-6"
        let metric = String(rng.pick([0, 50, 100, 100, 600]))
        let table = rng.pick(["main", "main", "100", "200"])
        switch rng.below(16) {
        case 0, 1:
            guard let name = rng.pick(Self.names.filter { !links.contains($0) && !moved.contains($0) }.map { Optional($0) } + [nil])
            else { return "no free name" }
            try ip(["link", "add", name, "type", "veth", "peer", "name", name + "p"])
            try ip(["link", "set", name, "up"])
            try ip(["link", "set", name + "p", "up"])
            links.append(name)
            return "add veth \(name)"
        case 2:
            guard let l = randomLink() else { return "nothing to delete" }
            if let t = tuns.removeValue(forKey: l) { t.stop() } else { try ip(["link", "del", l]) }
            links.removeAll { $0 == l }
            bridges.removeAll { $0 == l }
            return "delete \(l)"
        case 3:
            guard let l = randomLink(), tuns[l] == nil,
                  let to = rng.pick(Self.names.filter { !links.contains($0) && !moved.contains($0) }.map { Optional($0) } + [nil])
            else { return "no rename" }
            try ip(["link", "set", l, "down"])
            if try ip(["link", "set", l, "name", to]) {
                links = links.map { $0 == l ? to : $0 }
                bridges = bridges.map { $0 == l ? to : $0 }
            }
            let now = links.contains(to) ? to : l
            try ip(["link", "set", now, "up"])
            return "rename \(l) to \(to)"
        case 4, 5:
            guard let l = randomLink() else { return "nothing to toggle" }
            // Our end (admin state) or the peer (carrier).
            let target = !bridges.contains(l) && tuns[l] == nil && rng.chance(60) ? l + "p" : l
            let state = rng.chance(50) ? "down" : "up"
            try ip(["link", "set", target, state])
            return "\(target) \(state)"
        case 6:
            if let l = moved.first, rng.chance(50) {
                try ip(["link", "set", l, "netns", ns.name], in: away)
                try ip(["link", "set", l, "up"])
                moved.removeFirst()
                links.append(l)
                return "move \(l) back"
            }
            guard let l = randomLink(), tuns[l] == nil, !bridges.contains(l) else { return "nothing to move" }
            try ip(["link", "set", l, "netns", away.name])
            links.removeAll { $0 == l }
            moved.append(l)
            return "move \(l) away"
        case 7, 8:
            guard let l = randomLink() else { return "no link for an address" }
            let n = net(l)
            let add = rng.chance(70)
            if rng.chance(15) {
                try ip([family, "addr", "flush", "dev", l])
                return "flush \(family) addresses of \(l)"
            }
            if family == "-4" && rng.chance(30) {
                // Two addresses the same but for their peers: deleting one must keep the other.
                let peer = "10.\(n).1.\(1 + rng.below(2))/32"
                try ip(["addr", add ? "add" : "del", "10.\(n).1.100", "peer", peer, "dev", l])
                return "\(add ? "add" : "del") address with peer \(peer) on \(l)"
            }
            if family == "-4" {
                try ip(["addr", add ? "add" : "del", "10.\(n).0.1/24", "dev", l])
            } else {
                try ip(["addr", add ? "add" : "del", "2001:db8:\(n)::1/64", "dev", l] + (add ? ["nodad"] : []))
            }
            return "\(add ? "add" : "del") \(family) address on \(l)"
        case 9, 10, 11:
            guard let l = randomLink() else { return "no link for a route" }
            let n = net(l)
            let verb = rng.pick(["add", "add", "del", "replace", "append"])
            let via = rng.chance(50) ? (family == "-4" ? ["via", "10.\(n).0.2"] : ["via", "fe80::\(n)"]) : []
            try ip([family, "route", verb, "default"] + via + ["dev", l, "metric", metric, "table", table])
            return "\(family) route \(verb) default \(via.joined(separator: " ")) dev \(l) metric \(metric) table \(table)"
        case 12:
            let pref = String(1000 + rng.below(3) * 100)
            let t = rng.pick(["100", "200"])
            let add = rng.chance(60)
            try ip([family, "rule", add ? "add" : "del", "pref", pref, "lookup", t])
            return "\(family) rule \(add ? "add" : "del") pref \(pref) lookup \(t)"
        case 13:
            guard links.count >= 2 else { return "no pair for multipath" }
            let a = rng.pick(links), b = rng.pick(links.filter { $0 != a })
            try ip([family, "route", rng.pick(["add", "replace"]), "default", "metric", metric, "table", table,
                    "nexthop", "dev", a, "nexthop", "dev", b])
            return "\(family) multipath default over \(a) and \(b) metric \(metric) table \(table)"
        case 14:
            if let id = nexthops.last, rng.chance(40) {
                try ip(["nexthop", "del", "id", String(id)])
                nexthops.removeLast()
                return "nexthop \(id) deleted"
            }
            guard let l = randomLink() else { return "no link for a nexthop" }
            serial += 1
            let id = serial
            try ip(["nexthop", "add", "id", String(id), "dev", l] + (family == "-6" ? ["proto", "static"] : []))
            nexthops.append(id)
            try ip(["route", "add", "default", "nhid", String(id), "metric", metric, "table", table])
            return "nexthop \(id) on \(l), default by it metric \(metric) table \(table)"
        default:
            switch rng.below(3) {
            case 0:
                let type = rng.pick(["blackhole", "unreachable", "prohibit"])
                let verb = rng.chance(60) ? "add" : "del"
                try ip([family, "route", verb, type, "default", "metric", rng.pick(["10", "700"]), "table", table])
                return "\(family) \(verb) \(type) default table \(table)"
            case 1:
                if bridges.isEmpty || rng.chance(30) {
                    let name = "br\(bridges.count)"
                    guard !links.contains(name) else { return "bridge exists" }
                    try ip(["link", "add", name, "type", "bridge"])
                    try ip(["link", "set", name, "up"])
                    links.append(name)
                    bridges.append(name)
                    return "add bridge \(name)"
                }
                guard let port = randomLink(), !bridges.contains(port), tuns[port] == nil else { return "no port" }
                if rng.chance(40) {
                    // Leaving a bridge: the kernel also says RTM_DELLINK of family AF_BRIDGE about the port.
                    try ip(["link", "set", port, "nomaster"])
                    return "\(port) out of its bridge"
                }
                let br = rng.pick(bridges)
                try ip(["link", "set", port, "master", br])
                return "\(port) into \(br)"
            default:
                let name = "tun\(tuns.count)"
                guard !links.contains(name) else { return "tun exists" }
                let holder = try TunHolder(in: ns, name: name)
                tuns[name] = holder
                links.append(name)
                try ip(["link", "set", name, "up"])
                return "tun \(name) held open"
            }
        }
    }

    private func randomLink() -> String? { links.isEmpty ? nil : rng.pick(links) }

    func stopTuns() {
        for t in tuns.values { t.stop() }
        tuns = [:]
    }
}

/// A process holding a tun device open (the device lives as long as it does, with carrier while it holds it).
final class TunHolder {
    private let child: ChildProcess
    /// Its stdin: it holds the device until this closes.
    private let input: Int32

    static let script = """
        import fcntl, os, struct, sys
        fd = os.open("/dev/net/tun", os.O_RDWR)
        fcntl.ioctl(fd, 0x400454ca, struct.pack("16sH", sys.argv[1].encode(), 0x0001 | 0x1000))
        print("ready", flush=True)
        sys.stdin.read()
        """

    init(in ns: TestNamespace, name: String) throws {
        let input = try Subprocess.makePipe()
        let output = try Subprocess.makePipe()
        let child = try Subprocess.spawn(["nsenter", "--net=/run/netns/\(ns.name)", "python3", "-c", Self.script, name],
                                         stdin: .fd(input.read), stdout: .fd(output.write), stderr: .devNull)
        close(input.read)
        close(output.write)
        let reader = FDLineReader(fd: output.read)
        defer { close(output.read) }
        guard reader.nextLine(timeout: 5) == "ready" else {
            child.killAndReap()
            close(input.write)
            throw HarnessError("the tun holder for \(name) did not start")
        }
        self.child = child
        self.input = input.write
    }

    func stop() {
        close(input)
        if child.wait(timeout: 5) == nil { child.killAndReap() }
    }
}
