// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The line protocol's edges, over the real socket with socat.
final class ProtocolTests: IntegrationTestCase {
    static let pong = #"{"ok":true,"pong":true}"#

    private func errorCode(_ line: String) throws -> String? {
        let o = try JSONValue.object(line)
        guard try JSONValue.bool(o, "ok") == false else { return nil }
        return try JSONValue.string(o, "error")
    }

    func testPipelinedRequestsAreAnsweredInOrder() throws {
        let f = try makeFixture()
        // A blank line is not a request and gets no reply.
        let replies = try socat(f.socket, ["PING", "STATUS", "", "HELP", "LINKS", "bogus", "PING extra", "ping"])
        XCTAssertEqual(replies.count, 7, "one reply per non-blank request: \(replies)")
        guard replies.count == 7 else { return }
        XCTAssertEqual(replies[0], Self.pong)
        XCTAssertEqual(try JSONValue.object(replies[1])["version"] as? String, "0.1.0", replies[1])
        let verbs = try XCTUnwrap(try JSONValue.object(replies[2])["verbs"] as? [[String: Any]], replies[2])
        let verbNames = verbs.compactMap { $0["verb"] as? String }
        for v in ["PING", "HELP", "STATUS", "LINKS", "QUIT"] {
            XCTAssertTrue(verbNames.contains(v), "HELP lists \(v): \(verbNames)")
        }
        XCTAssertNotNil(try JSONValue.object(replies[3])["links"] as? [Any], replies[3])
        XCTAssertEqual(try errorCode(replies[4]), "unknown-verb", replies[4])
        XCTAssertEqual(try errorCode(replies[5]), "bad-arguments", replies[5])
        XCTAssertEqual(replies[6], Self.pong, "verbs are case-insensitive")
    }

    func testLineEndings() throws {
        let f = try makeFixture()
        let noNewline = try socatRun(f.socket, input: Array("PING".utf8))
        XCTAssertEqual(noNewline.lines, [Self.pong], "a last request without its newline: \(noNewline.summary)")
        let crlf = try socatRun(f.socket, input: Array("PING\r\nPING\r\n".utf8))
        XCTAssertEqual(crlf.lines, [Self.pong, Self.pong], "CRLF line endings: \(crlf.summary)")
    }

    func testOverlongLinesAreRejectedAndTheConnectionLivesOn() throws {
        let f = try makeFixture()
        var input: [UInt8] = []
        input += Array(String(repeating: "A", count: 4096).utf8) + [0x0A]   // at the limit: a (bad) request
        input += Array(String(repeating: "B", count: 4097).utf8) + [0x0A]   // one over
        input += Array("PING\n".utf8)
        input += Array(String(repeating: "C", count: 100_000).utf8) + [0x0A] // spans many reads
        input += Array("PING\n".utf8)
        let r = try socatRun(f.socket, input: input)
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.lines.count, 5, "one reply per line: \(r.summary)")
        guard r.lines.count == 5 else { return }
        XCTAssertEqual(try errorCode(r.lines[0]), "unknown-verb", "4096 bytes is still a line: \(r.lines[0])")
        XCTAssertEqual(try errorCode(r.lines[1]), "line-too-long", r.lines[1])
        XCTAssertEqual(r.lines[2], Self.pong)
        XCTAssertEqual(try errorCode(r.lines[3]), "line-too-long", r.lines[3])
        XCTAssertEqual(r.lines[4], Self.pong)
        XCTAssertTrue(try JSONValue.string(JSONValue.object(r.lines[1]), "message").contains("4096"), r.lines[1])
    }

    func testNulAndInvalidUTF8AreRejectedAndTheConnectionLivesOn() throws {
        let f = try makeFixture()
        var input: [UInt8] = []
        input += Array("PI".utf8) + [0x00] + Array("NG\n".utf8)
        input += Array("PING\n".utf8)
        input += Array("PING ".utf8) + [0xFF, 0xFE] + [0x0A]          // not UTF-8 at all
        input += [0xC0, 0x80] + [0x0A]                                 // overlong encoding of NUL
        input += Array("STATUS ".utf8) + [0xED, 0xA0, 0x80] + [0x0A]  // a UTF-16 surrogate
        input += Array("PING \u{00E9}\u{1F600}\n".utf8)                // valid UTF-8: just extra arguments
        input += Array("PING\n".utf8)
        let r = try socatRun(f.socket, input: input)
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.lines.count, 7, r.summary)
        guard r.lines.count == 7 else { return }
        XCTAssertEqual(try errorCode(r.lines[0]), "nul-byte", r.lines[0])
        XCTAssertEqual(r.lines[1], Self.pong)
        XCTAssertEqual(try errorCode(r.lines[2]), "invalid-utf8", r.lines[2])
        XCTAssertEqual(try errorCode(r.lines[3]), "invalid-utf8", r.lines[3])
        XCTAssertEqual(try errorCode(r.lines[4]), "invalid-utf8", r.lines[4])
        XCTAssertEqual(try errorCode(r.lines[5]), "bad-arguments", r.lines[5])
        XCTAssertEqual(r.lines[6], Self.pong)
    }

    func testQuitClosesTheConnection() throws {
        let f = try makeFixture()
        // stdin stays open, so socat can only finish because the daemon closed the connection.
        let r = try socatRun(f.socket, input: Array("PING\nQUIT\nPING\n".utf8), keepInputOpen: true, timeout: 5)
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.lines, [Self.pong, #"{"ok":true,"bye":true}"#], "nothing is answered after QUIT")
        XCTAssertEqual(try socat(f.socket, ["PING"]), [Self.pong], "the daemon still serves new connections")
    }

    /// 20000 pipelined LINKS from a client that reads as fast as it can: the daemon's reply queue fills and
    /// drains many times over, sometimes completely in one go; every request must still be answered.
    /// Three rounds with socat's buffer at 8 KiB, 64 KiB and 256 KiB, which change how fast it drains.
    func testManyPipelinedRequestsAreAllAnswered() throws {
        let f = try makeFixture()
        let count = 20000
        let input = Array(String(repeating: "LINKS\n", count: count).utf8)
        for buffer in ["8192", "65536", "262144"] {
            // -t 30: socat waits for the replies after its input ends; a stalled daemon shows as a timeout.
            let r = try Subprocess.run(["socat", "-b", buffer, "-t", "30", "-", "UNIX-CONNECT:\(f.socket)"],
                                       input: input, timeout: 15)
            XCTAssertEqual(r.status, 0, "socat -b \(buffer): \(r.stderr)")
            let lines = r.stdoutBytes.split(separator: 0x0A)
            XCTAssertEqual(lines.count, count, "socat -b \(buffer): every request answered")
            XCTAssertTrue(lines.allSatisfy { $0.starts(with: Array(#"{"ok":true,"links":["#.utf8)) },
                          "socat -b \(buffer): every reply is a LINKS reply")
        }
    }

    /// A client that sends 20000 LINKS and reads nothing fills its own reply queue; everyone else is served
    /// at once, and the greedy client still gets every reply, in order, once it reads.
    func testAClientThatDoesNotReadDelaysNobodyElse() throws {
        let f = try makeFixture()
        let count = 20000
        let floodPath = "\(f.dir)/flood.txt"
        try String(repeating: "LINKS\n", count: count).write(toFile: floodPath, atomically: true, encoding: .utf8)
        let floodSize = count * 6

        let input = open(floodPath, O_RDONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(input, 0)
        let output = try Subprocess.makePipe()
        // -t 60: after its input ends socat keeps the connection until the replies end (or teardown kills it).
        let flood = try Subprocess.spawn(["socat", "-t", "60", "-", "UNIX-CONNECT:\(f.socket)"], stdin: .fd(input),
                                       stdout: .fd(output.write), stderr: .appendFile("\(f.dir)/socat-flood.log"))
        close(input)
        close(output.write)
        addTeardownBlock {
            flood.killAndReap()
            close(output.read)
        }

        // Nothing reads socat's output, so socat soon stops reading replies, then stops sending. Once it has sent
        // 32 KiB (5461 requests, whose replies are over 6 MB: far more than the daemon's 256 KiB queue plus every
        // socket and pipe buffer), the daemon holds a full queue for it and has stopped reading from it.
        func sent() -> Int {
            let info = (try? readProcFile("/proc/\(flood.pid)/fdinfo/0")) ?? ""
            return info.split(separator: "\n").first { $0.hasPrefix("pos:") }
                .flatMap { Int($0.dropFirst(4).trimmingCharacters(in: .whitespaces)) } ?? -1
        }
        try waitUntil("socat has sent 32 KiB of requests", timeout: 10) {
            let pos = sent()
            return (pos >= 32768, "socat's stdin offset \(pos) of \(floodSize)")
        }
        XCTAssertTrue(flood.isRunning, "the flooding socat is still connected")

        for i in 0..<5 {
            let start = monotonicNow()
            let r = try socatRun(f.socket, input: Array("PING\n".utf8), timeout: 5)
            let took = monotonicNow() - start
            XCTAssertEqual(r.lines, [Self.pong], "PING #\(i) while another client floods: \(r.summary)")
            XCTAssertLessThan(took, 1.0, "PING #\(i) took \(took) s while another client floods")
        }
        let ctlStart = monotonicNow()
        let ping = try ctl(["--socket", f.socket, "ping"], timeout: 5)
        XCTAssertEqual(ping.status, 0, ping.summary)
        XCTAssertLessThan(monotonicNow() - ctlStart, 1.0, "netpermctl ping while another client floods")
        XCTAssertTrue(flood.isRunning, "the flooding socat is still blocked (its replies are unread)")
        // Back-pressure: the daemon stopped reading that client instead of queueing 24 MB of replies for it.
        XCTAssertLessThan(sent(), floodSize, "the daemon took every request from a client that reads nothing")

        // Now read: every reply arrives, none dropped, all LINKS answers. The daemon writes the 24 MB in about
        // a second; stop at EOF, after 20 s, or when nothing has come for 3 s (a stalled connection).
        var data: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        let deadline = monotonicNow() + 20
        var lastProgress = monotonicNow()
        var eof = false
        Subprocess.setNonBlocking(output.read)
        while !eof && monotonicNow() < deadline && monotonicNow() - lastProgress < 3 {
            var p = pollfd(fd: output.read, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, 200)
            while true {
                let n = buf.withUnsafeMutableBytes { read(output.read, $0.baseAddress, $0.count) }
                if n > 0 { data.append(contentsOf: buf[0..<n]); lastProgress = monotonicNow(); continue }
                if n == 0 { eof = true }
                break
            }
        }
        let lines = data.split(separator: 0x0A)
        XCTAssertTrue(eof, "the flooding client's replies stalled: \(lines.count) of \(count) replies arrived, socat "
            + "sent \(sent()) of \(floodSize) request bytes and is \(flood.isRunning ? "still" : "no longer") "
            + "connected")
        XCTAssertEqual(lines.count, count, "every LINKS request got its reply (\(data.count) bytes read)")
        let firstBad = lines.firstIndex { !$0.starts(with: Array(#"{"ok":true,"links":["#.utf8)) }
        XCTAssertNil(firstBad, "reply \(firstBad ?? -1) is not a LINKS reply: "
            + String(decoding: firstBad.map { lines[$0].prefix(300) } ?? [], as: UTF8.self))
        XCTAssertEqual(flood.wait(timeout: 5), 0, "socat ends cleanly once the daemon has answered everything")
    }
}
