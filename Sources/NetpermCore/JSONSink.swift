/// Where an object's members go as they are written: into a `JSON` tree (events, listings, tests), or straight
/// into bytes (QUERY's reply, too frequent to build as a tree first: allocating and freeing the tree cost more
/// than the rest of a request). A value written once through `write(to:)` gives both, so they cannot disagree.
/// Keys are literals: every key a reply writes is known at compile time, and a literal is copied, not scanned.
public protocol JSONSink {
    mutating func field(_ key: StaticString, _ value: String)
    mutating func field(_ key: StaticString, _ value: Bool)
    mutating func field(_ key: StaticString, _ value: JSON)
    mutating func field<S: Sequence<String>>(_ key: StaticString, strings: S)
    /// A member whose value is an object, its members written by `body`.
    mutating func object(_ key: StaticString, _ body: (inout Self) -> Void)
}

/// Collects members for a `JSON.object`.
public struct JSONTreeSink: JSONSink {
    public var members: [(String, JSON)] = []

    public init(capacity: Int = 0) { members.reserveCapacity(capacity) }

    public mutating func field(_ key: StaticString, _ value: String) { members.append((key.description, .string(value))) }
    public mutating func field(_ key: StaticString, _ value: Bool) { members.append((key.description, .bool(value))) }
    public mutating func field(_ key: StaticString, _ value: JSON) { members.append((key.description, value)) }
    public mutating func field<S: Sequence<String>>(_ key: StaticString, strings: S) {
        members.append((key.description, .array(strings.map { .string($0) })))
    }

    public mutating func object(_ key: StaticString, _ body: (inout JSONTreeSink) -> Void) {
        var inner = JSONTreeSink()
        body(&inner)
        members.append((key.description, .object(inner.members)))
    }
}

/// Writes members as compact JSON, the same bytes `JSON.encode(into:)` gives for the tree.
public struct JSONByteSink: JSONSink {
    let out: ByteBuffer
    private var first = true

    /// Opens an object; `close()` ends it.
    public init(_ out: ByteBuffer) {
        self.out = out
        out.append(0x7B)   // {
    }

    /// Continues an object whose first member is already written: each member starts with a comma. Event lines
    /// are `{"event":...,"seq":N` per subscriber, then these members, encoded once for all.
    public init(continuing out: ByteBuffer) {
        self.out = out
        first = false
    }

    public func close() { out.append(0x7D) }

    /// Keys are plain ASCII names: no escaping.
    private mutating func key(_ k: StaticString) {
        if !first { out.append(0x2C) }
        first = false
        out.append(0x22)
        // Multi-byte literals are stored as pointers; withUTF8Buffer's closure would retain `out` on every key.
        if k.hasPointerRepresentation {
            out.append(UnsafeBufferPointer(start: k.utf8Start, count: k.utf8CodeUnitCount))
        } else {
            k.withUTF8Buffer { out.append($0) }
        }
        out.append(ascii: 0x3A22, count: 2)   // ":
    }

    public mutating func field(_ key: StaticString, _ value: String) { self.key(key); JSON.encode(value, into: out) }
    public mutating func field(_ key: StaticString, _ value: Bool) { self.key(key); JSON.bool(value).encode(into: out) }
    public mutating func field(_ key: StaticString, _ value: JSON) { self.key(key); value.encode(into: out) }

    public mutating func field<S: Sequence<String>>(_ key: StaticString, strings: S) {
        self.key(key)
        out.append(0x5B)   // [
        var firstItem = true
        for s in strings {
            if !firstItem { out.append(0x2C) }
            firstItem = false
            JSON.encode(s, into: out)
        }
        out.append(0x5D)
    }

    public mutating func object(_ key: StaticString, _ body: (inout JSONByteSink) -> Void) {
        self.key(key)
        var inner = JSONByteSink(out)
        body(&inner)
        inner.close()
    }
}
