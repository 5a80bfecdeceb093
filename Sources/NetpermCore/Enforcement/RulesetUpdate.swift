// SPDX-License-Identifier: LGPL-2.1-or-later
/// The parts of a `Ruleset` that depend on the apps, kept apart from its text so that two builds can be compared
/// element by element: a decision or a policy change that moves a few apps' verdicts becomes a transaction of a
/// few `delete element` / `add element` commands, instead of the whole table of 10,000 apps (about 13,000 chains
/// and 50,000 elements took 0.7-1.5 s to load, whoever ran it; a few elements take milliseconds).
extension Ruleset {
    /// One verdict map (`uid_wwan`, `unit2_wifi`, ...) and its elements, in the text's order.
    struct VerdictMap: Equatable, Sendable {
        var name: String
        /// nft's key type: `uid`, `cgroupsv2` or `mark` (a connection's tag).
        var key: String
        /// nft's value type: `verdict`, or `mark` for the maps that give a connection its tag.
        var value = "verdict"
        var elements: [MapElement]
    }

    struct MapElement: Equatable, Sendable {
        var key: Key
        var verdict: MapVerdict

        var text: String { key.text + " : " + verdict.text }
    }

    enum Key: Hashable, Sendable {
        case uid(UInt32)
        /// A unit cgroup's path as nft takes it, and the id nft turns it into when it loads it: a cgroup made again
        /// at the same path is another key.
        case cgroup(String, UInt64)
        /// A connection's tag (ConnectionTags).
        case tag(UInt32)

        var text: String {
            switch self {
            case let .uid(u): return String(u)
            case let .cgroup(path, _): return "\"" + path + "\""
            case let .tag(t): return ConnectionTags.text(t)
            }
        }
    }

    enum MapVerdict: Equatable, Sendable {
        case accept
        /// `return`: Metered= allows a unit; its kind is checked next.
        case pass
        case deny
        /// An undecided `ask`: the app's chain for that kind, which logs before it rejects.
        case ask(AskChain.ID)
        /// Not a verdict: the tag a connection of this uid or unit gets.
        case mark(UInt32)

        var text: String {
            switch self {
            case .accept: return "accept"
            case .pass: return "return"
            case .deny: return "goto deny"
            case let .ask(id): return "goto " + id.name
            case let .mark(t): return ConnectionTags.text(t)
            }
        }
    }

    /// The chain of an app (by its tag: the same whatever the app's place in the policy, so reordering the policy
    /// renames no chain) and an undecided `ask` kind.
    struct AskChain: Equatable, Sendable {
        struct ID: Hashable, Sendable {
            var tag: UInt32
            var kind: PolicyDimension
            var name: String { "ask_\(ConnectionTags.text(tag).dropFirst(2))_\(kind.rawValue)" }
        }
        var id: ID
        var prefix: String

        var name: String { id.name }
        /// At most 5 messages a second per app and kind: the daemon needs the first, never one per packet (the engine
        /// raises one prompt); a burst of 5 lets a connect just after another one (TCP, then UDP) be seen.
        var rules: [String] {
            ["limit rate 5/second burst 5 packets log group \(Ruleset.logGroup) prefix \"\(prefix)\"", "goto deny"]
        }
    }

    /// How much `update(from:)` changes, for the log.
    public struct UpdateSize: Equatable, Sendable {
        /// Whether the `links` map is written again.
        public var links = false
        public var elements = 0
        public var chains = 0
        /// Elements of cgroups that went (or were made again) left in the maps: nft can delete an element only by a
        /// path, which no longer names its id. Harmless, as cgroup ids are never used again; gone at the next load
        /// of the whole table.
        public var stale = 0
    }

    /// What `update(from:)` gives: the transactions to run in order (none when nothing differs), and their size.
    public struct Update: Equatable, Sendable {
        public var transactions: [String]
        public var size: UpdateSize
    }

    /// The scripts that turn the rules `old` put in force into these, touching only what differs: the `links` map
    /// (flushed and filled again), map elements (deleted, added; a changed verdict is both), pending apps' chains
    /// (added, filled again when their prefix changed, deleted once no element names them), and the chains whose
    /// lookups follow which maps have elements. The element of a unit cgroup that went or was made again stays
    /// (`UpdateSize.stale`): nft names a cgroup by its path and resolves it when it loads, so it cannot be deleted.
    /// nil when the whole table must be loaded instead: such an element names a pending app's chain (which could
    /// then not be deleted, nor reused), or the change is so large that loading the table is as cheap.
    ///
    /// Up to three transactions, never one that changes a chain's rules and the elements that lead to it: the
    /// kernel reads a packet's chains as of the generation it started with and map elements as of now, so a packet
    /// racing the commit could follow a new element into a chain added by the same commit and find it empty
    /// (measured: 14 datagrams of an app pending, then denied, in 150 such changes). First the chains: pending
    /// apps' new chains, and the lookups of both builds together; then the elements; then the lookups of this build
    /// alone and the chains no element names any more. Each leaves a state in which a packet that either side
    /// rejects is rejected, whichever generation it reads.
    public func update(from old: Ruleset) -> Update? {
        guard maps.count == old.maps.count else { return nil }
        let t = "\(Self.family) \(Self.table)"
        var size = UpdateSize()
        var prepare = "", change = "", cleanup = ""
        let oldChains = Dictionary(old.askChains.map { ($0.id, $0.prefix) }, uniquingKeysWith: { a, _ in a })
        let newIDs = Set(askChains.map(\.id))
        var pendingChanges = 0
        for c in askChains where oldChains[c.id] != c.prefix {
            size.chains += 1
            pendingChanges += 1
            prepare += oldChains[c.id] == nil ? "add chain \(t) \(c.name)\n" : "flush chain \(t) \(c.name)\n"
            for rule in c.rules { prepare += "add rule \(t) \(c.name) \(rule)\n" }
        }
        // A map looked up now and not before, or the reverse: its chains' rules again, in their order.
        let used = Self.usedMaps(maps), wasUsed = Self.usedMaps(old.maps)
        if used != wasUsed {
            let before = Self.chainRules(used: wasUsed), both = Self.chainRules(used: used.union(wasUsed))
            let after = Self.chainRules(used: used)
            func write(_ chain: String, _ rules: [String], into s: inout String) {
                size.chains += 1
                s += "flush chain \(t) \(chain)\n"
                for rule in rules { s += "add rule \(t) \(chain) \(rule)\n" }
            }
            for ((chain, was), ((_, union), (_, now))) in zip(before, zip(both, after)) {
                if union != was { write(chain, union, into: &prepare) }
                if now != union { write(chain, now, into: &cleanup) }
            }
        }
        if linkElements != old.linkElements {
            size.links = true
            change += "flush map \(t) links\n"
            if !linkElements.isEmpty { change += "add element \(t) links { " + linkElements.joined(separator: ", ") + " }\n" }
        }
        var additions = ""
        for (new, was) in zip(maps, old.maps) {
            guard new.name == was.name else { return nil }
            guard new.elements != was.elements else { continue }
            let before = Dictionary(was.elements.map { ($0.key, $0.verdict) }, uniquingKeysWith: { a, _ in a })
            let after = Dictionary(new.elements.map { ($0.key, $0.verdict) }, uniquingKeysWith: { a, _ in a })
            var deleted: [String] = []
            for e in was.elements where after[e.key] != e.verdict {
                // Deleting by path needs the path to resolve to the id the element holds, as it did at this build.
                if case let .cgroup(path, id) = e.key, cgroupIDs[path] != id {
                    if case .ask = e.verdict { return nil }
                    size.stale += 1
                    continue
                }
                deleted.append(e.key.text)
            }
            let added = new.elements.filter { before[$0.key] != $0.verdict }.map(\.text)
            size.elements += deleted.count + added.count
            if !deleted.isEmpty { change += "delete element \(t) \(new.name) { " + deleted.joined(separator: ", ") + " }\n" }
            if !added.isEmpty { additions += "add element \(t) \(new.name) { " + added.joined(separator: ", ") + " }\n" }
        }
        change += additions
        for c in old.askChains where !newIDs.contains(c.id) {
            size.chains += 1
            pendingChanges += 1
            cleanup += "delete chain \(t) \(c.name)\n"
        }
        // Past about half the table, one load of the whole is no slower and leaves nothing to chance. (Writing a
        // chain's lookups again is a few rules, whatever the table's size.)
        guard size.elements + pendingChanges <= (elements + pendingChains) / 2 + 16 else { return nil }
        return Update(transactions: [prepare, change, cleanup].filter { !$0.isEmpty }, size: size)
    }
}
