// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// A piece of the ruleset's text that appends itself to the text being built (see `MapElement.write`); `text` is the
/// same piece on its own.
protocol TextWriting {
    func write(to t: inout String)
}

extension TextWriting {
    var text: String {
        var t = ""
        write(to: &t)
        return t
    }
}

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

    struct MapElement: Equatable, Sendable, TextWriting {
        var key: Key
        var verdict: MapVerdict

        /// Appended piece by piece: a build writes every element of 10,001 apps, an intermediate string each cost a
        /// tenth of its time.
        func write(to t: inout String) {
            key.write(to: &t)
            t += " : "
            verdict.write(to: &t)
        }
    }

    enum Key: Hashable, Sendable, TextWriting {
        case uid(UInt32)
        /// A unit cgroup's path as nft takes it, and the id nft turns it into when it loads it: a cgroup made again
        /// at the same path is another key.
        case cgroup(String, UInt64)
        /// A connection's tag (ConnectionTags).
        case tag(UInt32)
        /// A link's name (the `links` map).
        case ifname(String)

        func write(to t: inout String) {
            switch self {
            case let .uid(u): t += String(u)
            case let .cgroup(path, _), let .ifname(path):
                t += "\""
                t += path
                t += "\""
            case let .tag(tag): t += ConnectionTags.text(tag)
            }
        }
    }

    enum MapVerdict: Equatable, Sendable, TextWriting {
        case accept
        /// `return`: Metered= or Roaming= allows a unit; its kind is checked next.
        case pass
        case deny
        /// An undecided `ask`: the app's chain for that kind, which logs before it rejects.
        case ask(AskChain.ID)
        /// Not a verdict: the tag a connection of this uid or unit gets.
        case mark(UInt32)
        /// A link's chain (`kind_wifi`, `metered_wwan`, ...).
        case chain(String)

        func write(to t: inout String) {
            switch self {
            case .accept: t += "accept"
            case .pass: t += "return"
            case .deny: t += "goto deny"
            case let .ask(id):
                t += "goto "
                id.write(to: &t)
            case let .mark(tag): t += ConnectionTags.text(tag)
            case let .chain(c):
                t += "goto "
                t += c
            }
        }
    }

    /// The chain of an app (by its tag: the same whatever the app's place in the policy, so reordering the policy
    /// renames no chain) and an undecided `ask` kind.
    struct AskChain: Equatable, Sendable {
        struct ID: Hashable, Sendable, TextWriting {
            var tag: UInt32
            var kind: PolicyDimension
            var name: String { text }

            func write(to t: inout String) {
                t += "ask_"
                t += ConnectionTags.hex(tag)
                t += "_"
                t += kind.rawValue
            }
        }
        var id: ID
        var prefix: String

        var name: String { id.name }
        /// At most 5 messages a second per app and kind: the daemon needs the first, never one per packet (the engine
        /// raises one prompt); a burst of 5 lets a connect just after another one (TCP, then UDP) be seen.
        var rules: [String] {
            ["limit rate 5/second burst 5 packets log group \(Ruleset.logGroup) prefix \"\(prefix)\"", "goto refuse"]
        }

        /// The chain as the table's text has it (`rules`, appended piece by piece: 13,000 of them in a large policy).
        func write(to t: inout String) {
            t += "\tchain "
            id.write(to: &t)
            t += " {\n\t\tlimit rate 5/second burst 5 packets log group "
            t += Self.logGroupText
            t += " prefix \""
            t += prefix
            t += "\"\n\t\tgoto refuse\n\t}\n"
        }

        private static let logGroupText = String(Ruleset.logGroup)
    }

    /// How much `update(from:)` changes, for the log.
    public struct UpdateSize: Equatable, Sendable {
        /// Whether the `links` map is written again.
        public var links = false
        public var elements = 0
        public var chains = 0
        /// Elements of cgroups that went (or were made again) left in the maps: nft can delete an element only by a
        /// path, which no longer names its id (a descriptor still does: those are deleted). Harmless, as cgroup ids
        /// are never used again; gone at the next load of the whole table.
        public var stale = 0
    }

    /// What `update(from:)` gives: the transactions to run in order (none when nothing differs), and their size.
    public struct Update: Equatable, Sendable {
        public var changes: [RuleTransaction]
        public var size: UpdateSize
        /// Their text, as nft reads it.
        public var transactions: [String] { changes.map(\.text) }
    }

    /// The scripts that turn the rules `old` put in force into these, touching only what differs: the `links` map
    /// (flushed and filled again), map elements (deleted, added; a changed verdict is both, in one transaction),
    /// pending apps' chains (added, filled again when their prefix changed, deleted once no element names them), and
    /// the chains whose lookups follow which maps have elements. The element of a unit cgroup that went or was made
    /// again stays (`UpdateSize.stale`): nft names a cgroup by its path and resolves it when it loads, so it cannot be
    /// deleted. nil when the whole table must be loaded instead: such an element names a pending app's chain (which
    /// could then not be deleted, nor reused), or the change is so large that loading the table is as cheap.
    ///
    /// Never one transaction that changes a chain's rules and the elements that lead to it: the kernel reads a
    /// packet's chains as of the generation it started with and map elements as of now, so a packet racing the commit
    /// could follow a new element into a chain added by the same commit and find it empty (measured: 14 datagrams of
    /// an app pending, then denied, in 150 such changes). Nor one that loosens an element and tightens another: a
    /// packet looks its maps up one after the other while a commit lands, and nf_tables commits a transaction's sets
    /// one by one, so a packet can meet some maps as they were and others as they will be. An app moved from
    /// `uid_wwan` to `uid_metered` (`uid_metered` is looked up first) was in neither for such a packet, which passed
    /// (1 datagram in 5 runs of a SIGHUP storm, 32 in 3,000 such transactions by nft alone); a unit moved from
    /// `Metered=allow`, `WWAN=deny` to the reverse met the old `return` and the new `accept`. So: first the chains
    /// (pending apps' new chains, and the lookups of both builds together); then every element change that refuses
    /// more (`tightens`: an accept or return taken away, a rejection added); then the `links` map; then every change
    /// that refuses less; then the lookups of this build alone and the chains no element names any more. A packet's
    /// verdict only rejects more as an element tightens (the first element found in each of its chains decides, and a
    /// link passes only when every chain it goes through does), so every state a packet can meet in the first half
    /// lies between the old rules and both together, and in the second between both together and the new: each
    /// rejects what the old and the new rules both reject, and passes what both pass (RuleTransactionTests checks
    /// this for random policies, every map looked up as either side of each commit).
    public func update(from old: Ruleset) -> Update? {
        guard maps.count == old.maps.count else { return nil }
        var size = UpdateSize()
        var (prepare, cleanup, pendingChanges) = chainChanges(from: old, size: &size)
        var links: [RuleCommand] = []
        if linkElements != old.linkElements {
            size.links = true
            links.append(.flushMap("links"))
            if !linkElements.isEmpty { links.append(.addElements(map: "links", linkElements)) }
        }
        let limit = (elements + pendingChains) / 2 + 16
        guard let d = elementChanges(from: old, size: &size, pendingChanges: pendingChanges, limit: limit) else { return nil }
        // New elements and those of cgroups gone need no transaction with anything else of their side (a new key was
        // nobody's in that map, a gone cgroup's matches no socket), and the kernel holds every other change to
        // nf_tables (units just made being named: Engine+FreshUnits.swift) while it commits one: past `chunkElements`
        // of them (a scan's thousands under churn), they go after their side's changes of verdicts, a few hundred to
        // a transaction.
        let apart = d.newTighten.count + d.newLoosen.count + d.goneOnes.count > Self.chunkElements
        var firstHalf = Self.commands(d.tighten), secondHalf = Self.commands(d.loosen)
        var firstPieces: [[RuleCommand]] = [], secondPieces: [[RuleCommand]] = []
        if apart {
            firstPieces = Self.chunks(d.newTighten) { .addElements(map: $0, $1) }
            secondPieces = Self.chunks(d.newLoosen) { .addElements(map: $0, $1) } + Self.chunks(d.goneOnes) { .deleteElements(map: $0, $1) }
        } else {
            let order = Dictionary(maps.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { a, _ in a })
            firstHalf = Self.commands(d.tighten + d.newTighten.map { KeyChange(map: $0.map, delete: nil, add: $0.item) }, order: order)
            secondHalf = Self.commands(d.goneOnes.map { KeyChange(map: $0.map, delete: $0.item, add: nil) } + d.loosen
                                       + d.newLoosen.map { KeyChange(map: $0.map, delete: nil, add: $0.item) }, order: order)
        }
        let newIDs = Set(askChains.map(\.id))
        for c in old.askChains where !newIDs.contains(c.id) {
            size.chains += 1
            pendingChanges += 1
            cleanup.append(.deleteChain(c.name))
        }
        // Past about half the table, one load of the whole is no slower and leaves nothing to chance (writing a
        // chain's lookups again is a few rules, whatever the table's size). Units coming and going are not counted:
        // thousands of them churning in a small table would load it whole at every scan, each load holding the
        // kernel and replacing the elements of the units named as they were made (Engine+FreshUnits.swift).
        guard size.elements + pendingChanges - d.unitsCame - d.goneOnes.count <= limit else { return nil }
        // The links map alone, when elements change too: a link moved to another chain must meet elements that
        // already refuse what both sides refuse.
        let elementsChange = !(firstHalf.isEmpty && secondHalf.isEmpty && firstPieces.isEmpty && secondPieces.isEmpty)
        let transactions = [prepare, firstHalf] + firstPieces + (elementsChange ? [links, secondHalf] : [links + secondHalf])
            + secondPieces + [cleanup]
        return Update(changes: transactions.filter { !$0.isEmpty }.map(RuleTransaction.init), size: size)
    }

    /// The chains `update(from:)` writes before the elements (`prepare`: pending apps' new chains, the lookups of
    /// both builds together) and after them (`cleanup`: the lookups of this build alone), and how many pending
    /// apps' chains it adds or fills again.
    private func chainChanges(from old: Ruleset, size: inout UpdateSize)
        -> (prepare: [RuleCommand], cleanup: [RuleCommand], pending: Int) {
        var prepare: [RuleCommand] = [], cleanup: [RuleCommand] = []
        let oldChains = Dictionary(old.askChains.map { ($0.id, $0.prefix) }, uniquingKeysWith: { a, _ in a })
        var pendingChanges = 0
        for c in askChains where oldChains[c.id] != c.prefix {
            size.chains += 1
            pendingChanges += 1
            prepare.append(oldChains[c.id] == nil ? .addChain(c.name) : .flushChain(c.name))
            for rule in c.rules { prepare.append(.addRule(chain: c.name, rule)) }
        }
        // A map looked up now and not before, or the reverse: its chains' rules again, in their order.
        let wasUsed = old.used
        if used != wasUsed {
            let before = Self.chainRules(used: wasUsed), both = Self.chainRules(used: used.union(wasUsed))
            let after = Self.chainRules(used: used)
            func write(_ chain: String, _ rules: [String], into s: inout [RuleCommand]) {
                size.chains += 1
                s.append(.flushChain(chain))
                for rule in rules { s.append(.addRule(chain: chain, rule)) }
            }
            for ((chain, was), ((_, union), (_, now))) in zip(before, zip(both, after)) {
                if union != was { write(chain, union, into: &prepare) }
                if now != union { write(chain, now, into: &cleanup) }
            }
        }
        return (prepare, cleanup, pendingChanges)
    }

    /// The elements' changes from `old`, map by map, each on the side it goes.
    struct ElementDiff {
        var tighten: [KeyChange] = [], loosen: [KeyChange] = []
        /// New keys, and those of cgroups gone: they may go apart (`update(from:)`).
        var newTighten: [(map: String, item: MapElement)] = [], newLoosen: [(map: String, item: MapElement)] = []
        var goneOnes: [(map: String, item: Key)] = []
        var unitsCame = 0
    }

    /// Each key's change (its old element deleted, its new one added, together), on the side it goes: tightening
    /// or loosening. nil when the whole table must be loaded instead (`update(from:)`).
    private func elementChanges(from old: Ruleset, size: inout UpdateSize, pendingChanges: Int, limit: Int) -> ElementDiff? {
        var d = ElementDiff()
        for (new, was) in zip(maps, old.maps) {
            guard new.name == was.name else { return nil }
            guard new.elements != was.elements else { continue }
            let before = Dictionary(was.elements.map { ($0.key, $0.verdict) }, uniquingKeysWith: { a, _ in a })
            let after = Dictionary(new.elements.map { ($0.key, $0.verdict) }, uniquingKeysWith: { a, _ in a })
            for e in was.elements where after[e.key] != e.verdict {
                // Deleting by path needs the path to resolve to the id the element holds, as it did at this build;
                // a descriptor the daemon holds does while the rules in force name it, its cgroup gone or not
                // (UnitCgroups.nftPath), unless its number names another cgroup now.
                if case let .cgroup(path, id) = e.key, cgroupIDs[path] != id {
                    guard cgroupIDs[path] == nil, UnitCgroups.isHandle(path) else {
                        if case .ask = e.verdict { return nil }
                        size.stale += 1
                        continue
                    }
                    // Its cgroup is gone: it matches no socket, whenever it goes.
                    d.goneOnes.append((new.name, e.key))
                    size.elements += 1
                    continue
                }
                let now = after[e.key]
                let change = KeyChange(map: new.name, delete: e.key, add: now.map { MapElement(key: e.key, verdict: $0) })
                size.elements += now == nil ? 1 : 2
                if Self.tightens(from: e.verdict, to: now) { d.tighten.append(change) } else { d.loosen.append(change) }
            }
            for e in new.elements where before[e.key] == nil {
                if case .cgroup = e.key { d.unitsCame += 1 }
                size.elements += 1
                if Self.tightens(from: nil, to: e.verdict) { d.newTighten.append((new.name, e)) } else { d.newLoosen.append((new.name, e)) }
            }
            // What follows only adds to the count below: past the limit already, the whole table is loaded, and a
            // reload that moves every app's verdict is not compared to the end (a fifth of its time on the loop).
            guard size.elements + pendingChanges - d.unitsCame - d.goneOnes.count <= limit else { return nil }
        }
        return d
    }

    /// One key's change in one map: its element in force deleted (if it has one) and its new one added (if it has
    /// one), always in one transaction, so that the map never lacks the key in between.
    struct KeyChange {
        var map: String
        var delete: Key?
        var add: MapElement?
    }

    /// Whether an element going from `old` to `new` (nil: none) makes its lookup refuse more: an accept or a return
    /// decides for the packet, no element leaves it to the lookups after, a rejection refuses it. A change between
    /// two of a rank (a deny and an ask, two tags, two chains) goes first too: it only has to be one change.
    static func tightens(from old: MapVerdict?, to new: MapVerdict?) -> Bool {
        func rank(_ v: MapVerdict?) -> Int {
            guard let v else { return 1 }
            switch v {
            case .accept, .pass: return 0
            case .mark, .chain: return 1
            case .deny, .ask: return 2
            }
        }
        return rank(new) >= rank(old)
    }

    /// `changes` as one transaction's commands: every deletion, then every addition, each map's in one run, in the
    /// maps' order (`order`: each map's place).
    static func commands(_ changes: [KeyChange], order: [String: Int] = [:]) -> [RuleCommand] {
        let changes = order.isEmpty ? changes : changes.enumerated().sorted {
            (order[$0.element.map] ?? 0, $0.offset) < (order[$1.element.map] ?? 0, $1.offset)
        }.map(\.element)
        var deletions: [RuleCommand] = [], additions: [RuleCommand] = []
        var map = "", deleted: [Key] = [], added: [MapElement] = []
        func flush() {
            if !deleted.isEmpty { deletions.append(.deleteElements(map: map, deleted)) }
            if !added.isEmpty { additions.append(.addElements(map: map, added)) }
            deleted = []
            added = []
        }
        for c in changes {
            if c.map != map { flush(); map = c.map }
            if let k = c.delete { deleted.append(k) }
            if let e = c.add { added.append(e) }
        }
        flush()
        return deletions + additions
    }

    /// Elements in a transaction of their own: one nf_tables batch (NftablesElements.maxElements).
    static let chunkElements = 256

    /// `items` (in order) as transactions of commands (`command`: a map's run of items) of at most `chunkElements`
    /// items each.
    static func chunks<Item>(_ items: [(map: String, item: Item)], _ command: (String, [Item]) -> RuleCommand) -> [[RuleCommand]] {
        var transactions: [[RuleCommand]] = [], transaction: [RuleCommand] = [], run: [Item] = [], map = "", count = 0
        func flushRun() {
            if !run.isEmpty { transaction.append(command(map, run)) }
            run = []
        }
        for (m, item) in items {
            if count == chunkElements {
                flushRun()
                transactions.append(transaction)
                transaction = []
                count = 0
            }
            if m != map { flushRun(); map = m }
            run.append(item)
            count += 1
        }
        flushRun()
        if !transaction.isEmpty { transactions.append(transaction) }
        return transactions
    }
}

extension Ruleset {
    /// These rules with the elements of units named as they were made (Engine+FreshUnits.swift) that a build finds
    /// in `build` (by the path it gives them): what the kernel holds, as `update(from:)` compares it, so that a
    /// load does not add again what is there.
    func with(fresh: [(id: UInt64, elements: [UnitElement])], as build: Ruleset) -> Ruleset {
        var paths: [UInt64: String] = [:]
        for (path, id) in build.cgroupIDs { paths[id] = path }
        let asks = Dictionary(askChains.map { ($0.id.name, $0.id) }, uniquingKeysWith: { a, _ in a })
        let index = Dictionary(maps.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { a, _ in a })
        var r = self
        for u in fresh {
            guard let path = paths[u.id] else { continue }
            for e in u.elements {
                let verdict: MapVerdict
                switch e.value {
                case .accept: verdict = .accept
                case .pass: verdict = .pass
                case let .mark(t): verdict = .mark(t)
                case let .goto(chain):
                    if chain == "deny" { verdict = .deny } else if let id = asks[chain] { verdict = .ask(id) } else { continue }
                }
                guard let m = index[e.map] else { continue }
                r.maps[m].elements.append(MapElement(key: .cgroup(path, u.id), verdict: verdict))
            }
        }
        return r
    }
}
