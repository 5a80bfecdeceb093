// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux

/// Netlink's framing as <linux/netlink.h> lays it out, one implementation for every netlink protocol the daemon
/// speaks (rtnetlink, nf_tables, NFLOG): `struct nlmsghdr`, then the family's fixed header, then attributes
/// (`struct nlattr`, whose layout rtnetlink's `struct rtattr` shares), each padded to NLMSG_ALIGNTO. Header fields
/// and attribute headers are in host byte order, as netlink is; only some payloads are big-endian (netfilter's).
public enum Netlink {
    public static let headerSize = MemoryLayout<nlmsghdr>.size
    static let attributeHeaderSize = MemoryLayout<nlattr>.size
    static let alignTo = Int(NLMSG_ALIGNTO)

    public static let flagRequest = UInt16(NLM_F_REQUEST)
    public static let flagAck = UInt16(NLM_F_ACK)
    public static let flagDump = UInt16(NLM_F_DUMP)
    public static let flagCreate = UInt16(NLM_F_CREATE)
    public static let flagExclusive = UInt16(NLM_F_EXCL)
    /// On a dump's message: the table changed while it was read.
    public static let flagDumpInterrupted = UInt16(NLM_F_DUMP_INTR)
    public static let typeError = UInt16(NLMSG_ERROR)
    public static let typeDone = UInt16(NLMSG_DONE)

    static func align(_ n: Int) -> Int { (n + alignTo - 1) & ~(alignTo - 1) }

    /// A payload as a host-order u32 (rtnetlink's), nil when shorter.
    public static func u32(_ b: UnsafeRawBufferPointer) -> UInt32? { b.count >= 4 ? b.loadUnaligned(as: UInt32.self) : nil }
    /// A payload as a big-endian u32 (netfilter's).
    public static func bigEndianU32(_ b: UnsafeRawBufferPointer) -> UInt32? { u32(b).map { UInt32(bigEndian: $0) } }
    /// A payload as text, up to its NUL.
    public static func string(_ b: UnsafeRawBufferPointer) -> String { String(decoding: b.prefix { $0 != 0 }, as: UTF8.self) }
}

/// One request being built: header, family header, attributes. `NetlinkSocket` fills in its length, sequence and
/// port when it sends it.
public struct NetlinkRequest {
    public private(set) var bytes: [UInt8]

    public init(type: UInt16, flags: UInt16) {
        var h = nlmsghdr()
        h.nlmsg_type = type
        h.nlmsg_flags = flags | Netlink.flagRequest
        bytes = withUnsafeBytes(of: &h) { Array($0) }
    }

    /// The family's fixed header (ifinfomsg, rtmsg, nfgenmsg...), padded.
    public mutating func append(header: UnsafeRawBufferPointer) {
        bytes += header
        pad()
    }

    public mutating func append(header bytes: [UInt8]) {
        bytes.withUnsafeBytes { append(header: $0) }
    }

    /// A C struct (or integer) as its bytes; an array's elements go through the overload above.
    public mutating func append<T>(header value: T) {
        withUnsafeBytes(of: value) { append(header: $0) }
    }

    public mutating func attribute(_ type: UInt16, _ payload: UnsafeRawBufferPointer) {
        var a = nlattr()
        a.nla_len = UInt16(Netlink.attributeHeaderSize + payload.count)
        a.nla_type = type
        withUnsafeBytes(of: &a) { bytes += $0 }
        bytes += payload
        pad()
    }

    public mutating func attribute(_ type: UInt16, bytes payload: [UInt8]) {
        payload.withUnsafeBytes { attribute(type, $0) }
    }

    /// A host-order u32 (rtnetlink's).
    public mutating func attribute(_ type: UInt16, u32 value: UInt32) {
        withUnsafeBytes(of: value) { attribute(type, $0) }
    }

    /// A big-endian u32 (netfilter's).
    public mutating func attribute(_ type: UInt16, bigEndianU32 value: UInt32) {
        withUnsafeBytes(of: value.bigEndian) { attribute(type, $0) }
    }

    /// Text with its NUL.
    public mutating func attribute(_ type: UInt16, string: String) {
        attribute(type, bytes: Array(string.utf8) + [0])
    }

    /// A nested attribute (NLA_F_NESTED): what `fill` appends goes inside it.
    public mutating func nested(_ type: UInt16, _ fill: (inout NetlinkRequest) -> Void) {
        let start = bytes.count
        var a = nlattr()
        a.nla_type = type | UInt16(NLA_F_NESTED)
        withUnsafeBytes(of: &a) { bytes += $0 }
        fill(&self)
        let length = UInt16(bytes.count - start)
        bytes.withUnsafeMutableBytes { $0.storeBytes(of: length, toByteOffset: start, as: UInt16.self) }
    }

    private mutating func pad() {
        bytes += repeatElement(0, count: Netlink.align(bytes.count) - bytes.count)
    }

    /// The message as sent: with its length, and the sequence and port its answers are matched on.
    public func message(sequence: UInt32, port: UInt32) -> [UInt8] {
        var out = bytes
        out.withUnsafeMutableBytes { b in
            b.storeBytes(of: UInt32(b.count), toByteOffset: MemoryLayout<nlmsghdr>.offset(of: \.nlmsg_len)!, as: UInt32.self)
            b.storeBytes(of: sequence, toByteOffset: MemoryLayout<nlmsghdr>.offset(of: \.nlmsg_seq)!, as: UInt32.self)
            b.storeBytes(of: port, toByteOffset: MemoryLayout<nlmsghdr>.offset(of: \.nlmsg_pid)!, as: UInt32.self)
        }
        return out
    }
}

/// One message of a datagram: its header's fields and what follows the header.
public struct NetlinkMessage {
    /// The message itself, from its `nlmsghdr` (for parsers that take one, libnl's).
    public let start: UnsafeRawPointer
    public let type: UInt16
    public let flags: UInt16
    public let sequence: UInt32
    /// The port of the socket it is for (a reply) or from (a notification: the socket that made the change).
    public let port: UInt32
    /// What follows the header, to the message's length.
    public let payload: UnsafeRawBufferPointer

    /// NLMSG_ERROR's answer: 0 acknowledges, else the request's errno (positive); nil for another message, or an
    /// error message too short to say.
    public var errorCode: Int32? {
        guard type == Netlink.typeError, payload.count >= MemoryLayout<nlmsgerr>.size else { return nil }
        return -payload.loadUnaligned(fromByteOffset: MemoryLayout<nlmsgerr>.offset(of: \.error)!, as: Int32.self)
    }

    /// The family's fixed header of `T`'s size and layout, nil when the message is shorter.
    public func header<T>(_ type: T.Type) -> T? {
        payload.count >= MemoryLayout<T>.size ? payload.loadUnaligned(as: T.self) : nil
    }

    /// The attributes after a family header of `fixed` bytes.
    public func attributes(after fixed: Int) -> NetlinkAttributes {
        let skip = Netlink.align(fixed)
        guard payload.count >= skip else { return NetlinkAttributes(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return NetlinkAttributes(UnsafeRawBufferPointer(rebasing: payload[skip...]))
    }
}

/// The messages of one datagram, in order; a message whose length does not fit ends them (`malformed` says so).
public struct NetlinkMessages: Sequence, IteratorProtocol {
    private let buffer: UnsafeRawBufferPointer
    private var offset = 0
    public private(set) var malformed = false

    public init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }

    public mutating func next() -> NetlinkMessage? {
        guard offset + Netlink.headerSize <= buffer.count, let base = buffer.baseAddress else {
            // Bytes left that cannot hold a header are a message cut short (the last one's padding may be absent).
            if offset < buffer.count { malformed = true }
            return nil
        }
        let h = buffer.loadUnaligned(fromByteOffset: offset, as: nlmsghdr.self)
        let length = Int(h.nlmsg_len)
        guard length >= Netlink.headerSize, offset + length <= buffer.count else {
            malformed = true
            return nil
        }
        let m = NetlinkMessage(start: base + offset, type: h.nlmsg_type, flags: h.nlmsg_flags, sequence: h.nlmsg_seq,
                               port: h.nlmsg_pid,
                               payload: UnsafeRawBufferPointer(rebasing: buffer[(offset + Netlink.headerSize)..<(offset + length)]))
        offset += Netlink.align(length)
        return m
    }
}

/// Attributes, in order, their type without the nested and byte-order flags (NLA_TYPE_MASK); one whose length
/// does not fit ends them (`malformed` says so).
public struct NetlinkAttributes: Sequence, IteratorProtocol {
    private let buffer: UnsafeRawBufferPointer
    private var offset = 0
    public private(set) var malformed = false

    public init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }

    public mutating func next() -> (type: UInt16, payload: UnsafeRawBufferPointer)? {
        guard offset + Netlink.attributeHeaderSize <= buffer.count else { return nil }
        let a = buffer.loadUnaligned(fromByteOffset: offset, as: nlattr.self)
        let length = Int(a.nla_len)
        guard length >= Netlink.attributeHeaderSize, offset + length <= buffer.count else {
            malformed = true
            return nil
        }
        let payload = UnsafeRawBufferPointer(rebasing: buffer[(offset + Netlink.attributeHeaderSize)..<(offset + length)])
        offset += Netlink.align(length)
        return (a.nla_type & NP_NLA_TYPE_MASK, payload)
    }

    /// The payload of the first attribute of `type`.
    public func first(_ type: UInt16) -> UnsafeRawBufferPointer? {
        var copy = self
        while let a = copy.next() { if a.type == type { return a.payload } }
        return nil
    }
}
