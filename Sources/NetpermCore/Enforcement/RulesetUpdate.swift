/// The parts of a `Ruleset` that depend on the apps, kept apart from its text so that two builds can be compared
/// element by element: a decision or a policy change that moves a few apps' verdicts becomes a transaction of a
/// few `delete element` / `add element` commands, instead of the whole table of 10,000 apps (about 13,000 chains
/// and 50,000 elements took 0.7-1.5 s to load, whoever ran it; a few elements take milliseconds).
extension Ruleset {
    /// One verdict map (`uid_wwan`, `unit2_wifi`, ...) and its elements, in the text's order.
    struct VerdictMap: Equatable, Sendable {
        var name: String
        /// nft's key type: `uid` or `cgroupsv2`.
        var key: String
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

        var text: String {
            switch self {
            case let .uid(u): return String(u)
            case let .cgroup(path, _): return "\"" + path + "\""
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

        var text: String {
            switch self {
            case .accept: return "accept"
            case .pass: return "return"
            case .deny: return "goto deny"
            case let .ask(id): return "goto " + id.name
            }
        }
    }

    /// The chain of an app (by its index in the policy) and an undecided `ask` kind.
    struct AskChain: Equatable, Sendable {
        struct ID: Hashable, Sendable {
            var app: Int
            var kind: PolicyDimension
            var name: String { "ask_\(app)_\(kind.rawValue)" }
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

    /// The script that turns the rules `old` put in force into these, as one transaction that touches only what
    /// differs: the `links` map (flushed and filled again), map elements (deleted, added; a changed verdict is both),
    /// pending apps' chains (added, filled again when their prefix changed, deleted once no element names them).
    /// The element of a unit cgroup that went or was made again stays (`UpdateSize.stale`): nft names a cgroup by
    /// its path and resolves it when it loads, so it cannot be deleted. nil when the whole table must be loaded
    /// instead: such an element names a pending app's chain (which could then not be deleted, nor reused), or the
    /// change is so large that loading the table is as cheap. A map that gains its first element or loses its last
    /// has its lookup added to its chain or taken out of it: the chain is flushed and written again, after the
    /// elements. Empty when nothing differs.
    public func update(from old: Ruleset) -> (script: String, size: UpdateSize)? {
        guard maps.count == old.maps.count else { return nil }
        let t = "\(Self.family) \(Self.table)"
        var size = UpdateSize()
        var s = ""
        if linkElements != old.linkElements {
            size.links = true
            s += "flush map \(t) links\n"
            if !linkElements.isEmpty { s += "add element \(t) links { " + linkElements.joined(separator: ", ") + " }\n" }
        }
        // Chains first, so that the elements added can name them; chains gone last, once no element does.
        let oldChains = Dictionary(old.askChains.map { ($0.id, $0.prefix) }, uniquingKeysWith: { a, _ in a })
        let newIDs = Set(askChains.map(\.id))
        for c in askChains where oldChains[c.id] != c.prefix {
            size.chains += 1
            s += oldChains[c.id] == nil ? "add chain \(t) \(c.name)\n" : "flush chain \(t) \(c.name)\n"
            for rule in c.rules { s += "add rule \(t) \(c.name) \(rule)\n" }
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
            if !deleted.isEmpty { s += "delete element \(t) \(new.name) { " + deleted.joined(separator: ", ") + " }\n" }
            if !added.isEmpty { additions += "add element \(t) \(new.name) { " + added.joined(separator: ", ") + " }\n" }
        }
        s += additions
        // A map looked up now and not before, or the reverse: its chain's rules again, in their order.
        let used = Self.usedMaps(maps), wasUsed = Self.usedMaps(old.maps)
        if used != wasUsed {
            for k in Self.dimensions {
                let rules = Self.lookups(k, used: used)
                guard rules != Self.lookups(k, used: wasUsed) else { continue }
                size.chains += 1
                s += "flush chain \(t) \(Self.chainName(k))\n"
                for rule in rules { s += "add rule \(t) \(Self.chainName(k)) \(rule)\n" }
            }
        }
        for c in old.askChains where !newIDs.contains(c.id) {
            size.chains += 1
            s += "delete chain \(t) \(c.name)\n"
        }
        // Past about half the table, one load of the whole is no slower and leaves nothing to chance.
        guard size.elements + size.chains <= (elements + pendingChains) / 2 + 16 else { return nil }
        return (s, size)
    }
}
