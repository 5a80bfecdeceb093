// SPDX-License-Identifier: LGPL-2.1-or-later
/// A DNS answer an app received (RFC 1035), read for what the report needs: the one name asked and the IPv4 and
/// IPv6 addresses the answer section gives (through any CNAMEs: the app asked for the question's name, so that is the
/// name its connection to those addresses is shown under). Anything malformed is nil; every read is bounds-checked,
/// compression pointers may only point backwards and at most 16 deep, and at most `maxAddresses` are taken, so a
/// hostile answer costs a bounded walk over its own bytes.
public struct DNSAnswer: Equatable, Sendable {
    public var name: String
    public var addresses: [String]

    public static let maxAddresses = 32

    public init(name: String, addresses: [String]) { self.name = name; self.addresses = addresses }

    /// From an IPv4 or IPv6 packet carrying UDP (what NFLOG copies): the payload of a datagram from port 53.
    public static func parse(ipPacket p: [UInt8]) -> DNSAnswer? {
        guard let first = p.first else { return nil }
        var udp: Int
        switch first >> 4 {
        case 4:
            udp = Int(first & 0xF) * 4
            guard p.count >= 20, udp >= 20, p[9] == 17 else { return nil }
        case 6:
            // No extension headers: a DNS answer has none in practice, and one that has is not read.
            guard p.count >= 40, p[6] == 17 else { return nil }
            udp = 40
        default:
            return nil
        }
        guard p.count >= udp + 8, p[udp] == 0, p[udp + 1] == 53 else { return nil }
        return parse(message: p[(udp + 8)...])
    }

    public static func parse(message m: ArraySlice<UInt8>) -> DNSAnswer? {
        let m = Array(m)
        guard m.count >= 12 else { return nil }
        let flags = u16(m, 2)
        // A response (QR), not truncated, no error; one question.
        guard flags & 0x8000 != 0, flags & 0x0200 == 0, flags & 0x000F == 0, u16(m, 4) == 1 else { return nil }
        let answers = Int(u16(m, 6))
        var at = 12
        guard let (labels, afterName) = readName(m, at), let name = DNSName.text(labels: labels) else { return nil }
        at = afterName + 4
        var addresses: [String] = []
        for _ in 0..<answers {
            guard let (_, afterOwner) = readName(m, at), afterOwner + 10 <= m.count else { return nil }
            let type = u16(m, afterOwner), cls = u16(m, afterOwner + 2), length = Int(u16(m, afterOwner + 8))
            let data = afterOwner + 10
            guard data + length <= m.count else { return nil }
            if cls == 1, (type == 1 && length == 4) || (type == 28 && length == 16),
               let a = AddressText.text(m[data..<(data + length)]), !addresses.contains(a) {
                addresses.append(a)
                if addresses.count == maxAddresses { break }
            }
            at = data + length
        }
        return addresses.isEmpty ? nil : DNSAnswer(name: name, addresses: addresses)
    }

    private static func u16(_ m: [UInt8], _ i: Int) -> UInt16 { UInt16(m[i]) << 8 | UInt16(m[i + 1]) }

    /// The labels of the name at `start`, and where the bytes after it (in place, not after a pointer) begin.
    private static func readName(_ m: [UInt8], _ start: Int) -> ([ArraySlice<UInt8>], Int)? {
        var labels: [ArraySlice<UInt8>] = []
        var at = start, end: Int?, jumps = 0, total = 0
        while true {
            guard at < m.count else { return nil }
            let len = Int(m[at])
            switch len & 0xC0 {
            case 0:
                if len == 0 { return (labels, end ?? at + 1) }
                guard at + 1 + len <= m.count else { return nil }
                total += len + 1
                guard total <= 255 else { return nil }
                labels.append(m[(at + 1)..<(at + 1 + len)])
                at += 1 + len
            case 0xC0:
                guard at + 1 < m.count else { return nil }
                let target = (len & 0x3F) << 8 | Int(m[at + 1])
                // Backwards only, and few: no loop, no blow-up.
                guard target < at, jumps < 16 else { return nil }
                jumps += 1
                if end == nil { end = at + 2 }
                at = target
            default:
                return nil
            }
        }
    }
}
