// SPDX-License-Identifier: LGPL-2.1-or-later
/// A growable byte buffer written through a pointer: appending a byte is a store, not an Array's uniqueness and
/// capacity checks.
public final class ByteBuffer {
    private struct Storage {
        var base: UnsafeMutablePointer<UInt8>
        var count: Int
        var capacity: Int
    }

    /// The fields live behind a constant pointer: a class's stored `var`s get a dynamic exclusivity check on every
    /// access, which cost more than the encoding itself (about 35 checks per QUERY reply).
    private let s: UnsafeMutablePointer<Storage>

    public init(capacity: Int) {
        s = .allocate(capacity: 1)
        s.initialize(to: Storage(base: .allocate(capacity: capacity), count: 0, capacity: capacity))
    }

    deinit {
        s.pointee.base.deallocate()
        s.deallocate()
    }

    @inline(__always) public var base: UnsafeMutablePointer<UInt8> { s.pointee.base }

    @inline(__always) public var count: Int {
        get { s.pointee.count }
        set { s.pointee.count = newValue }
    }

    @inline(__always) public func reserve(_ n: Int) {
        if s.pointee.count + n > s.pointee.capacity { grow(s.pointee.count + n) }
    }

    private func grow(_ needed: Int) {
        var c = s.pointee.capacity * 2
        while c < needed { c *= 2 }
        let b = UnsafeMutablePointer<UInt8>.allocate(capacity: c)
        b.update(from: s.pointee.base, count: s.pointee.count)
        s.pointee.base.deallocate()
        s.pointee.base = b
        s.pointee.capacity = c
    }

    @inline(__always) public func append(_ b: UInt8) {
        reserve(1)
        s.pointee.base[s.pointee.count] = b
        s.pointee.count += 1
    }

    @inline(__always) public func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let src = bytes.baseAddress, bytes.count > 0 else { return }
        let n = bytes.count
        reserve(n)
        Self.copy(UnsafeRawPointer(src), to: UnsafeMutableRawPointer(s.pointee.base + s.pointee.count), count: n)
        s.pointee.count += n
    }

    /// A JSON member's key: `,` unless first, then `"key":`, with one capacity check (a reply has ~40 keys).
    @inline(__always) public func appendKey(_ key: UnsafePointer<UInt8>, count n: Int, first: Bool) {
        reserve(n + 4)
        var at = s.pointee.base + s.pointee.count
        if !first { at.pointee = 0x2C; at += 1 }
        at.pointee = 0x22
        Self.copy(UnsafeRawPointer(key), to: UnsafeMutableRawPointer(at + 1), count: n)
        (at + 1 + n).pointee = 0x22
        (at + 2 + n).pointee = 0x3A
        s.pointee.count = at + 3 + n - s.pointee.base
    }

    /// Most pieces of a reply are keys and short values: two overlapping word copies beat a call to memcpy.
    @inline(__always) private static func copy(_ from: UnsafeRawPointer, to dst: UnsafeMutableRawPointer, count n: Int) {
        if n >= 8 && n <= 16 {
            dst.storeBytes(of: from.loadUnaligned(as: UInt64.self), as: UInt64.self)
            (dst + n - 8).storeBytes(of: from.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self), as: UInt64.self)
        } else if n >= 4 && n < 8 {
            dst.storeBytes(of: from.loadUnaligned(as: UInt32.self), as: UInt32.self)
            (dst + n - 4).storeBytes(of: from.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self), as: UInt32.self)
        } else if n > 0 && n < 4 {
            dst.storeBytes(of: from.load(as: UInt8.self), as: UInt8.self)
            (dst + n / 2).storeBytes(of: from.load(fromByteOffset: n / 2, as: UInt8.self), as: UInt8.self)
            (dst + n - 1).storeBytes(of: from.load(fromByteOffset: n - 1, as: UInt8.self), as: UInt8.self)
        } else if n > 0 {
            dst.copyMemory(from: from, byteCount: n)
        }
    }

    public func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { append($0) }
    }

    /// Up to 8 ASCII bytes, packed little end first: the literals of JSON.
    @inline(__always) public func append(ascii packed: UInt64, count n: Int) {
        reserve(8)
        UnsafeMutableRawPointer(s.pointee.base + s.pointee.count).storeBytes(of: packed.littleEndian, as: UInt64.self)
        s.pointee.count += n
    }
}
