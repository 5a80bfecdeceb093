// SPDX-License-Identifier: LGPL-2.1-or-later
/// Backslash escapes of one byte: mountinfo's octal `\040`, systemd unit names' hex `\x2d`.
package enum BackslashEscapes {
    /// Decodes `\` + `marker` + `digits` digits in `radix`. A backslash that starts no valid escape is kept as it
    /// is, or, when `strict`, makes the whole string invalid (nil).
    package static func decode(_ s: String, marker: UInt8? = nil, radix: Int, digits: Int, strict: Bool) -> String? {
        guard s.utf8.contains(UInt8(ascii: "\\")) else { return s }
        let skip = marker == nil ? 1 : 2
        var out: [UInt8] = []
        let b = Array(s.utf8)
        var i = 0
        while i < b.count {
            if b[i] == UInt8(ascii: "\\") {
                if i + skip + digits <= b.count, marker.map({ b[i + 1] == $0 }) ?? true,
                   let v = UInt8(String(decoding: b[(i + skip)..<(i + skip + digits)], as: UTF8.self), radix: radix) {
                    out.append(v)
                    i += skip + digits
                    continue
                }
                if strict { return nil }
            }
            out.append(b[i])
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}
