// SPDX-License-Identifier: LGPL-2.1-or-later
/// An address's bytes as text, as `inet_ntop` writes it (RFC 5952 for IPv6: lowercase, the longest run of two or
/// more zero groups as `::`, the first of equal runs), without the C library, so the DNS parser and the conntrack
/// reader give the report the same spelling for the same address.
public enum AddressText {
    public static func text(_ b: some Collection<UInt8>) -> String? {
        let b = Array(b)
        switch b.count {
        case 4: return ipv4(b)
        case 16: return ipv6(b)
        default: return nil
        }
    }

    /// One string written in place: the conntrack reader spells every new connection's address (10,000 a second
    /// in a flood), and five strings joined cost more than the rest of its reading.
    private static func ipv4(_ b: [UInt8]) -> String {
        String(unsafeUninitializedCapacity: 15) { out in
            var n = 0
            for (i, v) in b.enumerated() {
                if i > 0 { out[n] = UInt8(ascii: "."); n += 1 }
                if v >= 100 { out[n] = 0x30 + v / 100; n += 1 }
                if v >= 10 { out[n] = 0x30 + (v / 10) % 10; n += 1 }
                out[n] = 0x30 + v % 10
                n += 1
            }
            return n
        }
    }

    private static func ipv6(_ b: [UInt8]) -> String {
        let groups = (0..<8).map { UInt16(b[2 * $0]) << 8 | UInt16(b[2 * $0 + 1]) }
        // IPv4-mapped, as inet_ntop writes it.
        if groups[0..<5].allSatisfy({ $0 == 0 }) && groups[5] == 0xFFFF {
            return "::ffff:" + b[12...].map(String.init).joined(separator: ".")
        }
        var best = (start: -1, length: 0)
        var i = 0
        while i < 8 {
            guard groups[i] == 0 else { i += 1; continue }
            var j = i
            while j < 8 && groups[j] == 0 { j += 1 }
            if j - i > best.length && j - i >= 2 { best = (i, j - i) }
            i = j
        }
        func hex(_ r: ArraySlice<UInt16>) -> String { r.map { String($0, radix: 16) }.joined(separator: ":") }
        guard best.start >= 0 else { return hex(groups[...]) }
        return hex(groups[..<best.start]) + "::" + hex(groups[(best.start + best.length)...])
    }
}
