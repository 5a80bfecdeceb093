// SPDX-License-Identifier: LGPL-2.1-or-later
/// Which of the usage table's quota objects (UsageRules) one is: a budget's (`b_TAG`) or its 80% warning's
/// (`w_TAG`), by the tag of the app whose budget it is. The edges decode the kernel's names into it once (readings,
/// notices) and drop the names that are none of ours, so the engine never reads a name back.
public struct QuotaName: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var tag: UInt32
    /// The 80% warning's quota, not the budget's.
    public var warning: Bool

    public init(tag: UInt32, warning: Bool = false) { self.tag = tag; self.warning = warning }

    /// The object's name in the table: `b_` or `w_`, then the tag in 8 lowercase hex digits (as ConnectionTags
    /// writes it, without `0x`).
    public var nft: String { (warning ? "w_" : "b_") + ConnectionTags.text(tag).dropFirst(2) }

    /// The quota an object's name is; nil for any other name, or one spelled otherwise than `nft` would.
    public init?(nft name: String) {
        let u = name.utf8
        guard u.count == 10, let first = u.first, first == UInt8(ascii: "b") || first == UInt8(ascii: "w"),
              u.dropFirst().first == UInt8(ascii: "_"),
              u.dropFirst(2).allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }),
              let tag = UInt32(name.dropFirst(2), radix: 16) else { return nil }
        self.init(tag: tag, warning: first == UInt8(ascii: "w"))
    }

    public var description: String { nft }

    /// In the order of their names: every budget's, then every warning's, each by tag.
    public static func < (a: QuotaName, b: QuotaName) -> Bool { (a.warning ? 1 : 0, a.tag) < (b.warning ? 1 : 0, b.tag) }
}
