// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermControl
import XCTest

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
private func line(_ s: String) -> LineFramer.Frame { .line(bytes(s)) }

/// Framing: a client's byte stream, however it is chunked, becomes the same sequence of lines, and an
/// oversized line costs that client one error reply, never the connection or unbounded memory.
final class LineFramerTests: XCTestCase {
    func testPipelinedLinesInOneChunk() {
        var f = LineFramer()
        XCTAssertEqual(f.feed(bytes("PING\nSTATUS\nLINKS\n")), [line("PING"), line("STATUS"), line("LINKS")])
        XCTAssertEqual(f.buffered, 0)
    }

    func testLineSplitAcrossChunks() {
        var f = LineFramer()
        XCTAssertEqual(f.feed(bytes("PI")), [])
        XCTAssertEqual(f.buffered, 2)
        XCTAssertEqual(f.feed(bytes("NG\nSTA")), [line("PING")])
        XCTAssertEqual(f.feed(bytes("TUS")), [])
        XCTAssertEqual(f.feed(bytes("\n")), [line("STATUS")])
        XCTAssertEqual(f.buffered, 0)
    }

    /// Each frame says where in the stream it began, however the stream was cut and whatever was discarded
    /// before it: the transport finds a line's sender by it.
    func testFramesKnowWhereTheyBegan() {
        let stream = bytes("PING\n" + String(repeating: "x", count: 40) + "\nQUERY\n\nWAIT\n")
        // PING at 0, the long line at 5, QUERY at 46, the blank line at 52, WAIT at 53.
        for size in 1...stream.count {
            var f = LineFramer(maxLine: 16)
            var starts: [Int] = []
            var i = 0
            while i < stream.count {
                let chunk = Array(stream[i..<min(i + size, stream.count)])
                XCTAssertEqual(f.received, i)
                f.append(chunk)
                while f.next() != nil { starts.append(f.frameStart) }
                i += size
            }
            XCTAssertEqual(starts, [0, 5, 46, 52, 53], "chunks of \(size)")
        }
    }

    /// Every way of cutting the same stream gives the same frames (exercises buffer compaction too).
    func testAnyChunkingGivesSameFrames() {
        let stream = bytes("PING\r\nSTATUS\n\nLINKS extra\nQUIT\n")
        let expected = [line("PING"), line("STATUS"), line(""), line("LINKS extra"), line("QUIT")]
        for size in 1...stream.count {
            var f = LineFramer()
            var frames: [LineFramer.Frame] = []
            var i = 0
            while i < stream.count {
                frames += f.feed(Array(stream[i..<min(i + size, stream.count)]))
                i += size
            }
            XCTAssertEqual(frames, expected, "chunk size \(size)")
        }
    }

    func testCRLFIsStripped() {
        var f = LineFramer()
        XCTAssertEqual(f.feed(bytes("PING\r\n")), [line("PING")])
        // Only one "\r" right before "\n" is line ending; an inner one is data.
        XCTAssertEqual(f.feed(bytes("A\rB\r\r\n")), [line("A\rB\r")])
    }

    func testBlankLines() {
        var f = LineFramer()
        XCTAssertEqual(f.feed(bytes("\n\r\n\nPING\n")), [line(""), line(""), line(""), line("PING")])
    }

    func testExactlyMaxLineIsAccepted() {
        var f = LineFramer()
        let body = [UInt8](repeating: UInt8(ascii: "a"), count: 4096)
        XCTAssertEqual(f.feed(body + [0x0A]), [.line(body)])
        // The limit excludes the "\r\n" terminator.
        XCTAssertEqual(f.feed(body + [0x0D, 0x0A]), [.line(body)])
    }

    func testOneOverMaxIsTooLongAndConnectionContinues() {
        var f = LineFramer()
        let body = [UInt8](repeating: UInt8(ascii: "a"), count: 4097)
        XCTAssertEqual(f.feed(bytes("PING\n") + body + bytes("\nSTATUS\n")), [line("PING"), .tooLong, line("STATUS")])
        XCTAssertEqual(f.buffered, 0)
    }

    /// 4097 bytes arriving without their newline yet: not too long until we know it is not 4096 + "\r".
    func testMaxPlusCarriageReturnWaitsForNewline() {
        var f = LineFramer()
        let body = [UInt8](repeating: UInt8(ascii: "b"), count: 4096)
        XCTAssertEqual(f.feed(body + [0x0D]), [])
        XCTAssertEqual(f.feed([0x0A]), [.line(body)])
    }

    /// A huge line trickling in: exactly one tooLong, bounded memory, and the next line still works.
    func testLongLineInSmallChunksGivesOneTooLong() {
        var f = LineFramer()
        var frames: [LineFramer.Frame] = []
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 100)
        for _ in 0..<200 {
            frames += f.feed(chunk)
            XCTAssertLessThanOrEqual(f.buffered, 4097 + chunk.count, "discarded input must not pile up")
        }
        frames += f.feed(bytes("yyy\nPI"))
        frames += f.feed(bytes("NG\n"))
        XCTAssertEqual(frames, [.tooLong, line("PING")])
    }

    /// Byte-at-a-time delivery of an over-long line that ends exactly when the limit is crossed.
    func testOverLongLineByteByByte() {
        var f = LineFramer()
        var frames: [LineFramer.Frame] = []
        for b in [UInt8](repeating: UInt8(ascii: "z"), count: 5000) + bytes("\nQUIT\n") { frames += f.feed([b]) }
        XCTAssertEqual(frames, [.tooLong, line("QUIT")])
    }

    func testCustomMaxLine() {
        var f = LineFramer(maxLine: 4)
        XCTAssertEqual(f.feed(bytes("abcd\nabcde\nok\n")), [line("abcd"), .tooLong, line("ok")])
    }
}

/// Request parsing: what the client typed, turned into a verb or a stable error code.
