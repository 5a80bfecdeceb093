// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermIO

/// What systemd-networkd records of a link's DHCPv4 lease: /run/systemd/netif/leases/IFINDEX, `KEY=value` lines.
/// networkd writes the server's option 43 (vendor-specific information) there as `VENDOR_SPECIFIC=` in hex;
/// Android's DHCP server puts the ASCII text ANDROID_METERED in it when the phone's uplink is metered.
public struct NetworkdLease: Sendable {
    public let run: String

    public init(run: String = "/run") { self.run = run }

    public func androidMetered(ifindex: Int32) -> Bool {
        guard let text = FD.readText("\(run)/systemd/netif/leases/\(ifindex)") else { return false }
        return Self.androidMetered(leaseText: text)
    }

    static let marker = Array("ANDROID_METERED".utf8)

    static func androidMetered(leaseText: String) -> Bool {
        for line in leaseText.split(separator: "\n") where line.hasPrefix("VENDOR_SPECIFIC=") {
            guard let bytes = hex(line.dropFirst("VENDOR_SPECIFIC=".count)) else { return false }
            return contains(bytes, marker)
        }
        return false
    }

    static func hex(_ s: Substring) -> [UInt8]? {
        let digits = Array(s.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var i = 0
        while i < digits.count {
            guard let hi = nibble(digits[i]), let lo = nibble(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start..<start + needle.count].elementsEqual(needle) {
            return true
        }
        return false
    }
}
