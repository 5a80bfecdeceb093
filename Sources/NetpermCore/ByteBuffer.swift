/// A growable byte buffer written through a pointer: appending a byte is a store, not an Array's uniqueness and
/// capacity checks.
public final class ByteBuffer {
    public private(set) var base: UnsafeMutablePointer<UInt8>
    public var count = 0
    private var capacity: Int

    public init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    @inline(__always) public func reserve(_ n: Int) {
        if count + n > capacity { grow(count + n) }
    }

    private func grow(_ needed: Int) {
        var c = capacity * 2
        while c < needed { c *= 2 }
        let b = UnsafeMutablePointer<UInt8>.allocate(capacity: c)
        b.update(from: base, count: count)
        base.deallocate()
        base = b
        capacity = c
    }

    @inline(__always) public func append(_ b: UInt8) {
        reserve(1)
        base[count] = b
        count += 1
    }

    @inline(__always) public func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let src = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (base + count).update(from: src, count: bytes.count)
        count += bytes.count
    }

    /// Up to 8 ASCII bytes, packed little end first: the literals of JSON.
    @inline(__always) public func append(ascii packed: UInt64, count n: Int) {
        reserve(8)
        UnsafeMutableRawPointer(base + count).storeBytes(of: packed.littleEndian, as: UInt64.self)
        count += n
    }
}
