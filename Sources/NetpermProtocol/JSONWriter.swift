// SPDX-License-Identifier: LGPL-2.1-or-later
/// The one way the daemon writes JSON: members straight into bytes, in the order written, with literal keys. No
/// tree is built: allocating and freeing one cost more than the rest of answering a request. Replies and events
/// are objects written member by member; `JSON` (the parsed value) is only for those who read them.
public struct JSONWriter {
    let out: ByteBuffer
    private var first = true

    /// Opens an object; `close()` ends it.
    public init(_ out: ByteBuffer) {
        self.out = out
        out.append(0x7B)   // {
    }

    /// Continues an object whose first member is already written: each member starts with a comma. Event lines
    /// are `{"event":...,"seq":N` per subscriber, then these members, written once for all.
    public init(continuing out: ByteBuffer) {
        self.out = out
        first = false
    }

    public func close() { out.append(0x7D) }

    /// Keys are plain ASCII names: no escaping.
    private mutating func key(_ k: StaticString) {
        // Multi-byte literals are stored as pointers; withUTF8Buffer's closure would retain `out` on every key.
        if k.hasPointerRepresentation {
            out.appendKey(k.utf8Start, count: k.utf8CodeUnitCount, first: first)
        } else {
            if !first { out.append(0x2C) }
            out.append(0x22)
            k.withUTF8Buffer { out.append($0) }
            out.append(ascii: 0x3A22, count: 2)   // ":
        }
        first = false
    }

    public mutating func field(_ key: StaticString, _ value: String) { self.key(key); Self.write(value, into: out) }
    public mutating func field(_ key: StaticString, _ value: Bool) { self.key(key); Self.write(value, into: out) }
    public mutating func field(_ key: StaticString, _ value: Int) { self.key(key); Self.write(value, into: out) }
    /// Byte counts, which outgrow nothing but can exceed Int's half of the range no sooner than it.
    public mutating func field(_ key: StaticString, _ value: UInt64) { self.key(key); Self.write(digits: value, into: out) }

    /// A value known to need no escaping (an enum's literal): copied, not scanned.
    public mutating func field(_ key: StaticString, literal value: StaticString) {
        self.key(key)
        out.append(0x22)
        if value.hasPointerRepresentation {
            out.append(UnsafeBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount))
        } else {
            value.withUTF8Buffer { out.append($0) }
        }
        out.append(0x22)
    }

    /// `null` when nil.
    public mutating func field(_ key: StaticString, _ value: String?) {
        self.key(key)
        if let value { Self.write(value, into: out) } else { Self.writeNull(into: out) }
    }

    public mutating func field(_ key: StaticString, _ value: Int?) {
        self.key(key)
        if let value { Self.write(value, into: out) } else { Self.writeNull(into: out) }
    }

    public mutating func field(_ key: StaticString, _ value: Bool?) {
        self.key(key)
        if let value { Self.write(value, into: out) } else { Self.writeNull(into: out) }
    }

    public mutating func field<S: Sequence<String>>(_ key: StaticString, strings: S) {
        self.key(key)
        out.append(0x5B)   // [
        var firstItem = true
        for s in strings {
            if !firstItem { out.append(0x2C) }
            firstItem = false
            Self.write(s, into: out)
        }
        out.append(0x5D)
    }

    /// A member whose value is an object, its members written by `body`.
    public mutating func object(_ key: StaticString, _ body: (inout JSONWriter) -> Void) {
        self.key(key)
        var inner = JSONWriter(out)
        body(&inner)
        inner.close()
    }

    /// A member whose value is an object of strings by key (`names`: locale -> name), keys in sorted order so that
    /// equal maps make equal bytes. Keys are escaped as values are: they come from files.
    public mutating func field(_ key: StaticString, map: [String: String]) {
        self.key(key)
        out.append(0x7B)   // {
        var firstItem = true
        for k in map.keys.sorted() {
            if !firstItem { out.append(0x2C) }
            firstItem = false
            Self.write(k, into: out)
            out.append(0x3A)   // :
            Self.write(map[k]!, into: out)
        }
        out.append(0x7D)
    }

    /// A member whose value is an object or `null`.
    public mutating func object<T>(_ key: StaticString, _ value: T?, _ body: (inout JSONWriter, T) -> Void) {
        guard let value else {
            self.key(key)
            Self.writeNull(into: out)
            return
        }
        object(key) { body(&$0, value) }
    }

    /// A member whose value is an array of objects, one per element, its members written by `body`.
    public mutating func objects<S: Sequence>(_ key: StaticString, _ elements: S,
                                              _ body: (inout JSONWriter, S.Element) -> Void) {
        self.key(key)
        out.append(0x5B)   // [
        var firstItem = true
        for e in elements {
            if !firstItem { out.append(0x2C) }
            firstItem = false
            var inner = JSONWriter(out)
            body(&inner, e)
            inner.close()
        }
        out.append(0x5D)
    }

    public static func writeNull(into out: ByteBuffer) { out.append(ascii: 0x6C6C_756E, count: 4) }

    public static func write(_ b: Bool, into out: ByteBuffer) {
        if b { out.append(ascii: 0x6575_7274, count: 4) } else { out.append(ascii: 0x65_736C_6166, count: 5) }
    }

    /// Decimal, as `String(i)`.
    public static func write(_ i: Int, into out: ByteBuffer) {
        if i < 0 { out.append(0x2D) }
        write(digits: UInt64(i.magnitude), into: out)
    }

    /// Decimal digits of `v`.
    public static func write(digits value: UInt64, into out: ByteBuffer) {
        var v = value
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

    /// Escapes `"` `\\` `\n` `\r` `\t`, other C0 controls, DEL and the C1 controls as `\u00xx`, and as `\u20xx`
    /// the line and paragraph separators (U+2028-2029: JavaScript and some readers take them for line ends) and
    /// the bidi controls (U+202A-202E, U+2066-2069), so that a reply printed as it is (`socat`, `netpermctl
    /// --json`) writes nothing a terminal would act on. Everything else (UTF-8 included) is written verbatim;
    /// runs of plain bytes are copied at once.
    public static func write(_ string: String, into out: ByteBuffer) {
        out.append(0x22)
        let done: Void? = string.utf8.withContiguousStorageIfAvailable { bytes in
            var plain = 0
            var i = 0
            while i < bytes.count {
                let b = bytes[i]
                guard b < 0x20 || b == 0x22 || b == 0x5C || b >= 0x7F else { i += 1; continue }
                let n = b < 0x7F ? 1 : specialLength(bytes, at: i)
                guard n > 0 else { i += 1; continue }
                out.append(UnsafeBufferPointer(rebasing: bytes[plain..<i]))
                escape(bytes, at: i, length: n, into: out)
                i += n
                plain = i
            }
            out.append(UnsafeBufferPointer(rebasing: bytes[plain...]))
        }
        if done == nil {
            let bytes = Array(string.utf8)
            var i = 0
            while i < bytes.count {
                let b = bytes[i]
                let n = b < 0x20 || b == 0x22 || b == 0x5C ? 1 : b >= 0x7F ? specialLength(bytes, at: i) : 0
                if n == 0 {
                    out.append(b)
                    i += 1
                } else {
                    escape(bytes, at: i, length: n, into: out)
                    i += n
                }
            }
        }
        out.append(0x22)
    }

    /// The length of the UTF-8 sequence at `i` if it is DEL, a C1 control, U+2028-202E or U+2066-2069; else 0.
    /// The text is a Swift string, so always valid UTF-8.
    private static func specialLength<C: RandomAccessCollection<UInt8>>(_ bytes: C, at i: C.Index) -> Int
        where C.Index == Int {
        switch bytes[i] {
        case 0x7F: return 1
        case 0xC2: return i + 1 < bytes.endIndex && bytes[i + 1] < 0xA0 ? 2 : 0
        case 0xE2:
            guard i + 2 < bytes.endIndex else { return 0 }
            let (b1, b2) = (bytes[i + 1], bytes[i + 2])
            return (b1 == 0x80 && (0xA8...0xAE).contains(b2)) || (b1 == 0x81 && (0xA6...0xA9).contains(b2)) ? 3 : 0
        default: return 0
        }
    }

    /// One escaped character of `n` bytes at `i`: a one-byte one as below, the others as `\uXXXX`.
    private static func escape<C: RandomAccessCollection<UInt8>>(_ bytes: C, at i: C.Index, length n: Int,
                                                                into out: ByteBuffer) where C.Index == Int {
        guard n > 1 else { return escape(bytes[i], into: out) }
        let scalar = n == 2 ? UInt32(bytes[i] & 0x1F) << 6 | UInt32(bytes[i + 1] & 0x3F)
            : UInt32(bytes[i] & 0x0F) << 12 | UInt32(bytes[i + 1] & 0x3F) << 6 | UInt32(bytes[i + 2] & 0x3F)
        out.append(ascii: 0x75_5C, count: 2)   // \u
        for shift in stride(from: 12, through: 0, by: -4) {
            let d = UInt8(truncatingIfNeeded: scalar >> UInt32(shift)) & 0x0F
            out.append(d < 10 ? 0x30 + d : 0x57 + d)
        }
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
