// SPDX-License-Identifier: LGPL-2.1-or-later
/// Sizes as the policy writes them (`MeteredBudget=200M`): bytes, or a number with a suffix of powers of 1024, as
/// systemd's sizes are (`K`, `M`, `G`, `T`; `KiB`... and `KB`... mean the same), a fraction allowed (`1.5G`).
public enum ByteSize {
    static let suffixes: [(letter: UInt8, shift: Int)] = [(0x4B, 10), (0x4D, 20), (0x47, 30), (0x54, 40)]

    /// nil for anything else: negative, words, more than 2^62 bytes.
    public static func parse(_ text: String) -> UInt64? {
        var s = Array(text.utf8)
        guard !s.isEmpty else { return nil }
        if s.last == 0x42 { s.removeLast() }                                       // B
        if s.last == 0x69, s.count >= 2, suffixes.contains(where: { $0.letter == s[s.count - 2] }) { s.removeLast() }
        var shift = 0
        if let last = s.last, let suffix = suffixes.first(where: { $0.letter == last || $0.letter | 0x20 == last }) {
            shift = suffix.shift
            s.removeLast()
        }
        let parts = s.split(separator: 0x2E, maxSplits: 1, omittingEmptySubsequences: false)
        guard !s.isEmpty, parts.allSatisfy({ $0.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }), !parts[0].isEmpty,
              parts[0].count <= 19, let whole = UInt64(String(decoding: parts[0], as: UTF8.self)) else { return nil }
        guard whole <= (1 << 62) >> shift else { return nil }
        var bytes = whole << shift
        if parts.count == 2 {
            // A fraction of the unit, to the byte: "1.5K" is 1536.
            guard !parts[1].isEmpty, parts[1].count <= 9, shift > 0 else { return nil }
            let digits = UInt64(String(decoding: parts[1], as: UTF8.self))!
            var scale: UInt64 = 1
            for _ in 0..<parts[1].count { scale *= 10 }
            bytes += (digits << shift) / scale
        }
        return bytes
    }

    /// "200 MiB", "1.5 GiB", "512 B": what people read (one decimal below 10 of a unit, as phones show it); the
    /// exact number is in the JSON.
    public static func text(_ bytes: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
        var i = 0
        while i < units.count - 1, bytes >> (10 * (i + 1)) > 0 { i += 1 }
        guard i > 0 else { return "\(bytes) B" }
        let shift = UInt64(10 * i)
        var whole = bytes >> shift
        let rest = bytes & ((1 << shift) - 1)
        // Tenths of the unit, rounded half up; the rest is below 2^60, so ten times it fits.
        var tenths = (rest * 10 + (1 << (shift - 1))) >> shift
        if tenths == 10 { whole += 1; tenths = 0 }
        if whole >= 10 { return "\(whole + (tenths >= 5 ? 1 : 0)) \(units[i])" }
        return tenths == 0 ? "\(whole) \(units[i])" : "\(whole).\(tenths) \(units[i])"
    }
}
