// SPDX-License-Identifier: LGPL-2.1-or-later
/// One transaction of the rules as the engine decides it: a change of what differs (`Ruleset.update(from:)`), or
/// a whole table (or its removal) as nft text. `text` is nft's spelling, what libnftables runs and the golden tests
/// compare; `elements` is the same change as nf_tables element messages, when it only changes map elements and
/// deletes chains (the edge sends those itself: libnftables would read the whole table first). Both are made from
/// the same commands, never read back from each other.
public struct RuleTransaction: Equatable, Sendable {
    public let text: String
    public let elements: ElementChanges?

    /// A script as it is: the whole table, its removal, the counting table's.
    public init(whole text: String) {
        self.text = text
        elements = nil
    }

    init(_ commands: [RuleCommand]) {
        var t = ""
        for c in commands { c.write(to: &t) }
        text = t
        var changes: [ElementChanges.Command] = []
        for c in commands {
            guard let e = c.elementChange else { elements = nil; return }
            changes.append(e)
        }
        elements = changes.isEmpty ? nil : ElementChanges(commands: changes)
    }
}

/// One command of a change to table `inet netpermd`.
enum RuleCommand: Equatable, Sendable {
    case addChain(String)
    case flushChain(String)
    case addRule(chain: String, String)
    case deleteChain(String)
    case flushMap(String)
    case addElements(map: String, [Ruleset.MapElement])
    case deleteElements(map: String, [Ruleset.Key])

    func write(to t: inout String) {
        let table = "\(Ruleset.family) \(Ruleset.table)"
        switch self {
        case let .addChain(c): t += "add chain \(table) \(c)\n"
        case let .flushChain(c): t += "flush chain \(table) \(c)\n"
        case let .addRule(c, rule): t += "add rule \(table) \(c) \(rule)\n"
        case let .deleteChain(c): t += "delete chain \(table) \(c)\n"
        case let .flushMap(m): t += "flush map \(table) \(m)\n"
        case let .addElements(m, elements): Self.write("add", m, elements, to: &t) { $1.write(to: &$0) }
        case let .deleteElements(m, keys): Self.write("delete", m, keys, to: &t) { $1.write(to: &$0) }
        }
    }

    /// `VERB element TABLE MAP { a, b }`, each item written in place.
    private static func write<T>(_ verb: String, _ map: String, _ items: [T], to t: inout String,
                                 _ item: (inout String, T) -> Void) {
        t += "\(verb) element \(Ruleset.family) \(Ruleset.table) \(map) { "
        for (i, x) in items.enumerated() {
            if i > 0 { t += ", " }
            item(&t, x)
        }
        t += " }\n"
    }

    /// The command as an element change; nil for a chain's rules.
    var elementChange: ElementChanges.Command? {
        switch self {
        case .addChain, .flushChain, .addRule: return nil
        case let .deleteChain(c): return .deleteChain(c)
        case let .flushMap(m): return .flush(map: m)
        case let .addElements(m, elements):
            return .add(map: m, elements: elements.map { ElementChanges.Element(key: $0.key.change, value: $0.verdict.change) })
        case let .deleteElements(m, keys): return .delete(map: m, keys: keys.map(\.change))
        }
    }
}

extension Ruleset.Key {
    /// The key as the edge sends it.
    var change: ElementChanges.Key {
        switch self {
        case let .uid(u): return .number(u)
        case let .tag(t): return .number(t)
        case let .cgroup(path, _): return .cgroup(path)
        case let .ifname(name): return .ifname(name)
        }
    }
}

extension Ruleset.MapVerdict {
    /// The verdict as the edge sends it.
    var change: ElementChanges.Value {
        switch self {
        case .accept: return .accept
        case .pass: return .pass
        case .deny: return .goto("deny")
        case let .ask(id): return .goto(id.name)
        case let .chain(c): return .goto(c)
        case let .mark(t): return .mark(t)
        }
    }
}
