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

    /// As nft writes a mark: `0x` and 8 hexadecimal digits, in a string small enough to need no allocation (a
    /// whole build of 10,001 apps writes tens of thousands).
    static func text(_ tag: UInt32) -> String {
        String(unsafeUninitializedCapacity: 10) { b in
            b[0] = UInt8(ascii: "0")
            b[1] = UInt8(ascii: "x")
            writeHex(tag, into: b, at: 2)
            return 10
        }
    }

    /// The 8 hexadecimal digits of `tag` (lowercase) at `b[at...]`.
    static func writeHex(_ tag: UInt32, into b: UnsafeMutableBufferPointer<UInt8>, at: Int) {
        for i in 0..<8 {
            let d = UInt8(truncatingIfNeeded: tag >> UInt32(28 - 4 * i)) & 0xF
            b[at + i] = d < 10 ? UInt8(ascii: "0") + d : UInt8(ascii: "a") + d - 10
        }
    }

    /// The 8 hexadecimal digits alone (what chain and quota names carry).
    static func hex(_ tag: UInt32) -> String {
        String(unsafeUninitializedCapacity: 8) { b in
            writeHex(tag, into: b, at: 0)
            return 8
        }
    }
}
