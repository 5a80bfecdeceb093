// SPDX-License-Identifier: LGPL-2.1-or-later
/// An IP address a client names (REACH): "192.0.2.1", "2001:db8::1", "::ffff:192.0.2.1". Parsed here, without the C
/// library, so the request parser can refuse a bad one in its own words; no zone ("%wlan0") and no port: a route is
/// looked up for the address alone.
public struct IPAddress: Equatable, Hashable, Sendable {
    public var family: AddressFamily
    /// 4 or 16 bytes, network order.
    public var bytes: [UInt8]

    public init?(_ text: String) {
        let u = Array(text.utf8)
        if let v4 = Self.ipv4(u[...]) {
            family = .ipv4; bytes = v4
        } else if let v6 = Self.ipv6(u[...]) {
            family = .ipv6; bytes = v6
        } else {
            return nil
        }
    }

    /// Four decimal octets, each 0-255 without leading zeros (which inet_aton would read as octal).
    static func ipv4(_ s: ArraySlice<UInt8>) -> [UInt8]? {
        let parts = s.split(separator: 0x2E, omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var out: [UInt8] = []
        for p in parts {
            guard (1...3).contains(p.count), p.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  p.count == 1 || p.first != 0x30 else { return nil }
            let n = p.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard n <= 255 else { return nil }
            out.append(UInt8(n))
        }
        return out
    }

    /// Eight groups of 1-4 hex digits, one `::` for a run of zero groups, the last 32 bits possibly an IPv4 address.
    static func ipv6(_ s: ArraySlice<UInt8>) -> [UInt8]? {
        guard s.count >= 2, s.count <= 45 else { return nil }
        var head: [UInt16] = [], tail: [UInt16] = []
        var gap = false
        var rest = s
        if rest.starts(with: [0x3A, 0x3A]) {
            gap = true
            rest = rest.dropFirst(2)
        } else if rest.first == 0x3A {
            return nil
        }
        while !rest.isEmpty {
            let end = rest.firstIndex(of: 0x3A) ?? rest.endIndex
            let group = rest[rest.startIndex..<end]
            if end == rest.endIndex, group.contains(0x2E) {
                guard let v4 = ipv4(group) else { return nil }
                let words = [UInt16(v4[0]) << 8 | UInt16(v4[1]), UInt16(v4[2]) << 8 | UInt16(v4[3])]
                if gap { tail += words } else { head += words }
                rest = rest[end...]
                break
            }
            guard (1...4).contains(group.count), let n = hex(group) else { return nil }
            if gap { tail.append(n) } else { head.append(n) }
            rest = rest[end...]
            if rest.starts(with: [0x3A, 0x3A]) {
                guard !gap else { return nil }
                gap = true
                rest = rest.dropFirst(2)
            } else if rest.first == 0x3A {
                rest = rest.dropFirst()
                guard !rest.isEmpty else { return nil }
            }
        }
        let count = head.count + tail.count
        guard gap ? count <= 7 : count == 8 else { return nil }
        let words = head + [UInt16](repeating: 0, count: 8 - count) + tail
        return words.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    private static func hex(_ s: ArraySlice<UInt8>) -> UInt16? {
        var n: UInt16 = 0
        for c in s {
            let d: UInt8
            switch c {
            case 0x30...0x39: d = c - 0x30
            case 0x41...0x46: d = c - 0x41 + 10
            case 0x61...0x66: d = c - 0x61 + 10
            default: return nil
            }
            n = n << 4 | UInt16(d)
        }
        return n
    }
}
