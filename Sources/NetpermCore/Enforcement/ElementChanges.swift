// SPDX-License-Identifier: LGPL-2.1-or-later
/// A transaction that only changes map elements and deletes chains (`RuleTransaction.elements`, units named as they
/// are made): what the edge sends to the kernel as nf_tables messages of its own (NEWSETELEM, DELSETELEM, DELCHAIN in
/// one batch) instead of through libnftables, which reads the whole table (13,000 chains with 10,001 apps: 11-18 ms)
/// before it runs even one command.
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
    public enum Key: Hashable, Sendable {
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
}
