// SPDX-License-Identifier: LGPL-2.1-or-later
/// A DNS name as the report shows, logs and stores it. Names come from packets anyone on the path may forge, so every
/// byte outside printable ASCII (and the space, the dot inside a label, the backslash) is written `\xNN`, letters
/// are lowercased (DNS compares without case), and a name longer than DNS's own bound of 253 characters as written
/// is refused: the address is shown instead.
public enum DNSName {
    public static let maxLength = 253

    /// The labels as text, or nil when there are none, one is empty (no host has such a name, and the file could not
    /// hold it) or the text is too long.
    public static func text(labels: [ArraySlice<UInt8>]) -> String? {
        guard !labels.isEmpty, !labels.contains(where: \.isEmpty) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for (i, label) in labels.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ".")) }
            for b in label {
                switch b {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): out.append(b + 32)
                case 0x21...0x7E where b != UInt8(ascii: ".") && b != UInt8(ascii: "\\"): out.append(b)
                default: out += Array("\\x".utf8) + hex(b)
                }
                if out.count > maxLength { return nil }
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Printable ASCII without spaces, non-empty and within the bound: what the file may hold as a host or address.
    public static func isShowable(_ s: String) -> Bool {
        let u = s.utf8
        return !u.isEmpty && u.count <= maxLength && u.allSatisfy { (0x21...0x7E).contains($0) }
    }

    private static func hex(_ b: UInt8) -> [UInt8] {
        let d = Array("0123456789abcdef".utf8)
        return [d[Int(b >> 4)], d[Int(b & 0xF)]]
    }
}
