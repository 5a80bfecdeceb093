// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared by every fuzz target (compiled into each one): the entry point's plumbing, invariant checks that stop
// the run with a message libFuzzer saves beside the input, and a strict JSON checker that owes nothing to the
// core's own parser or writer.

/// Stops the run when an invariant does not hold: libFuzzer reports the abort and saves the input as a crash.
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
             file: StaticString = #fileID, line: UInt = #line) {
    if !condition() { fatalError("invariant failed: \(message())", file: file, line: line) }
}

/// The input as libFuzzer hands it over.
func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// Splits on `separator`; keeps empty pieces (a blank line is input too).
func split(_ b: [UInt8], on separator: UInt8) -> [[UInt8]] {
    b.split(separator: separator, omittingEmptySubsequences: false).map(Array.init)
}

/// A short printable rendering of bytes for a failure message.
func show(_ b: some Collection<UInt8>) -> String {
    var s = ""
    for (n, c) in b.enumerated() {
        if n == 200 { return s + "..." }
        s += c >= 0x20 && c < 0x7F && c != 0x5C ? String(UnicodeScalar(c)) : "\\x" + String(c, radix: 16)
    }
    return s
}

/// A leading decimal number in `b` (at most `limit`), or nil.
func number(_ b: ArraySlice<UInt8>, limit: Int) -> Int? {
    var n: Int?
    for c in b {
        guard c >= 0x30 && c <= 0x39 else { break }
        n = min(limit, (n ?? 0) * 10 + Int(c - 0x30))
    }
    return n
}

/// RFC 8259 JSON, strictly: valid UTF-8, no raw control characters in strings, no trailing garbage, and
/// (what every line of the protocol is) an object at the top. Keys in order, for checks of what comes first.
enum StrictJSON {
    indirect enum Value: Equatable {
        case object([(String, Value)]), array([Value]), string(String), number(String), bool(Bool), null

        static func == (a: Value, b: Value) -> Bool {
            switch (a, b) {
            case let (.object(x), .object(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
            case let (.array(x), .array(y)): return x == y
            case let (.string(x), .string(y)): return x == y
            case let (.number(x), .number(y)): return x == y
            case let (.bool(x), .bool(y)): return x == y
            case (.null, .null): return true
            default: return false
            }
        }

        subscript(key: String) -> Value? {
            if case let .object(m) = self { return m.first { $0.0 == key }?.1 }
            return nil
        }
        var keys: [String] { if case let .object(m) = self { return m.map(\.0) }; return [] }
        var string: String? { if case let .string(s) = self { return s }; return nil }
        var int: Int? { if case let .number(n) = self { return Int(n) }; return nil }
        var bool: Bool? { if case let .bool(b) = self { return b }; return nil }
        var array: [Value]? { if case let .array(a) = self { return a }; return nil }
    }

    struct Failure: Error { let offset: Int; let message: String }

    /// One object, nothing before or after it (not even white space: the daemon writes none).
    static func parseObject(_ b: [UInt8]) -> Result<Value, Failure> {
        var p = Parser(b: b)
        do {
            guard p.peek == 0x7B else { throw Failure(offset: 0, message: "not an object") }
            let v = try p.value(depth: 0)
            guard p.i == b.count else { throw Failure(offset: p.i, message: "trailing bytes") }
            return .success(v)
        } catch let f as Failure {
            return .failure(f)
        } catch {
            return .failure(Failure(offset: p.i, message: "\(error)"))
        }
    }

    private struct Parser {
        let b: [UInt8]
        var i = 0
        var peek: UInt8? { i < b.count ? b[i] : nil }

        mutating func fail(_ m: String) -> Failure { Failure(offset: i, message: m) }

        mutating func expect(_ c: UInt8) throws {
            guard peek == c else { throw fail("expected '\(UnicodeScalar(c))'") }
            i += 1
        }

        mutating func value(depth: Int) throws -> Value {
            guard depth < 64 else { throw fail("too deep") }
            switch peek {
            case 0x7B?:
                i += 1
                var members: [(String, Value)] = []
                if peek == 0x7D { i += 1; return .object(members) }
                while true {
                    let k = try string()
                    guard !members.contains(where: { $0.0 == k }) else { throw fail("duplicate key \(k)") }
                    try expect(0x3A)
                    members.append((k, try value(depth: depth + 1)))
                    if peek == 0x2C { i += 1; continue }
                    try expect(0x7D)
                    return .object(members)
                }
            case 0x5B?:
                i += 1
                var items: [Value] = []
                if peek == 0x5D { i += 1; return .array(items) }
                while true {
                    items.append(try value(depth: depth + 1))
                    if peek == 0x2C { i += 1; continue }
                    try expect(0x5D)
                    return .array(items)
                }
            case 0x22?: return .string(try string())
            case 0x74?: try literal("true"); return .bool(true)
            case 0x66?: try literal("false"); return .bool(false)
            case 0x6E?: try literal("null"); return .null
            default: return .number(try number())
            }
        }

        mutating func literal(_ w: String) throws {
            for c in w.utf8 { try expect(c) }
        }

        mutating func number() throws -> String {
            let start = i
            if peek == 0x2D { i += 1 }
            func digits() -> Int { var n = 0; while let c = peek, c >= 0x30 && c <= 0x39 { i += 1; n += 1 }; return n }
            if peek == 0x30 { i += 1 } else if digits() == 0 { throw fail("bad number") }
            if peek == 0x2E { i += 1; guard digits() > 0 else { throw fail("bad fraction") } }
            if peek == 0x65 || peek == 0x45 {
                i += 1
                if peek == 0x2B || peek == 0x2D { i += 1 }
                guard digits() > 0 else { throw fail("bad exponent") }
            }
            return String(decoding: b[start..<i], as: UTF8.self)
        }

        mutating func string() throws -> String {
            try expect(0x22)
            var scalars = String.UnicodeScalarView()
            while true {
                guard let c = peek else { throw fail("unterminated string") }
                switch c {
                case 0x22: i += 1; return String(scalars)
                case 0x5C:
                    i += 1
                    guard let e = peek else { throw fail("unterminated escape") }
                    i += 1
                    switch e {
                    case 0x22, 0x5C, 0x2F: scalars.append(UnicodeScalar(e))
                    case 0x62: scalars.append("\u{8}")
                    case 0x66: scalars.append("\u{C}")
                    case 0x6E: scalars.append("\n")
                    case 0x72: scalars.append("\r")
                    case 0x74: scalars.append("\t")
                    case 0x75:
                        var u = try hex4()
                        if u >= 0xD800 && u < 0xDC00 {
                            guard peek == 0x5C else { throw fail("lone high surrogate") }
                            i += 1
                            try expect(0x75)
                            let low = try hex4()
                            guard low >= 0xDC00 && low < 0xE000 else { throw fail("bad low surrogate") }
                            u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00)
                        } else if u >= 0xDC00 && u < 0xE000 {
                            throw fail("lone low surrogate")
                        }
                        scalars.append(UnicodeScalar(u)!)
                    default: throw fail("bad escape")
                    }
                case 0..<0x20: throw fail("raw control character in string")
                case 0..<0x80: i += 1; scalars.append(UnicodeScalar(c))
                default: scalars.append(try utf8Scalar())
                }
            }
        }

        mutating func hex4() throws -> UInt32 {
            var v: UInt32 = 0
            for _ in 0..<4 {
                guard let c = peek else { throw fail("short \\u") }
                let d: UInt32
                switch c {
                case 0x30...0x39: d = UInt32(c - 0x30)
                case 0x41...0x46: d = UInt32(c - 0x41 + 10)
                case 0x61...0x66: d = UInt32(c - 0x61 + 10)
                default: throw fail("bad hex digit")
                }
                v = v << 4 | d
                i += 1
            }
            return v
        }

        /// One multi-byte UTF-8 sequence, shortest form only, no surrogates.
        mutating func utf8Scalar() throws -> UnicodeScalar {
            let c = b[i]
            let (n, min, initial): (Int, UInt32, UInt32)
            switch c {
            case 0xC2...0xDF: (n, min, initial) = (1, 0x80, UInt32(c & 0x1F))
            case 0xE0...0xEF: (n, min, initial) = (2, 0x800, UInt32(c & 0x0F))
            case 0xF0...0xF4: (n, min, initial) = (3, 0x10000, UInt32(c & 0x07))
            default: throw fail("invalid UTF-8 lead byte")
            }
            var v = initial
            for k in 1...n {
                guard i + k < b.count, b[i + k] & 0xC0 == 0x80 else { throw fail("invalid UTF-8 continuation") }
                v = v << 6 | UInt32(b[i + k] & 0x3F)
            }
            guard v >= min, v <= 0x10FFFF, !(0xD800..<0xE000).contains(v), let s = UnicodeScalar(v) else {
                throw fail("invalid UTF-8 sequence")
            }
            i += n + 1
            return s
        }
    }
}
