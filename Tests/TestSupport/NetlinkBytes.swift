// SPDX-License-Identifier: LGPL-2.1-or-later
/// Netlink messages as bytes, for the parsers' tests (rtnetlink, nl80211, NFLOG, nf_tables): integers in the
/// kernel's byte order, attributes (struct nlattr: length with its header, type, payload padded to 4 bytes), nested
/// ones, NUL-terminated strings, and the message header (struct nlmsghdr) around a family's header and attributes.
public enum NetlinkBytes {
    /// NLA_F_NESTED.
    public static let nested: UInt16 = 0x8000

    public static func le<T: FixedWidthInteger>(_ v: T) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }
    public static func be<T: FixedWidthInteger>(_ v: T) -> [UInt8] { withUnsafeBytes(of: v.bigEndian) { Array($0) } }

    public static func attr(_ type: UInt16, _ payload: [UInt8]) -> [UInt8] {
        var b = le(UInt16(4 + payload.count)) + le(type) + payload
        while b.count % 4 != 0 { b.append(0) }
        return b
    }

    public static func nest(_ type: UInt16, _ inner: [[UInt8]]) -> [UInt8] { attr(type | nested, inner.flatMap { $0 }) }

    public static func string(_ s: String) -> [UInt8] { Array(s.utf8) + [0] }

    /// struct nlmsghdr { u32 len; u16 type; u16 flags; u32 seq; u32 pid }, then `body`.
    public static func message(type: UInt16, flags: UInt16 = 0, sequence: UInt32 = 0, port: UInt32 = 0,
                               _ body: [UInt8]) -> [UInt8] {
        le(UInt32(16 + body.count)) + le(type) + le(flags) + le(sequence) + le(port) + body
    }
}
