// SPDX-License-Identifier: LGPL-2.1-or-later

/// The key of the prompt ids' permutation: 128 bits the daemon draws at start. `none` (the tests') leaves ids 1, 2, ...
public struct PromptIDKey: Sendable, Equatable {
    public var k0: UInt64
    public var k1: UInt64
    public init(_ k0: UInt64, _ k1: UInt64) { self.k0 = k0; self.k1 = k1 }
    public static let none = PromptIDKey(0, 0)

    public static func random() -> PromptIDKey {
        var g = SystemRandomNumberGenerator()
        return PromptIDKey(g.next(), g.next())
    }
}

/// Prompt ids: the count of prompts raised, through a permutation of 31 bits keyed by 128 secret bits. Every user
/// sees the ids of their own prompts only; a counter, or one mixed by steps anyone can undo (the key only XORed
/// in), told them how many others were asked between two of their own. Here every step is keyed: an 8-round
/// Feistel network on 32 bits whose round function is SipHash-2-4 (a keyed pseudorandom function), walked again
/// while the result is above 31 bits (so a JSON number every client reads), which keeps it a bijection: distinct
/// counts, distinct ids.
enum PromptIDs {
    static func permuted(_ n: UInt32, key: PromptIDKey) -> UInt32 {
        guard key != .none else { return n }
        var x = n & 0x7FFF_FFFF
        repeat { x = feistel(x, key) } while x > 0x7FFF_FFFF
        return x
    }

    private static func feistel(_ x: UInt32, _ key: PromptIDKey) -> UInt32 {
        var left = UInt16(truncatingIfNeeded: x >> 16), right = UInt16(truncatingIfNeeded: x)
        for round in 0..<8 as Range<UInt64> {
            let f = UInt16(truncatingIfNeeded: sipHash24(key, round << 16 | UInt64(right)))
            (left, right) = (right, left ^ f)
        }
        return UInt32(left) << 16 | UInt32(right)
    }

    /// SipHash-2-4 of one 64-bit word (little-endian, as the algorithm reads an 8-byte message).
    static func sipHash24(_ key: PromptIDKey, _ m: UInt64) -> UInt64 {
        var s = SipState(key)
        // The message word, then the last block: the length (8) in its top byte.
        s.compress(m)
        s.compress(UInt64(8) << 56)
        s.v2 ^= 0xFF
        s.round(); s.round(); s.round(); s.round()
        return s.v0 ^ s.v1 ^ s.v2 ^ s.v3
    }

    /// SipHash's four words. A struct with mutating steps, not a function capturing them: a debug build boxed the
    /// captured words on the heap for every hash (a prompt id is 16-32 hashes; the tests' 200,000 ids took 16 s).
    private struct SipState {
        var v0, v1, v2, v3: UInt64

        init(_ key: PromptIDKey) {
            v0 = key.k0 ^ 0x736F_6D65_7073_6575; v1 = key.k1 ^ 0x646F_7261_6E64_6F6D
            v2 = key.k0 ^ 0x6C79_6765_6E65_7261; v3 = key.k1 ^ 0x7465_6462_7974_6573
        }

        mutating func compress(_ block: UInt64) {
            v3 ^= block
            round(); round()
            v0 ^= block
        }

        mutating func round() {
            v0 &+= v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32)
            v2 &+= v3; v3 = rotl(v3, 16); v3 ^= v2
            v0 &+= v3; v3 = rotl(v3, 21); v3 ^= v0
            v2 &+= v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32)
        }
    }

    private static func rotl(_ x: UInt64, _ b: UInt64) -> UInt64 { x << b | x >> (64 - b) }
}
