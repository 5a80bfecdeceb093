// SPDX-License-Identifier: LGPL-2.1-or-later
/// A transaction of `Ruleset.update(from:)` that only changes map elements and deletes chains, read back from its
/// text into what it changes: so that the edge can send it to the kernel as nf_tables messages of its own
/// (NEWSETELEM, DELSETELEM, DELCHAIN in one batch) instead of through libnftables, which reads the whole table
/// (13,000 chains with 10,001 apps: 11-18 ms) before it runs even one command. The text stays what the engine
/// decides and what the tests compare; this is only its other spelling. Any other command (a chain's rules, a new
/// chain) leaves the transaction to libnftables (`parse` is nil).
public struct ElementChanges: Equatable, Sendable {
    public enum Command: Equatable, Sendable {
        /// `flush map`: every element of the map goes.
        case flush(map: String)
        case add(map: String, elements: [Element])
        case delete(map: String, keys: [Key])
        case deleteChain(String)
    }

    /// A key as the map's type has it: a uid or a connection's tag (`uid`, `mark`: a host-order u32), a link's name
    /// (`ifname`), a unit cgroup's path as nft takes it (`cgroupsv2`: the edge resolves it to the cgroup's id, as
    /// nft does, when it sends the change).
    public enum Key: Equatable, Sendable {
        case number(UInt32)
        case ifname(String)
        case cgroup(String)
        /// A unit cgroup by its id, as the map holds it: how a cgroup just made is named (Engine+FreshUnits), with
        /// no path to resolve on the way.
        case cgroupID(UInt64)
    }

    public enum Value: Equatable, Sendable {
        case accept
        /// `return`
        case pass
        case goto(String)
        /// The tag a `tag_*` map gives a connection.
        case mark(UInt32)
    }

    public struct Element: Equatable, Sendable {
        public var key: Key
        public var value: Value
        public init(key: Key, value: Value) { self.key = key; self.value = value }
    }

    public var commands: [Command]
    public init(commands: [Command]) { self.commands = commands }

    /// The commands of `script` if each of its lines is one of those `update(from:)` writes for elements and chains
    /// that go, in table `inet netpermd`; nil for anything else.
    public static func parse(_ script: String) -> ElementChanges? {
        let table = "\(Ruleset.family) \(Ruleset.table) "
        var commands: [Command] = []
        for line in script.split(separator: "\n", omittingEmptySubsequences: true) {
            if let map = after(line, "flush map " + table) {
                guard isName(map) else { return nil }
                commands.append(.flush(map: String(map)))
            } else if let chain = after(line, "delete chain " + table) {
                guard isName(chain) else { return nil }
                commands.append(.deleteChain(String(chain)))
            } else if let rest = after(line, "add element " + table) {
                guard let (map, items) = braced(rest) else { return nil }
                var elements: [Element] = []
                for item in items {
                    let parts = split(item, " : ")
                    guard parts.count == 2, let key = key(String(parts[0]), map: map), let value = value(String(parts[1]))
                    else { return nil }
                    elements.append(Element(key: key, value: value))
                }
                commands.append(.add(map: map, elements: elements))
            } else if let rest = after(line, "delete element " + table) {
                guard let (map, items) = braced(rest) else { return nil }
                var keys: [Key] = []
                for item in items {
                    guard let k = key(String(item), map: map) else { return nil }
                    keys.append(k)
                }
                commands.append(.delete(map: map, keys: keys))
            } else {
                return nil
            }
        }
        return commands.isEmpty ? nil : ElementChanges(commands: commands)
    }

    private static func after(_ line: Substring, _ prefix: String) -> Substring? {
        line.hasPrefix(prefix) ? line.dropFirst(prefix.count) : nil
    }

    /// Names the rules give maps and chains: letters, digits, `_`.
    private static func isName<S: StringProtocol>(_ s: S) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x5F }
    }

    /// `NAME { a, b }`: the name and the items. Nothing the rules quote holds a space (`Ruleset.isSafe`), so `, `
    /// only ever separates items.
    private static func braced(_ rest: Substring) -> (String, [Substring])? {
        let halves = split(rest, " { ")
        guard halves.count == 2, isName(halves[0]), halves[1].hasSuffix(" }") else { return nil }
        let items = split(halves[1].dropLast(2), ", ")
        guard !items.contains(where: { $0.isEmpty }) else { return nil }
        return (String(halves[0]), items)
    }

    /// `s` cut at each `separator` (no Foundation here).
    private static func split(_ s: Substring, _ separator: String) -> [Substring] {
        let sep = Array(separator.utf8), u = s.utf8
        var parts: [Substring] = [], start = u.startIndex, i = u.startIndex
        while i != u.endIndex {
            var j = i, k = 0
            while k < sep.count, j != u.endIndex, u[j] == sep[k] { j = u.index(after: j); k += 1 }
            if k == sep.count {
                parts.append(Substring(u[start..<i]))
                start = j
                i = j
            } else {
                i = u.index(after: i)
            }
        }
        parts.append(Substring(u[start..<u.endIndex]))
        return parts
    }

    private static func key(_ text: String, map: String) -> Key? {
        if text.hasPrefix("\""), text.hasSuffix("\""), text.utf8.count > 2 {
            let inner = String(text.dropFirst().dropLast())
            guard !inner.contains("\"") else { return nil }
            return map == "links" ? .ifname(inner) : .cgroup(inner)
        }
        return number(text).map(Key.number)
    }

    private static func value(_ text: String) -> Value? {
        switch text {
        case "accept": return .accept
        case "return": return .pass
        default:
            if text.hasPrefix("goto ") {
                let chain = text.dropFirst(5)
                return isName(chain) ? .goto(String(chain)) : nil
            }
            return text.hasPrefix("0x") ? number(text).map(Value.mark) : nil
        }
    }

    /// Decimal (a uid) or `0x` hexadecimal (a tag, as `ConnectionTags.text` writes it).
    private static func number(_ text: String) -> UInt32? {
        text.hasPrefix("0x") ? UInt32(text.dropFirst(2), radix: 16) : UInt32(text)
    }
}
