// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import NetpermPolicy
import NetpermProtocol
import XCTest

/// No window in the rules while they change (issue 48): for random pairs of policies, every state the transactions of
/// `update(from:)` pass through refuses each packet that the old rules and the new ones both refuse. A packet is judged by a model of the kernel that reads the chains' rules as the
/// ruleset writes them (`chainRules`, the links' chains) and looks up the maps in that order; while a commit lands,
/// every map it looks up may be met as it was before the commit or as it is after, independently (nf_tables commits a
/// transaction's sets one by one, and a packet's lookups follow one another while it does). A packet is far shorter
/// than the time between two commits (each is a netlink round trip), so it meets at most one.
final class RuleWindowTests: XCTestCase {
    typealias Maps = [String: [ElementChanges.Key: ElementChanges.Value]]

    /// A packet: its socket's owner (nil: none, as an orphaned socket's), its unit cgroup, its connection's mark, and
    /// whether it opens its connection or is a server's SYN-ACK.
    struct Packet: CustomStringConvertible {
        var uid: UInt32?
        var cgroup: UnitCgroup?
        var mark: UInt32
        var new = false
        var synAck = false
        var link: String
        var description: String {
            "\(link): uid \(uid.map(String.init) ?? "-") cgroup \(cgroup?.unit ?? "-") mark \(String(mark, radix: 16))"
                + (new ? " new" : "") + (synAck ? " syn-ack" : "")
        }
    }

    /// The rules of the chains the ruleset writes, as the model runs them.
    enum Rule: Equatable {
        case tagIfNew
        case gotoIfOwned(String)
        case never
        case markVmap(String)
        case synAckMarkVmap(String)
        case cgroupVmap(level: Int, map: String)
        case uidVmap(String)
        case markFromUID(String)
        case markFromCgroup(level: Int, map: String)
        case jump(String)
        case goto(String)

        init?(_ s: String) {
            func after(_ prefix: String) -> String? { s.hasPrefix(prefix) ? String(s.dropFirst(prefix.count)) : nil }
            if s == "ct state new ct mark 0 jump tag" { self = .tagIfNew; return }
            if Ruleset.reportDrops.contains(s) { self = .never; return }
            if let c = after("meta skuid 0-4294967295 goto ") { self = .gotoIfOwned(c); return }
            if let m = after("ct mark vmap @") { self = .markVmap(m); return }
            if let m = after("tcp flags & (syn | ack) == syn | ack ct mark vmap @") { self = .synAckMarkVmap(m); return }
            if let m = after("meta skuid vmap @") { self = .uidVmap(m); return }
            if let m = after("ct mark set meta skuid map @") { self = .markFromUID(m); return }
            if let rest = after("socket cgroupv2 level ") ?? after("ct mark set socket cgroupv2 level ") {
                let parts = rest.split(separator: " ")
                guard parts.count == 3, let level = Int(parts[0]), parts[2].hasPrefix("@") else { return nil }
                let map = String(parts[2].dropFirst())
                if parts[1] == "vmap", !s.hasPrefix("ct mark set") { self = .cgroupVmap(level: level, map: map); return }
                if parts[1] == "map", s.hasPrefix("ct mark set") { self = .markFromCgroup(level: level, map: map); return }
                return nil
            }
            if let c = after("jump ") { self = .jump(c); return }
            if let c = after("goto ") { self = .goto(c); return }
            return nil
        }
    }

    /// What the kernel holds after each transaction: the maps' elements and the chains' rules (the input hook's
    /// left out: it tags a server's connection on its SYN, which the packets here come after).
    struct KernelState: Equatable {
        var maps: Maps
        var chains: [String: [Rule]]
    }

    enum Outcome: Equatable { case accept, reject }

    // MARK: - The model

    static func state(of r: Ruleset) -> KernelState {
        var maps: Maps = [:]
        for m in r.maps { maps[m.name] = Dictionary(uniqueKeysWithValues: m.elements.map { ($0.key.change, $0.verdict.change) }) }
        maps["links"] = Dictionary(uniqueKeysWithValues: r.linkElements.map { ($0.key.change, $0.verdict.change) })
        var chains: [String: [Rule]] = [:]
        for (chain, rules) in Ruleset.chainRules(used: r.used) where chain != "input" { chains[chain] = rules.map { Rule($0)! } }
        for k in Ruleset.dimensions where !k.isOverlay {
            chains["metered_\(k.rawValue)"] = [.jump("metered"), .goto("kind_\(k.rawValue)")]
            chains["roaming_\(k.rawValue)"] = [.jump("roaming"), .goto("kind_\(k.rawValue)")]
            chains["roaming_metered_\(k.rawValue)"] = [.jump("roaming"), .jump("metered"), .goto("kind_\(k.rawValue)")]
        }
        for c in r.askChains { chains[c.name] = [.goto("refuse")] }
        return KernelState(maps: maps, chains: chains)
    }

    /// `s` after transaction `t`, as the kernel runs it (an element deleted must be there, one added must not).
    static func apply(_ t: RuleTransaction, to s: inout KernelState, file: StaticString = #filePath, line: UInt = #line) {
        if let changes = t.elements {
            for c in changes.commands {
                switch c {
                case let .flush(map): s.maps[map] = [:]
                case let .add(map, elements):
                    for e in elements {
                        XCTAssertNil(s.maps[map]?[e.key], "\(map): \(e.key) added twice in\n\(t.text)", file: file, line: line)
                        s.maps[map, default: [:]][e.key] = e.value
                    }
                case let .delete(map, keys):
                    for k in keys {
                        XCTAssertNotNil(s.maps[map]?[k], "\(map): \(k) deleted but absent in\n\(t.text)", file: file, line: line)
                        s.maps[map]?[k] = nil
                    }
                case let .deleteChain(c): s.chains[c] = nil
                }
            }
            return
        }
        // Chains' rules only (RuleTransaction leaves those to libnftables): read from nft's text.
        let head = "\(Ruleset.family) \(Ruleset.table) "
        for command in t.text.split(separator: "\n").map(String.init) {
            XCTAssertFalse(command.contains(" element "), "a transaction of chains' rules changes no element: \(command)", file: file, line: line)
            if let c = command.dropPrefix("add chain " + head) { s.chains[c] = [] }
            else if let c = command.dropPrefix("flush chain " + head) { if c != "input" { s.chains[c] = [] } }
            else if let c = command.dropPrefix("delete chain " + head) { s.chains[c] = nil }
            else if let rest = command.dropPrefix("add rule " + head) {
                let chain = String(rest.prefix { $0 != " " }), text = String(rest.dropFirst(chain.count + 1))
                // The input hook tags a server's connection on its SYN, which the packets here come after.
                if chain == "input" { continue }
                // An ask chain's log rule logs and goes on: not a verdict.
                if chain.hasPrefix("ask_"), text.hasPrefix("limit rate") { continue }
                guard let rule = Rule(text) else { XCTFail("a rule the model does not know: \(text)", file: file, line: line); continue }
                s.chains[chain, default: []].append(rule)
            } else {
                XCTFail("a command the model does not know: \(command)", file: file, line: line)
            }
        }
    }

    /// The verdict of packet `p`, looking each map up in the state `view` gives for it, the chains' rules of `chains`.
    static func judge(_ p: Packet, chains: [String: [Rule]], view: (String) -> [ElementChanges.Key: ElementChanges.Value]) -> Outcome {
        var mark = p.mark
        func cgroupKey(_ level: Int) -> ElementChanges.Key? {
            guard let c = p.cgroup, c.level == level else { return nil }
            return .cgroup(c.path)
        }
        /// nil: the chain returned (its end, or `return`).
        func run(_ chain: String, depth: Int = 0) -> Outcome? {
            if chain == "deny" || chain == "refuse" { return .reject }
            guard depth < 16, let rules = chains[chain] else { return nil }
            func act(_ v: ElementChanges.Value?) -> Outcome?? {
                guard let v else { return .none }
                switch v {
                case .accept: return .some(.accept)
                case .pass: return .some(nil)
                case let .goto(c): return .some(run(c, depth: depth + 1))
                case .mark: return .none
                }
            }
            for rule in rules {
                let verdict: Outcome??
                switch rule {
                case .tagIfNew:
                    guard p.new, mark == 0 else { continue }
                    if let o = run("tag", depth: depth + 1) { return o }
                    continue
                case let .gotoIfOwned(c):
                    guard p.uid != nil else { continue }
                    return run(c, depth: depth + 1)
                case .never: continue
                case let .markVmap(m): verdict = act(view(m)[.number(mark)])
                case let .synAckMarkVmap(m):
                    guard p.synAck else { continue }
                    verdict = act(view(m)[.number(mark)])
                case let .cgroupVmap(level, m):
                    guard let k = cgroupKey(level) else { continue }
                    verdict = act(view(m)[k])
                case let .uidVmap(m):
                    guard let u = p.uid else { continue }
                    verdict = act(view(m)[.number(u)])
                case let .markFromUID(m):
                    if let u = p.uid, case let .mark(t)? = view(m)[.number(u)] { mark = t }
                    continue
                case let .markFromCgroup(level, m):
                    if let k = cgroupKey(level), case let .mark(t)? = view(m)[k] { mark = t }
                    continue
                case let .jump(c):
                    if let o = run(c, depth: depth + 1) { return o }
                    continue
                case let .goto(c): return run(c, depth: depth + 1)
                }
                if case let .some(o) = verdict { return o }
            }
            return nil
        }
        guard case let .goto(chain)? = view("links")[.ifname(p.link)] else { return .accept }
        return run(chain) ?? .accept
    }

    /// Checks every state between `old` and `new` by `update`: each packet of `packets` that both sides refuse is
    /// refused in every state a packet can meet. Returns what it found wrong.
    static func windows(from old: Ruleset, to new: Ruleset, _ update: Ruleset.Update, packets: [Packet]) -> [String] {
        var states = [state(of: old)]
        for t in update.changes {
            var s = states.last!
            apply(t, to: &s)
            states.append(s)
        }
        var found: [String] = []
        let last = states.last!, wanted = state(of: new)
        if last.maps.filter({ !$0.value.isEmpty }) != wanted.maps.filter({ !$0.value.isEmpty }) { found.append("the last state's maps are not the new rules'") }
        if last.chains != wanted.chains { found.append("the last state's chains are not the new rules'") }
        let first = states[0]
        for p in packets {
            let before = judge(p, chains: first.chains) { first.maps[$0] ?? [:] }
            let after = judge(p, chains: last.chains) { last.maps[$0] ?? [:] }
            // Refused on both sides: refused in every state between. (Passed on both sides: the first half may refuse
            // it, as both rules together do: a unit's new accept comes after its uid's new rejection. Fail closed.)
            guard before == .reject, after == .reject else { continue }
            for (i, (a, b)) in zip(states, states.dropFirst()).enumerated() {
                // The maps whose element for this packet a commit changes: each may be met as before or after it.
                var keys: Set<ElementChanges.Key> = [.ifname(p.link)]
                if let u = p.uid { keys.insert(.number(u)) }
                if let c = p.cgroup { keys.insert(.cgroup(c.path)) }
                keys.insert(.number(p.mark))
                // The tags a new connection of this packet's can get, on either side of the commit.
                for m in [a.maps, b.maps] {
                    for (name, elements) in m where name.hasPrefix("tag_") {
                        for k in [p.uid.map { ElementChanges.Key.number($0) }, p.cgroup.map { .cgroup($0.path) }].compactMap({ $0 }) {
                            if case let .mark(t)? = elements[k] { keys.insert(.number(t)) }
                        }
                    }
                }
                let moved = Set(a.maps.keys).union(b.maps.keys).filter { m in keys.contains { a.maps[m]?[$0] != b.maps[m]?[$0] } }.sorted()
                let chainSets = a.chains == b.chains ? [a.chains] : [a.chains, b.chains]
                for chains in chainSets {
                    for subset in 0..<(1 << moved.count) {
                        let met = judge(p, chains: chains) { m in
                            guard let j = moved.firstIndex(of: m), subset & (1 << j) != 0 else { return a.maps[m] ?? [:] }
                            return b.maps[m] ?? [:]
                        }
                        if met != before {
                            let after = moved.enumerated().filter { subset & (1 << $0.offset) != 0 }.map(\.element)
                            found.append("\(p) is \(before) before and after, \(met) during transaction \(i + 1) with "
                                + "\(after.isEmpty ? "no map" : after.joined(separator: ", ")) committed first:\n"
                                + update.transactions[i])
                            break
                        }
                    }
                }
            }
        }
        return found
    }

    // MARK: - The policies

    static let home = "user.slice/user-1000.slice/user@1000.service"
    static let cgroups = UnitCgroups(nftRoot: "unified", units: [
        UnitCgroup(path: "system.slice/cron.service", level: 2, unit: "cron.service", id: 7),
        UnitCgroup(path: "system.slice/system-getty.slice/getty@tty1.service", level: 3, unit: "getty@tty1.service", id: 8),
        UnitCgroup(path: home + "/app.slice/app-x.scope", level: 5, unit: "app-x.scope", id: 9, user: true),
    ])
    static var links: [Link] {
        var roaming = makeLink(7, "wwan1", .wwan)
        roaming.roaming = true
        return [makeLink(2, "wlan0", .wifi), makeLink(3, "wwan0", .wwan), roaming, makeLink(4, "eth0", .ethernet),
                makeLink(5, "eth1", .ethernet, metered: true), makeLink(6, "other0", .other)]
    }
    static let names = ["a", "b", "c", "d"]
    static let tags = ConnectionTags.assign(names + ["flip", "keep", "cron"] + (0..<12).map { "pad\($0)" })

    static func build(_ policy: String) throws -> Ruleset {
        let config = try parsePolicy(policy)
        return Ruleset.build(apps: config.apps, permissions: { config.permissions(for: $0) }, links: links, cgroups: cgroups,
                             tags: tags)
    }

    /// Every packet the policies can tell apart: each uid (one no app names), in each unit or none, opening its
    /// connection or a server's SYN-ACK of each app's connection; and sockets with no owner any more, by tag.
    static func packets(of apps: [String]) -> [Packet] {
        var out: [Packet] = []
        let marks: [UInt32] = [0] + apps.map { tags[$0]! }
        for link in links.map(\.name) {
            for cgroup in [nil] + cgroups.units {
                for uid in [1000, 1001, 2000, 3000] as [UInt32] {
                    out.append(Packet(uid: uid, cgroup: cgroup, mark: 0, new: true, link: link))
                    for m in marks.dropFirst() { out.append(Packet(uid: uid, cgroup: cgroup, mark: m, synAck: true, link: link)) }
                }
                for m in marks { out.append(Packet(uid: nil, cgroup: cgroup, mark: m, link: link)) }
            }
        }
        return out
    }

    /// One app of a random policy (nil: not in it): some of the uids and units, each permission allow, deny, ask or
    /// the default.
    static func randomApp(_ name: String, _ rng: inout SplitMix) -> String? {
        guard rng.next(4) != 0 else { return nil }
        var text = "[App \(name)]\n"
        let uids = [1000, 1001, 2000].filter { _ in rng.next(3) == 0 }
        var named = false
        if !uids.isEmpty { text += "User=" + uids.map(String.init).joined(separator: " ") + "\n"; named = true }
        switch rng.next(4) {
        case 0: text += "Unit=cron.service\n"; named = true
        case 1: text += "Unit=getty@tty1.service\n"; named = true
        default: break
        }
        if rng.next(3) == 0 { text += "UserUnit=app-x.scope\n"; named = true }
        if !named { text += "Executable=/usr/bin/\(name)\n" }
        for key in ["WiFi", "WWAN", "Ethernet", "Other", "Metered", "Roaming"] {
            let v = rng.next(4)
            if v < 3 { text += "\(key)=\(["allow", "deny", "ask"][v])\n" }
        }
        return text
    }

    /// Apps that stay as they are, so that a change of a few apps is made element by element.
    static let others = (0..<12).map { "[App pad\($0)]\nUser=\(5000 + $0)\nWWAN=deny\nMetered=ask\n" }.joined()

    // MARK: - Tests

    /// The case of issue 48: an app switched between `WWAN=ask` and `Metered=deny` (its uid's element moves from
    /// `uid_wwan` to `uid_metered`, which a metered wwan link looks up first), and a unit between `Metered=allow`,
    /// `WWAN=deny` and the reverse (its `return` and its `accept`): refused before and after, never passed between.
    /// Before, one transaction deleted and added: a packet that met `uid_metered` before the commit and `uid_wwan`
    /// after it found the uid in neither.
    func testAnElementMovedBetweenMapsIsNeverInNone() throws {
        let keep = "[App keep]\nUser=2000\nWWAN=deny\nMetered=deny\n"
        for (a, b) in [("[App flip]\nUser=1000\nWWAN=ask\n", "[App flip]\nUser=1000\nWWAN=allow\nMetered=deny\n"),
                       ("[App flip]\nUser=1000\nWWAN=deny\n", "[App flip]\nUser=1000\nWWAN=allow\nMetered=deny\n"),
                       ("[App cron]\nUnit=cron.service\nMetered=allow\nWWAN=deny\n", "[App cron]\nUnit=cron.service\nMetered=deny\nWWAN=allow\n")] {
            let one = try Self.build(keep + a), two = try Self.build(keep + b)
            for (old, new) in [(one, two), (two, one)] {
                let u = try XCTUnwrap(new.update(from: old))
                XCTAssertEqual(Self.windows(from: old, to: new, u, packets: Self.packets(of: ["flip", "keep", "cron"])), [], "\(a) <-> \(b)")
            }
        }
        // The move itself: the new element first, then the old one's deletion.
        let one = try Self.build(keep + "[App flip]\nUser=1000\nWWAN=deny\n"), two = try Self.build(keep + "[App flip]\nUser=1000\nWWAN=allow\nMetered=deny\n")
        let u = try XCTUnwrap(two.update(from: one))
        XCTAssertEqual(u.transactions.count, 2, "\(u.transactions)")
        XCTAssertTrue(u.transactions.first?.contains("add element inet netpermd uid_metered { 1000 : goto deny }") == true, "\(u.transactions)")
        XCTAssertTrue(u.transactions.last?.hasPrefix("delete element inet netpermd uid_wwan { 1000 }") == true, "\(u.transactions)")
    }

    /// Random policies (MatchingTests' SplitMix), each changed into another: every state between, as any packet can
    /// meet it, refuses what both refuse.
    func testEveryStateBetweenTwoPoliciesRefusesWhatBothRefuse() throws {
        var rng = SplitMix(seed: 48)
        let packets = Self.packets(of: Self.names)
        var checked = 0, transactions = 0
        for _ in 0..<60 {
            // Up to four apps in some order; then one or two of them changed (or added, or gone), and maybe reordered.
            var apps = Self.names.map { Self.randomApp($0, &rng) }
            let oldPolicy = apps.compactMap { $0 }.joined() + Self.others
            for _ in 0..<(1 + rng.next(2)) { let i = rng.next(apps.count); apps[i] = Self.randomApp(Self.names[i], &rng) }
            if rng.next(3) == 0 { apps.reverse() }
            let newPolicy = apps.compactMap { $0 }.joined() + Self.others
            let old = try Self.build(oldPolicy), new = try Self.build(newPolicy)
            guard let u = new.update(from: old) else { continue }
            checked += 1
            transactions += u.changes.count
            let found = Self.windows(from: old, to: new, u, packets: packets)
            XCTAssertEqual(found.first, nil, "\(found.count) found; from\n\(oldPolicy)\nto\n\(newPolicy)")
            if !found.isEmpty { break }
        }
        XCTAssertGreaterThan(checked, 40, "most changes are made element by element")
        XCTAssertGreaterThan(transactions, 2 * checked)
    }
}

private extension String {
    func dropPrefix(_ p: String) -> String? { hasPrefix(p) ? String(dropFirst(p.count)) : nil }
}
