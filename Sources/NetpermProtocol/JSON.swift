// SPDX-License-Identifier: LGPL-2.1-or-later
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

// Re-encoding a parsed value (the client prints one link of a LINKS reply); the primitives are JSONWriter's.
extension JSON {
    /// Appends the compact encoding. Building a `String` scalar by scalar first cost more than everything else the
    /// daemon does for a QUERY.
    public func encode(into out: ByteBuffer) {
        switch self {
        case .null: JSONWriter.writeNull(into: out)
        case let .bool(b): JSONWriter.write(b, into: out)
        case let .int(i): JSONWriter.write(i, into: out)
        case let .string(s): JSONWriter.write(s, into: out)
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
                JSONWriter.write(member.0, into: out)
                out.append(0x3A)
                member.1.encode(into: out)
            }
            out.append(0x7D)
        }
    }
}
