// SPDX-License-Identifier: LGPL-2.1-or-later
/// Which app a connection belongs to, for its whole life: the rules write it into the connection's conntrack mark
/// (`ct mark`) at its first packet, from its socket's owner, and look it up there for the packets whose socket no
/// longer says (docs/ENFORCEMENT.md, "Connections keep their app"): an orphaned TCP socket (`close()`d with data
/// queued) has no file, so `meta skuid` no longer matches, a unit's cgroup can be gone, and a server's SYN-ACK is
/// sent by a request socket, which has no cgroup (its tag is written from the listener's cgroup on the SYN).
///
/// A tag is per app, from its name's hash, and kept (TagTable, in the state directory) for as long as the app is in
/// the policy, so that every build and every process (a restart takes the table over) gives an app the same tag,
/// whatever is added or removed around it: connections tagged by the last process stay attributed.
enum ConnectionTags {
    /// Tags are `base | 23 bits`: an unusual high byte keeps clear of other tools' small marks, and of steering's
    /// socket marks (`0x6e70xxxx`), should a tool copy a connection's mark to its packets.
    static let base: UInt32 = 0x6E80_0000
    static let mask: UInt32 = 0x007F_FFFF

    /// A tag for each app name, distinct, with no table kept (TagTable): what tests and one-off builds use.
    static func assign(_ names: [String]) -> [String: UInt32] { TagTable().assigning(names).tags }

    /// FNV-1a of the name, in the tag's 23 bits: where a new app's tag starts looking.
    static func hash(_ name: String) -> UInt32 {
        var h: UInt32 = 0x811C_9DC5
        for b in name.utf8 { h = (h ^ UInt32(b)) &* 0x0100_0193 }
        return h & mask
    }

    /// As nft writes a mark.
    static func text(_ tag: UInt32) -> String {
        let hex = String(tag, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, 8 - hex.utf8.count)) + hex
    }
}
