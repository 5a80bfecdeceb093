import NetpermCore
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
final class RequestParserTests: XCTestCase {
    private func parse(_ s: String) -> Result<Request, ProtocolError>? { RequestParser.parse(bytes(s)) }

    private func code(_ r: Result<Request, ProtocolError>?) -> ErrorCode? {
        if case let .failure(e)? = r { return e.code }
        return nil
    }

    func testVerbsAreCaseInsensitive() {
        for s in ["PING", "ping", "Ping", "pInG"] { XCTAssertEqual(try parse(s)?.get(), Request(verb: .ping), s) }
        XCTAssertEqual(try parse("status")?.get(), Request(verb: .status))
        XCTAssertEqual(try parse("Links")?.get(), Request(verb: .links))
        XCTAssertEqual(try parse("HELP")?.get(), Request(verb: .help))
        XCTAssertEqual(try parse("quit")?.get(), Request(verb: .quit))
    }

    func testArgumentsSplitOnSpacesAndTabs() {
        XCTAssertEqual(try parse("  LINKS \t wwan0   eth0 ")?.get(), Request(verb: .links, args: ["wwan0", "eth0"]))
    }

    func testNulByte() {
        let r = RequestParser.parse([UInt8(ascii: "P"), 0, UInt8(ascii: "I")])
        XCTAssertEqual(code(r), .nulByte)
    }

    func testInvalidUTF8() {
        XCTAssertEqual(code(RequestParser.parse([0x50, 0x49, 0xC3, 0x28])), .invalidUTF8)
        XCTAssertEqual(code(RequestParser.parse([0xFF])), .invalidUTF8)
        // Overlong encoding of '/' is invalid UTF-8 too.
        XCTAssertEqual(code(RequestParser.parse([0xC0, 0xAF])), .invalidUTF8)
    }

    /// NUL is checked first: a line that is both gets the more specific nul-byte code.
    func testNulWinsOverInvalidUTF8() {
        XCTAssertEqual(code(RequestParser.parse([0xFF, 0x00])), .nulByte)
    }

    func testUnknownVerb() {
        guard case let .failure(e)? = parse("FROB x") else { return XCTFail("expected failure") }
        XCTAssertEqual(e.code, .unknownVerb)
        XCTAssertTrue(e.message.contains("'FROB'"), e.message)
    }

    /// An echoed unknown verb is capped so a client cannot make the reply huge.
    func testUnknownVerbEchoIsCapped() {
        guard case let .failure(e)? = parse(String(repeating: "Q", count: 1000)) else { return XCTFail("expected failure") }
        XCTAssertTrue(e.message.contains("'" + String(repeating: "Q", count: 64) + "'"), e.message)
        XCTAssertFalse(e.message.contains(String(repeating: "Q", count: 65)))
    }

    func testBlankIsNil() {
        XCTAssertNil(parse(""))
        XCTAssertNil(parse("   \t "))
        XCTAssertNil(parse("\r"))
    }

    func testErrorCodesAreStable() {
        // Clients match on these strings; new codes may be added, existing ones must not change.
        let expected: [(ErrorCode, String)] = [
            (.lineTooLong, "line-too-long"), (.invalidUTF8, "invalid-utf8"), (.nulByte, "nul-byte"),
            (.unknownVerb, "unknown-verb"), (.badArguments, "bad-arguments"), (.permissionDenied, "permission-denied"),
            (.notFound, "not-found"), (.notReady, "not-ready"), (.internalError, "internal"),
        ]
        for (code, raw) in expected { XCTAssertEqual(code.rawValue, raw) }
    }
}

/// The pure request processor, end to end from framed line to reply.
final class ProcessorTests: XCTestCase {
    private func network() -> NetworkState {
        NetworkState(snapshot: KernelSnapshot(
            links: [
                LinkFacts(index: 1, name: "lo", arphrd: ARPHRD.loopback, rtnlKind: nil, adminUp: true, carrier: true,
                          operstate: "unknown"),
                LinkFacts(index: 2, name: "enp3s0", arphrd: ARPHRD.ether, rtnlKind: nil, adminUp: true, carrier: false,
                          operstate: "down"),
                LinkFacts(index: 4, name: "wwan0", arphrd: ARPHRD.none, rtnlKind: nil, adminUp: true, carrier: true,
                          operstate: "up"),
            ],
            addresses: [AddressFacts(index: 4, family: .ipv4, text: "10.64.0.2/30")],
            defaultRoutes: [DefaultRouteFacts(index: 4, family: .ipv4, metric: 700)])) { f in
            Classifier.classify(f, sysfs: SysfsFacts(devtype: f.name == "wwan0" ? "wwan" : nil), overrides: [])
        }
    }

    /// An unprivileged local user running an app no [App] section names.
    private let caller = Caller(identity: PeerIdentity(pid: 4242, uid: 1000, gids: [1000],
                                                       executable: "/usr/bin/curl", unit: nil),
                                config: Config(), adminGID: { nil })

    private func process(_ verb: Verb, _ state: DaemonState = DaemonState()) -> Response {
        Processor.process(Request(verb: verb), state: state, caller: caller)
    }

    private func handle(_ s: String, _ state: DaemonState) -> Response? {
        Processor.handle(.line(bytes(s)), state: state, caller: caller)
    }

    private func handle(_ frame: LineFramer.Frame) -> Response? {
        Processor.handle(frame, state: DaemonState(), caller: caller)
    }

    func testPing() {
        let r = process(.ping)
        XCTAssertEqual(r.json.encoded(), #"{"ok":true,"pong":true}"#)
        XCTAssertFalse(r.close)
    }

    /// Checked field by field so that new STATUS fields do not break this test, but a wrong value does.
    func testStatusFields() {
        let r = process(.status, DaemonState(ready: true, network: network()))
        XCTAssertEqual(r.json["ok"], true)
        XCTAssertEqual(r.json["version"], .string(DaemonState.version))
        XCTAssertEqual(r.json["ready"], true)
        XCTAssertEqual(r.json["links"], 3)
        XCTAssertEqual(r.json["available"], true)
        XCTAssertEqual(r.json["primary"], "wwan0")
        XCTAssertEqual(r.json["primary_kind"], "wwan")
        XCTAssertFalse(r.close)
    }

    /// Before the first dump: not ready, nothing available, primary null (not missing).
    func testStatusBeforeReady() {
        let r = process(.status)
        XCTAssertEqual(r.json["ready"], false)
        XCTAssertEqual(r.json["links"], 0)
        XCTAssertEqual(r.json["available"], false)
        XCTAssertEqual(r.json["primary"], .null)
        XCTAssertEqual(r.json["primary_kind"], .null)
    }

    func testLinks() throws {
        let r = process(.links, DaemonState(ready: true, network: network()))
        XCTAssertEqual(r.json["ok"], true)
        let links = try XCTUnwrap(r.json["links"]?.arrayValue)
        XCTAssertEqual(links.map { $0["name"]?.stringValue }, ["lo", "enp3s0", "wwan0"])
        XCTAssertEqual(links.map { $0["kind"]?.stringValue }, ["loopback", "ethernet", "wwan"])
        XCTAssertEqual(links.map { $0["usable"]?.boolValue }, [false, false, true])
        XCTAssertEqual(links[2]["addresses"], .array(["10.64.0.2/30"]))
    }

    func testHelpListsEveryVerb() throws {
        let r = process(.help)
        let verbs = try XCTUnwrap(r.json["verbs"]?.arrayValue)
        XCTAssertEqual(verbs.map { $0["verb"]?.stringValue }, Verb.allCases.map(\.usage))
        for usage in ["PING", "HELP", "STATUS", "LINKS", "QUIT"] {
            XCTAssertTrue(verbs.contains { $0["verb"]?.stringValue == usage }, usage)
        }
        XCTAssertTrue(verbs.allSatisfy { !($0["summary"]?.stringValue ?? "").isEmpty })
    }

    func testQuitClosesAfterReply() {
        let r = handle("quit", DaemonState())
        XCTAssertEqual(r?.close, true)
        XCTAssertEqual(r?.json.encoded(), #"{"ok":true,"bye":true}"#)
    }

    func testArgsToNoArgVerbAreRejected() {
        for s in ["PING now", "STATUS -v", "LINKS wwan0", "HELP me"] {
            let r = handle(s, DaemonState())
            XCTAssertEqual(r?.json["ok"], false, s)
            XCTAssertEqual(r?.json["error"], "bad-arguments", s)
            XCTAssertEqual(r?.close, false, s)
        }
        XCTAssertEqual(handle("PING now", DaemonState())?.json["message"]?.stringValue?.contains("PING"), true)
        // "QUIT now" is refused too, and so must not close the connection.
        XCTAssertEqual(handle("QUIT now", DaemonState())?.close, false)
    }

    func testHandleErrorsAndBlank() {
        XCTAssertNil(handle("", DaemonState()))
        XCTAssertNil(handle("  ", DaemonState()))
        XCTAssertEqual(handle("NOPE", DaemonState())?.json["error"], "unknown-verb")
        XCTAssertEqual(handle(.line([0xFF]))?.json["error"], "invalid-utf8")
        XCTAssertEqual(handle(.line([0x00]))?.json["error"], "nul-byte")
        let tooLong = handle(.tooLong)
        XCTAssertEqual(tooLong?.json["error"], "line-too-long")
        XCTAssertEqual(tooLong?.close, false)
        XCTAssertEqual(tooLong?.json["message"]?.stringValue?.contains("4096"), true)
    }
}

/// The hand-written JSON encoder and the client's parser.
final class JSONTests: XCTestCase {
    func testScalarsAndContainers() {
        XCTAssertEqual(JSON.null.encoded(), "null")
        XCTAssertEqual(JSON.bool(false).encoded(), "false")
        XCTAssertEqual(JSON.int(-42).encoded(), "-42")
        XCTAssertEqual(JSON.array([]).encoded(), "[]")
        XCTAssertEqual(JSON.object([]).encoded(), "{}")
        // Object keys stay in insertion order.
        XCTAssertEqual(JSON.object([("z", 1), ("a", .array([true, .null]))]).encoded(), #"{"z":1,"a":[true,null]}"#)
    }

    func testStringEscaping() {
        XCTAssertEqual(JSON.string(#"say "hi""#).encoded(), #""say \"hi\"""#)
        XCTAssertEqual(JSON.string(#"C:\dir"#).encoded(), #""C:\\dir""#)
        XCTAssertEqual(JSON.string("a\nb\rc\td").encoded(), #""a\nb\rc\td""#)
        XCTAssertEqual(JSON.string("\u{0}\u{1}\u{8}\u{C}\u{1F}").encoded(), #""\u0000\u0001\u0008\u000c\u001f""#)
        // Not control characters: DEL, '/', and non-ASCII go out as UTF-8.
        XCTAssertEqual(JSON.string("\u{7F}/é📶").encoded(), "\"\u{7F}/é📶\"")
        // Keys are escaped the same way.
        XCTAssertEqual(JSON.object([("k\"\n", "v")]).encoded(), #"{"k\"\n":"v"}"#)
    }

    /// The protocol is one object per line, so no encoded value may contain a raw newline.
    func testEncodedHasNoRawNewline() {
        let s = JSON.object([("m", .string("line1\nline2\r\n")), ("a", .array([.string("\n")]))]).encoded()
        // Checked on bytes: as Characters, "\r\n" is one grapheme that contains("\n") would miss.
        XCTAssertFalse(s.utf8.contains(0x0A))
        XCTAssertFalse(s.utf8.contains(0x0D))
    }

    func testRoundTrip() throws {
        var allControls = ""
        for v in 0..<0x20 { allControls.unicodeScalars.append(Unicode.Scalar(UInt8(v))) }
        let value: JSON = .object([
            ("ok", true),
            ("n", .int(Int.min)),
            ("m", .int(Int.max)),
            ("s", .string(allControls + "\"\\/ é 📶 \u{7F}")),
            ("empty", ""),
            ("nested", .array([.object([("x", .null)]), .array([]), .object([]), 0])),
        ])
        XCTAssertEqual(try JSONParser.parse(value.encoded()), value)
        // Whitespace the daemon never sends but a human might.
        XCTAssertEqual(try JSONParser.parse(" {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\":null } "),
                       .object([("a", .array([1, 2])), ("b", .null)]))
    }

    func testParserEscapes() throws {
        XCTAssertEqual(try JSONParser.parse(#""\u00e9\u0041\/\b\f""#), .string("éA/\u{8}\u{C}"))
    }

    func testRoundTripOfDaemonReply() throws {
        let caller = Caller(identity: PeerIdentity(pid: 1, uid: 0, gids: [0], executable: nil, unit: nil),
                            config: Config(), adminGID: { nil })
        let reply = Processor.process(Request(verb: .help), state: DaemonState(), caller: caller).json
        XCTAssertEqual(try JSONParser.parse(reply.encoded()), reply)
    }

    private func assertParseError(_ text: String, offset: Int, _ message: String,
                                  file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try JSONParser.parse(text), "'\(text)'", file: file, line: line) { error in
            let failure = error as? JSONParser.Failure
            XCTAssertEqual(failure?.offset, offset, "'\(text)'", file: file, line: line)
            XCTAssertEqual(failure?.message, message, "'\(text)'", file: file, line: line)
        }
    }

    func testParserErrors() {
        assertParseError("", offset: 0, "unexpected end")
        assertParseError("   ", offset: 3, "unexpected end")
        assertParseError("nul", offset: 0, "bad literal")
        assertParseError("tru", offset: 0, "bad literal")
        assertParseError("[1,]", offset: 3, "bad value")
        assertParseError("[1 2]", offset: 3, "expected , or ]")
        assertParseError("[1", offset: 2, "unexpected end")
        assertParseError(#"{"a" 1}"#, offset: 5, "expected :")
        assertParseError(#"{1:2}"#, offset: 1, "expected key")
        assertParseError(#"{"a":1,}"#, offset: 7, "expected key")
        assertParseError(#"{"a":1 "b":2}"#, offset: 7, "expected , or }")
        assertParseError(#""abc"#, offset: 4, "unterminated string")
        assertParseError(#""\u12"#, offset: 3, #"bad \u escape"#)
        assertParseError(#""\uZZZZ""#, offset: 3, #"bad \u escape"#)
        assertParseError("1 2", offset: 2, "trailing characters")
        assertParseError("{}x", offset: 2, "trailing characters")
        assertParseError("-", offset: 1, "bad value")
    }

    /// Depth is capped so a hostile reply cannot blow the client's stack.
    func testNestingLimit() throws {
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        XCTAssertNoThrow(try JSONParser.parse(ok))
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        XCTAssertThrowsError(try JSONParser.parse(deep)) { error in
            XCTAssertEqual((error as? JSONParser.Failure)?.message, "nested too deep")
            XCTAssertEqual((error as? JSONParser.Failure)?.offset, 64)
        }
    }

    func testAccessors() {
        let v: JSON = .object([("s", "x"), ("b", true), ("i", 3), ("a", .array([1]))])
        XCTAssertEqual(v["s"]?.stringValue, "x")
        XCTAssertEqual(v["b"]?.boolValue, true)
        XCTAssertEqual(v["i"]?.intValue, 3)
        XCTAssertEqual(v["a"]?.arrayValue, [1])
        XCTAssertNil(v["missing"])
        XCTAssertNil(v["s"]?.intValue)
        XCTAssertNil(JSON.array([]).self["s"])
    }
}
