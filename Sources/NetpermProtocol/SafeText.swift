// SPDX-License-Identifier: LGPL-2.1-or-later
/// Text that others wrote (executable paths, app, unit and link names, config lines, messages that quote them),
/// made safe to show on a terminal or to write as one log line. A directory named `ESC[2K ESC[1A \r ... BEL` must
/// not rewrite the prompt an administrator answers, nor a newline forge a line of its own.
public enum SafeText {
    /// What is escaped: C0 controls, DEL, C1 controls (U+0080-009F: a terminal may take U+009B for CSI), the line
    /// and paragraph separators (U+2028-2029), and the bidi controls that reorder what is read (U+202A-202E,
    /// U+2066-2069).
    public static func isUnsafe(_ c: Unicode.Scalar) -> Bool {
        switch c.value {
        case 0..<0x20, 0x7F..<0xA0, 0x2028...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    /// `s` with every unsafe scalar written visibly: `\t`, `\n`, `\r`, `\xNN` for the other C0 controls and DEL,
    /// `\u{NN}` for the rest (`\u{9b}`, `\u{202e}`). A backslash stays as it is, so escaping twice changes nothing.
    /// `keepingNewlines` lets `\n` through, for output whose lines are already ours.
    public static func escape(_ s: some StringProtocol, keepingNewlines: Bool = false) -> String {
        // Most text has nothing to escape: it is returned as it is, without a copy scalar by scalar.
        guard s.unicodeScalars.contains(where: { isUnsafe($0) && !(keepingNewlines && $0 == "\n") }) else {
            return String(s)
        }
        var out = ""
        for c in s.unicodeScalars {
            if keepingNewlines && c == "\n" { out.unicodeScalars.append(c) } else { append(c, to: &out) }
        }
        return out
    }

    /// Bytes that should be UTF-8: as `escape`, and each byte that is not part of a valid sequence as `\xNN`.
    public static func escape(utf8 bytes: some Collection<UInt8>) -> String {
        let b = Array(bytes)
        var out = ""
        var i = 0
        while i < b.count {
            let n = sequenceLength(b, at: i)
            guard n > 0 else {
                out += "\\x" + hex(UInt32(b[i]), width: 2)
                i += 1
                continue
            }
            var v = n == 1 ? UInt32(b[i]) : UInt32(b[i]) & (0xFF >> (n + 1))
            for k in 1..<n { v = v << 6 | UInt32(b[i + k] & 0x3F) }
            append(Unicode.Scalar(v)!, to: &out)
            i += n
        }
        return out
    }

    /// The length of the valid UTF-8 sequence at `i`, or 0 (overlong forms, surrogates and values past U+10FFFF
    /// are invalid, as the standard says).
    private static func sequenceLength(_ b: [UInt8], at i: Int) -> Int {
        let lead = b[i]
        let n: Int, second: ClosedRange<UInt8>
        switch lead {
        case 0..<0x80: return 1
        case 0xC2...0xDF: (n, second) = (2, 0x80...0xBF)
        case 0xE0: (n, second) = (3, 0xA0...0xBF)
        case 0xED: (n, second) = (3, 0x80...0x9F)
        case 0xE1...0xEF: (n, second) = (3, 0x80...0xBF)
        case 0xF0: (n, second) = (4, 0x90...0xBF)
        case 0xF1...0xF3: (n, second) = (4, 0x80...0xBF)
        case 0xF4: (n, second) = (4, 0x80...0x8F)
        default: return 0
        }
        guard i + n <= b.count, second.contains(b[i + 1]) else { return 0 }
        for k in 2..<max(2, n) where !(0x80...0xBF).contains(b[i + k]) { return 0 }
        return n
    }

    /// At most `maxBytes` bytes of `s` escaped, cut between two scalars (never inside an escape), then "..." if
    /// anything was left out. Only what is shown is looked at, so a 10 MB line costs no more than a short one.
    public static func excerpt(_ s: some StringProtocol, maxBytes: Int) -> String {
        var out = ""
        var bytes = 0
        for c in s.unicodeScalars {
            var one = ""
            append(c, to: &one)
            bytes += one.utf8.count
            if bytes > maxBytes { return out + "..." }
            out += one
        }
        return out
    }

    /// How many bytes of a word a message quotes (escaped, before the "..." that says it was cut).
    public static let quoteLimit = 60

    /// `s` in single quotes for a message: at most `quoteLimit` bytes of it, escaped (`excerpt`).
    public static func quote(_ s: some StringProtocol) -> String { "'" + excerpt(s, maxBytes: quoteLimit) + "'" }

    private static func append(_ c: Unicode.Scalar, to out: inout String) {
        guard isUnsafe(c) else {
            out.unicodeScalars.append(c)
            return
        }
        switch c.value {
        case 0x09: out += "\\t"
        case 0x0A: out += "\\n"
        case 0x0D: out += "\\r"
        case 0..<0x20, 0x7F: out += "\\x" + hex(c.value, width: 2)
        default: out += "\\u{" + hex(c.value, width: 1) + "}"
        }
    }

    private static func hex(_ v: UInt32, width: Int) -> String {
        let digits = String(v, radix: 16)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
