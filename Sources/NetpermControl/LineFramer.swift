// SPDX-License-Identifier: LGPL-2.1-or-later
/// Splits a byte stream into request lines, capping each at `maxLine` bytes (excluding the newline and an
/// optional "\r" before it). A longer line is reported once as `.tooLong` and the rest of it is discarded up to
/// the next newline, so the connection stays usable. Pull-based, so the transport can stop taking lines while a
/// client's reply queue is full and leave the rest of its input unread.
public struct LineFramer: Sendable {
    public enum Frame: Equatable, Sendable {
        case line([UInt8])
        case tooLong
    }

    public static let defaultMaxLine = 4096

    public let maxLine: Int
    private var buffer: [UInt8] = []
    private var start = 0
    /// Bytes before this index (from `start`) are known to hold no newline.
    private var scanned = 0
    private var discarding = false
    /// The stream offset of `buffer[0]`: bytes appended before it are gone.
    private var base = 0
    /// The stream offset of the first byte of the frame `next()` returned last (for `.tooLong`, of what it
    /// discarded), so the transport can tell who sent it.
    public private(set) var frameStart = 0

    public init(maxLine: Int = LineFramer.defaultMaxLine) { self.maxLine = maxLine }

    /// Bytes received but not yet returned as a frame.
    public var buffered: Int { buffer.count - start }

    /// The stream offset the next byte appended will have (every byte ever appended counts).
    public var received: Int { base + buffer.count }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeSubrange(0..<start)
            base += start
            scanned -= start
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    private mutating func clear() {
        base += buffer.count
        buffer.removeAll(keepingCapacity: true); start = 0; scanned = 0
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    public mutating func next() -> Frame? {
        while true {
            var nl: Int?
            var i = max(scanned, start)
            while i < buffer.count {
                if buffer[i] == 0x0A { nl = i; break }
                i += 1
            }
            guard let end = nl else {
                scanned = buffer.count
                if discarding {
                    clear()
                } else if buffered > maxLine + 1 {
                    frameStart = base + start
                    clear()
                    discarding = true
                    return .tooLong
                }
                return nil
            }
            let lineStart = start
            start = end + 1
            scanned = start
            if discarding { discarding = false; continue }
            frameStart = base + lineStart
            var lineEnd = end
            if lineEnd > lineStart && buffer[lineEnd - 1] == 0x0D { lineEnd -= 1 }
            if lineEnd - lineStart > maxLine { return .tooLong }
            return .line(Array(buffer[lineStart..<lineEnd]))
        }
    }

    /// Convenience for tests: feed bytes, drain every complete frame.
    public mutating func feed(_ bytes: [UInt8]) -> [Frame] {
        append(bytes)
        var frames: [Frame] = []
        while let f = next() { frames.append(f) }
        return frames
    }
}
