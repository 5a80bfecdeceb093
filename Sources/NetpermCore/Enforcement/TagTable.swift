// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// Every app's connection tag (ConnectionTags), kept for as long as the app is in the policy: the state directory's
/// `tags` file, read at start before the first rules, written whenever a policy adds an app. An app keeps its tag
/// whatever is added or removed around it (a tag taken by another app's name's hash moved it, and with it that
/// app's connections and counted bytes); a removed app's tag stays reserved, so that its connections still in
/// conntrack are not taken for an app added after it, up to `retained` names.
public struct TagTable: Equatable, Sendable {
    public private(set) var tags: [String: UInt32] = [:]
    /// Names no longer in the policy whose tags stay reserved, at most: beyond, the first in name order go.
    static let retained = 65536

    public init() {}

    /// The table for a policy of `names`: each name already here keeps its tag; a new one takes its name's hash
    /// (ConnectionTags), or on a collision the next free value, in name order. Deterministic: a crash before the
    /// file is written assigns the same tags again from the same file.
    public func assigning(_ names: [String]) -> TagTable {
        var t = self
        let current = Set(names)
        var taken = Set(tags.values)
        for name in current.sorted() where t.tags[name] == nil {
            var v = ConnectionTags.hash(name)
            while taken.contains(ConnectionTags.base | v) { v = (v &+ 1) & ConnectionTags.mask }
            taken.insert(ConnectionTags.base | v)
            t.tags[name] = ConnectionTags.base | v
        }
        let gone = t.tags.keys.filter { !current.contains($0) }
        if gone.count > Self.retained {
            for name in gone.sorted().prefix(gone.count - Self.retained) { t.tags[name] = nil }
        }
        return t
    }

    /// The tags of `names` alone.
    public func tags(of names: [String]) -> [String: UInt32] {
        var out: [String: UInt32] = [:]
        out.reserveCapacity(names.count)
        for n in names { if let t = tags[n] { out[n] = t } }
        return out
    }

    static let fileVersion = 1

    /// `version 1`, then `TAG NAME` per line, in tag order.
    public func encoded() -> String {
        var s = "# netpermd: each app's connection tag; written by the daemon\nversion \(Self.fileVersion)\n"
        for (name, tag) in tags.sorted(by: { $0.value < $1.value }) { s += ConnectionTags.text(tag) + " " + name + "\n" }
        return s
    }

    public static func parse(_ text: String, path: String) throws(ConfigError) -> TagTable {
        var table = TagTable()
        var seen: Set<UInt32> = []
        var line = 0
        func fail(_ message: String) -> ConfigError { ConfigError(path: path, line: line, message: message) }
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            line += 1
            if raw.isEmpty || raw.hasPrefix("#") { continue }
            if raw.hasPrefix("version ") {
                guard raw == "version \(fileVersion)" else { throw fail("unknown \(ConfigError.quote(String(raw)))") }
                continue
            }
            guard let space = raw.firstIndex(of: " "), raw.hasPrefix("0x"),
                  let tag = UInt32(raw[raw.index(raw.startIndex, offsetBy: 2)..<space], radix: 16),
                  tag & ~ConnectionTags.mask == ConnectionTags.base else {
                throw fail("expected TAG NAME, TAG a tag (0x6e800000-0x6effffff)")
            }
            let name = String(raw[raw.index(after: space)...])
            guard !name.isEmpty, table.tags[name] == nil, seen.insert(tag).inserted else {
                throw fail("a name or tag twice: \(ConfigError.quote(String(raw)))")
            }
            table.tags[name] = tag
        }
        return table
    }
}
