/// A JSON value with ordered object keys, so replies read the same way every time.
/// Hand-written rather than Foundation's coder: the daemon links no Foundation (start-up and RSS targets).
public enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.int(x), .int(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    public subscript(key: String) -> JSON? {
        if case let .object(members) = self { return members.first { $0.0 == key }?.1 }
        return nil
    }

    public var stringValue: String? { if case let .string(s) = self { return s }; return nil }
    public var boolValue: Bool? { if case let .bool(b) = self { return b }; return nil }
    public var intValue: Int? { if case let .int(i) = self { return i }; return nil }
    public var arrayValue: [JSON]? { if case let .array(a) = self { return a }; return nil }

    /// The compact encoding followed by a newline: one protocol line.
    public func encodedLine() -> [UInt8] {
        let buffer = ByteBuffer(capacity: 512)
        encode(into: buffer)
        buffer.append(0x0A)
        return Array(UnsafeBufferPointer(start: buffer.base, count: buffer.count))
    }

    /// Compact single-line encoding (the protocol is one JSON object per line).
    public func encoded() -> String {
        let buffer = ByteBuffer(capacity: 256)
        encode(into: buffer)
        return String(decoding: UnsafeBufferPointer(start: buffer.base, count: buffer.count), as: UTF8.self)
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
}

/// Parser for the client side (netpermctl renders the daemon's JSON as tables).
public struct JSONParser {
    public struct Failure: Error, Equatable { public let offset: Int; public let message: String }

    private let bytes: [UInt8]
    private var i = 0

    public static func parse(_ text: String) throws(Failure) -> JSON {
        var p = JSONParser(bytes: Array(text.utf8))
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == p.bytes.count else { throw p.fail("trailing characters") }
        return v
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private func fail(_ message: String) -> Failure { Failure(offset: i, message: message) }

    private mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    private mutating func literal(_ word: String, _ v: JSON) throws(Failure) -> JSON {
        let w = Array(word.utf8)
        guard i + w.count <= bytes.count, Array(bytes[i..<i + w.count]) == w else { throw fail("bad literal") }
        i += w.count
        return v
    }

    private mutating func value(depth: Int) throws(Failure) -> JSON {
        guard depth < 64 else { throw fail("nested too deep") }
        guard i < bytes.count else { throw fail("unexpected end") }
        switch bytes[i] {
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "["):
            i += 1
            var items: [JSON] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            while true {
                skipSpace()
                items.append(try value(depth: depth + 1))
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                throw fail("expected , or ]")
            }
        case UInt8(ascii: "{"):
            i += 1
            var members: [(String, JSON)] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected key") }
                let key = try string()
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected :") }
                i += 1
                skipSpace()
                members.append((key, try value(depth: depth + 1)))
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                throw fail("expected , or }")
            }
        default:
            return try number()
        }
    }

    private mutating func number() throws(Failure) -> JSON {
        let start = i
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
        while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 { i += 1 }
        guard i > start, let n = Int(String(decoding: bytes[start..<i], as: UTF8.self)) else {
            throw fail("bad value")
        }
        return .int(n)
    }

    private mutating func string() throws(Failure) -> String {
        i += 1
        var out: [UInt8] = []
        while i < bytes.count {
            let c = bytes[i]
            i += 1
            switch c {
            case UInt8(ascii: "\""):
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard i < bytes.count else { throw fail("unexpected end") }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "u"):
                    guard i + 4 <= bytes.count,
                          let v = UInt32(String(decoding: bytes[i..<i + 4], as: UTF8.self), radix: 16),
                          let scalar = Unicode.Scalar(v) else { throw fail("bad \\u escape") }
                    i += 4
                    out.append(contentsOf: Array(String(scalar).utf8))
                default: out.append(e)
                }
            default:
                out.append(c)
            }
        }
        throw fail("unterminated string")
    }
}

// The one encoder: bytes written through a pointer. Replies and events are the hot path of every request.
extension JSON {
    /// `,"key":value` for each member, the bytes `encoded()` writes for an object's members after a first one: the
    /// reply encoder, for lines that splice members after a start of their own (event lines).
    public static func appendMembers(_ members: [(String, JSON)], to buffer: ByteBuffer) {
        for member in members {
            buffer.append(0x2C)   // ,
            JSON.encode(member.0, into: buffer)
            buffer.append(0x3A)   // :
            member.1.encode(into: buffer)
        }
    }

    /// Appends the compact encoding. Building a `String` scalar by scalar first cost more than everything else the
    /// daemon does for a QUERY.
    public func encode(into out: ByteBuffer) {
        switch self {
        case .null: out.append(ascii: 0x6C6C_756E, count: 4)   // null
        case let .bool(b):
            if b { out.append(ascii: 0x6575_7274, count: 4) } else { out.append(ascii: 0x65_736C_6166, count: 5) }
        case let .int(i): JSON.encode(i, into: out)
        case let .string(s): JSON.encode(s, into: out)
        case let .array(items):
            out.append(0x5B)   // [
            var first = true
            for item in items {
                if !first { out.append(0x2C) }
                first = false
                item.encode(into: out)
            }
            out.append(0x5D)
        case let .object(members):
            out.append(0x7B)   // {
            var first = true
            for member in members {
                if !first { out.append(0x2C) }
                first = false
                JSON.encode(member.0, into: out)
                out.append(0x3A)
                member.1.encode(into: out)
            }
            out.append(0x7D)
        }
    }

    /// Decimal, as `String(i)`.
    static func encode(_ i: Int, into out: ByteBuffer) {
        if i < 0 { out.append(0x2D) }
        var v = i.magnitude
        out.reserve(20)
        let start = out.count
        repeat {
            out.base[out.count] = 0x30 + UInt8(truncatingIfNeeded: v % 10)
            out.count += 1
            v /= 10
        } while v > 0
        var (a, b) = (start, out.count - 1)
        while a < b {
            (out.base[a], out.base[b]) = (out.base[b], out.base[a])
            a += 1
            b -= 1
        }
    }

    /// Escapes `"` `\\` `\n` `\r` `\t`, other controls as `\u00xx`; everything
    /// else (UTF-8 included) verbatim. Runs of plain bytes are copied at once.
    static func encode(_ string: String, into out: ByteBuffer) {
        out.append(0x22)
        let done: Void? = string.utf8.withContiguousStorageIfAvailable { bytes in
            var plain = 0
            for i in 0..<bytes.count {
                let b = bytes[i]
                guard b < 0x20 || b == 0x22 || b == 0x5C else { continue }
                out.append(UnsafeBufferPointer(rebasing: bytes[plain..<i]))
                plain = i + 1
                escape(b, into: out)
            }
            out.append(UnsafeBufferPointer(rebasing: bytes[plain...]))
        }
        if done == nil {
            for b in string.utf8 {
                if b < 0x20 || b == 0x22 || b == 0x5C { escape(b, into: out) } else { out.append(b) }
            }
        }
        out.append(0x22)
    }

    private static func escape(_ b: UInt8, into out: ByteBuffer) {
        out.append(0x5C)   // backslash
        switch b {
        case 0x22, 0x5C: out.append(b)
        case 0x0A: out.append(0x6E)
        case 0x0D: out.append(0x72)
        case 0x09: out.append(0x74)
        default:
            let lo = b & 0x0F
            out.append(ascii: 0x3030_75, count: 3)   // u00
            out.append(0x30 + (b >> 4))
            out.append(lo < 10 ? 0x30 + lo : 0x57 + lo)
        }
    }
}
