// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import NetpermCore
import NetpermPolicy
import NetpermProtocol
import XCTest

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
        // DEL, the C1 controls, the line and paragraph separators and the bidi controls are escaped too, so a
        // reply printed as it is writes nothing a terminal acts on; '/' and the rest of non-ASCII go out as UTF-8.
        XCTAssertEqual(JSON.string("\u{7F}/é📶").encoded(), #""\u007f/é📶""#)
        XCTAssertEqual(JSON.string("a\u{80}\u{9B}\u{9F}\u{A0}b").encoded(), "\"a\\u0080\\u009b\\u009f\u{A0}b\"")
        XCTAssertEqual(JSON.string("\u{2027}\u{2028}\u{2029}\u{202A}\u{202E}\u{202F}").encoded(),
                       "\"\u{2027}\\u2028\\u2029\\u202a\\u202e\u{202F}\"")
        XCTAssertEqual(JSON.string("\u{2065}\u{2066}\u{2069}\u{206A}x").encoded(), "\"\u{2065}\\u2066\\u2069\u{206A}x\"")
        // At the very end of the text.
        XCTAssertEqual(JSON.string("é\u{2028}").encoded(), #""é\u2028""#)
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
            ("s", .string(allControls + "\"\\/ é 📶 \u{7F}\u{80}\u{9B}\u{2028}\u{202E}\u{2069}")),
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

    /// A reply as the engine writes it reads back as the same tree, and that tree encodes to the same bytes.
    func testRoundTripOfDaemonReply() throws {
        let h = EngineHarness(links: [Links.eth])
        for line in h.send(h.connect(), "HELP") + h.send(h.connect(), "LINKS") {
            XCTAssertEqual(try JSONParser.parse(line).encoded(), line)
        }
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

/// Replies and events are written straight to bytes by JSONWriter: they must be exactly what the same values
/// encode to as a tree, and read back as they were, whatever the strings hold.
final class ReplyEncodingTests: XCTestCase {
    private let network = NetworkState(routedLinks: [
        makeLink(2, "wlan\t\"0\"", .wifi, metric: 600),
        makeLink(3, "wwan \"0\"\\x", .wwan, metric: 100, metered: true),
        makeLink(4, "eth0", .ethernet, metric: nil),
    ])

    /// Every permission set over the network above (the kernel routes by the cellular link: ok, routed-elsewhere to
    /// Wi-Fi, and the rest), with and without a decision, plus not-ready, no links, and blocked routes.
    private var verdicts: [Verdict] {
        var out: [Verdict] = []
        for (i, p) in allPermissionSets.enumerated() {
            var effective = EffectivePermissions(permissions: p)
            if i % 3 == 0 { effective.sources[.wwan] = .decision }
            if i % 5 == 0 { effective.sources[.wifi] = .once }
            if i % 7 == 0 { effective.sources[.other] = .noAgent }
            out.append(Verdict.compute(app: i % 2 == 0 ? "app\(i)" : "ünïcode \"q\"\tapp", matchedBy: .executable,
                                       effective: effective, network: network, ready: true))
        }
        out.append(Verdict.compute(app: "x", matchedBy: .defaults, permissions: .builtIn, network: network, ready: false))
        out.append(Verdict.compute(app: "x", matchedBy: .name, permissions: .builtIn, network: NetworkState(),
                                   ready: true))
        out.append(Verdict.compute(app: "x", matchedBy: .name, permissions: .builtIn,
                                   network: NetworkState(links: network.links,
                                                         egress: [.ipv4: .blocked(.prohibit), .ipv6: .link(3)]),
                                   ready: true))
        return out
    }

    private func written(_ body: (inout JSONWriter) -> Void) -> String {
        let b = ByteBuffer(capacity: 1)
        var w = JSONWriter(b)
        body(&w)
        w.close()
        return String(decoding: UnsafeBufferPointer(start: b.base, count: b.count), as: UTF8.self)
    }

    func testWrittenBytesEqualTheTreesEncoding() throws {
        let identity = PeerIdentity(pid: 7, uid: 1000, gids: [1000], executable: "/usr/bin/a\"b", unit: nil,
                                    problem: "no\nexe")
        let vs = verdicts
        XCTAssertEqual(vs.count, 84)
        XCTAssertTrue(vs.contains { $0.available && $0.via?.metered == true })
        XCTAssertTrue(vs.contains { $0.reason == .routedElsewhere && $0.bindTo?.name == "wlan\t\"0\"" })
        XCTAssertTrue(vs.contains { $0.egress[.ipv4] == .blocked(.prohibit) })
        XCTAssertTrue(vs.contains { !$0.kinds.denied.isEmpty && !$0.kinds.pending.isEmpty })
        for v in vs {
            // A QUERY's reply, a WAIT's time-out, an app event's members.
            let texts = [
                written { $0.field("ok", true); v.write(to: &$0); $0.object("identity") { identity.write(to: &$0) } },
                written { ProtocolError(.timeout, "\(v.app) may not use the network yet").write(to: &$0); v.write(to: &$0, message: false) },
                written { v.write(to: &$0, matchedBy: false) },
            ]
            for text in texts {
                XCTAssertFalse(text.utf8.contains(0x0A), text)
                let tree = try JSONParser.parse(text)
                XCTAssertEqual(tree.encoded(), text)
                XCTAssertEqual(tree["app"]?.stringValue, v.app)
                XCTAssertEqual(tree["via"]?["name"]?.stringValue, v.via?.name)
                XCTAssertEqual(tree["bind_to"]?["name"]?.stringValue, v.bindTo?.name)
                for family in AddressFamily.allCases {
                    let e = tree["egress"]?[family.rawValue]
                    switch v.egress[family] {
                    case nil: XCTAssertEqual(e, .null)
                    case let .blocked(b)?: XCTAssertEqual(e, .object([("blocked", .string(b.rawValue))]))
                    case let .link(l, allowed)?:
                        XCTAssertEqual(e?["name"]?.stringValue, l.name)
                        XCTAssertEqual(e?["allowed"]?.boolValue, allowed)
                    }
                }
                XCTAssertEqual(tree["reason"]?.stringValue, v.reason.rawValue)
                XCTAssertEqual(tree["denied_kinds"]?.arrayValue?.compactMap(\.stringValue), v.kinds.denied.map(\.rawValue))
                XCTAssertEqual(tree["pending_kinds"]?.arrayValue?.compactMap(\.stringValue), v.kinds.pending.map(\.rawValue))
                for kind in PolicyDimension.allCases {
                    XCTAssertEqual(tree["permissions"]?[kind.rawValue]?.stringValue, v.permissions[kind].rawValue)
                    XCTAssertEqual(tree["sources"]?[kind.rawValue]?.stringValue, (v.sources[kind] ?? .policy).rawValue)
                }
            }
            XCTAssertEqual(try JSONParser.parse(texts[0])["identity"]?["problem"], "no\nexe")
            XCTAssertEqual(try JSONParser.parse(texts[0])["identity"]?["executable"], "/usr/bin/a\"b")
        }
    }

    /// The member order a reply's verdict has (PROTOCOL.md's QUERY).
    func testVerdictMembersInOrder() throws {
        let v = verdicts[5]
        let tree = try JSONParser.parse(written { $0.field("ok", true); v.write(to: &$0) })
        XCTAssertEqual(tree.keys, ["ok", "app", "matched_by", "available", "reason", "via", "egress", "bind_to",
                                   "denied_kinds", "pending_kinds", "permissions", "sources", "enforced", "enforced_why", "message"])
        XCTAssertEqual(tree["permissions"]?.keys, ["wifi", "wwan", "ethernet", "other", "metered", "roaming"])
        XCTAssertEqual(tree["sources"]?.keys, ["wifi", "wwan", "ethernet", "other", "metered", "roaming"])
        XCTAssertEqual(try JSONParser.parse(written { v.write(to: &$0, matchedBy: false) }).keys,
                       ["app", "available", "reason", "via", "egress", "bind_to", "denied_kinds", "pending_kinds",
                        "permissions", "sources", "enforced", "enforced_why", "message"])
    }

    /// A link whose name needs escaping, through the engine: LINKS, QUERY's via, and a link event read it back.
    func testEscapedLinkNameThroughTheEngine() {
        let name = "wwan \"0\"\\x\u{1}"
        let h = EngineHarness(links: [])
        let sub = h.connect()
        _ = h.subscribe(sub, "links")
        h.setLinks([makeLink(3, name, .wwan, metric: 100)])
        XCTAssertEqual(h.takeEvents(sub).first?["link"]?["name"]?.stringValue, name)
        XCTAssertEqual(h.request(sub, "LINKS")["links"]?.arrayValue?.first?["name"]?.stringValue, name)
        XCTAssertEqual(h.request(sub, "DECIDE tester wwan allow")["via"]?["name"]?.stringValue, name)
    }

    /// Strings of every length around the buffer's short-copy cases, escapes included, grow the buffer correctly.
    func testStringsOfEveryShortLength() {
        let buffer = ByteBuffer(capacity: 1)
        var expected = ""
        for n in 0...40 {
            let bytes: [UInt8] = (0..<n).map { (i: Int) -> UInt8 in
                if i % 7 == 6 { return 0x22 }
                if i % 11 == 10 { return 0x0A }
                return UInt8(97 + i % 26)
            }
            let s = String(decoding: bytes, as: UTF8.self)
            JSONWriter.write(s, into: buffer)
            expected += "\"" + s.replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
                + "\""
        }
        XCTAssertEqual(String(decoding: UnsafeBufferPointer(start: buffer.base, count: buffer.count), as: UTF8.self),
                       expected)
    }

    /// Integers as String(i) would write them, at the edges too.
    func testIntegers() {
        for i in [0, 1, -1, 9, 10, -10, 4096, Int.max, Int.min] {
            let b = ByteBuffer(capacity: 1)
            JSONWriter.write(i, into: b)
            XCTAssertEqual(String(decoding: UnsafeBufferPointer(start: b.base, count: b.count), as: UTF8.self), String(i))
        }
    }

    func testKindKeysAreTheRawValues() {
        for kind in LinkKind.allCases { XCTAssertEqual(kind.key.description, kind.rawValue) }
    }
}

/// PROTOCOL.md's examples, read from the file, are what the engine says in the same situation: the document
/// and the daemon cannot drift apart unnoticed.
final class ProtocolDocTests: XCTestCase {
    private func protocolText(file: StaticString = #filePath) throws -> String {
        let tests = URL(fileURLWithPath: "\(file)").deletingLastPathComponent()
        let path = tests.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/PROTOCOL.md")
        return try String(contentsOf: path, encoding: .utf8)
    }

    /// The complete JSON objects the section under `heading` shows (elided ones, with "...", are skipped, but
    /// complete objects inside them are kept).
    private func examples(under heading: String) throws -> [JSON] {
        let doc = try protocolText()
        guard let r = doc.range(of: heading) else {
            XCTFail("PROTOCOL.md has no \(heading)")
            return []
        }
        var section = doc[r.upperBound...]
        if let next = section.range(of: "\n#") { section = section[..<next.lowerBound] }
        var out: [JSON] = []
        var i = section.startIndex
        while let open = section[i...].firstIndex(of: "{") {
            var depth = 0, inString = false, escaped = false
            var end: Substring.Index?
            var j = open
            scan: while j < section.endIndex {
                let c = section[j]
                if inString {
                    if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { inString = false }
                } else if c == "\"" {
                    inString = true
                } else if c == "{" {
                    depth += 1
                } else if c == "}" {
                    depth -= 1
                    if depth == 0 { end = j; break scan }
                }
                j = section.index(after: j)
            }
            guard let e = end else { break }
            if let v = try? JSONParser.parse(String(section[open...e])) {
                out.append(v)
                i = section.index(after: e)
            } else {
                i = section.index(after: open)
            }
        }
        return out
    }

    private func example(under heading: String, startingWith keys: [String], file: StaticString = #filePath,
                         line: UInt = #line) throws -> JSON {
        let found = try examples(under: heading).first { Array($0.keys.prefix(keys.count)) == keys }
        return try XCTUnwrap(found, "no example \(keys) under \(heading)", file: file, line: line)
    }

    private func without(_ key: String, _ v: JSON) -> JSON {
        guard case let .object(m) = v else { return v }
        return .object(m.filter { $0.0 != key })
    }

    func testStatusAsDocumented() throws {
        let doc = try example(under: "### `STATUS`", startingWith: ["ok", "version"])
        let policy = (1...4).map { "[App a\($0)]\nUser=\($0)\n" }.joined()
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.eth, Links.wlan, Links.wwan])
        let r = h.request(h.connect(), "STATUS")
        XCTAssertEqual(without("version", r), without("version", doc))
        XCTAssertEqual(r.keys, doc.keys)
    }

    func testLinkAsDocumented() throws {
        let doc = try example(under: "### `LINKS`", startingWith: ["index", "name"])
        var wlan = makeLink(3, "wlan0", .wifi, metric: 600)
        wlan.addresses = ["192.0.2.10/24", "fe80::1/64"]
        wlan.wifi.ssid = Array("HomeNet".utf8)
        wlan.wifi.bssid = "02:00:5e:10:00:01"
        let h = EngineHarness(links: [wlan])
        XCTAssertEqual(h.request(h.connect(), "LINKS")["links"]?.arrayValue?.first, doc)
    }

    func testQueryAsDocumented() throws {
        let doc = try example(under: "### `QUERY [APP]`", startingWith: ["ok", "app"])
        // The kernel routes by cellular (its metric is best), which updater may not use; Wi-Fi is its way out.
        let h = EngineHarness(policy: "[App updater]\nExecutable=/usr/bin/apt-get\nWWAN=deny\n",
                              links: [Links.wlan, makeLink(4, "wwan0", .wwan, metric: 50)])
        let c = h.connect(makePeer(uid: 0, exe: "/usr/bin/apt-get", unit: "apt-daily.service", pid: 812))
        XCTAssertEqual(h.request(c, "QUERY"), doc)
    }

    func testSubscribeAcknowledgementsAsDocumented() throws {
        let doc = try example(under: "### `SUBSCRIBE [TOPIC...]`", startingWith: ["ok", "subscribed"])
        let h = EngineHarness(links: [Links.eth])
        XCTAssertEqual(h.subscribe(h.connect(makePeer(uid: 1000, exe: "/usr/bin/monitor"))).ack, doc)
        let socat = try example(under: "## Prompts", startingWith: ["ok", "subscribed"])
        XCTAssertEqual(h.subscribe(h.connect(makePeer(uid: 0, exe: "/usr/bin/socat")), "links apps").ack, socat)
    }

    func testDecideAndForgetAsDocumented() throws {
        let decided = try example(under: "### `DECIDE", startingWith: ["app", "kind", "decision"])
        let forgotten = try example(under: "### `FORGET", startingWith: ["ok", "forgotten"])
        let h = EngineHarness(links: [Links.wwan])
        let c = h.connect()
        XCTAssertEqual(h.request(c, "DECIDE maps wwan allow")["decided"], decided)
        XCTAssertEqual(h.request(c, "FORGET maps wwan"), forgotten)
    }

    func testSimpleRepliesAsDocumented() throws {
        let h = EngineHarness(links: [Links.wwan])
        let c = h.connect()
        XCTAssertEqual(h.request(c, "PING"), try example(under: "### `PING`", startingWith: ["ok", "pong"]))
        XCTAssertEqual(h.request(c, "RELOAD").keys, try example(under: "### `RELOAD`", startingWith: ["ok"]).keys)
        XCTAssertEqual(h.request(c, "HELP")["verbs"]?.arrayValue?.first?.keys,
                       try example(under: "### `HELP`", startingWith: ["verb"]).keys)
        XCTAssertEqual(h.request(c, "FROB").keys, try example(under: "## Framing", startingWith: ["ok", "error"]).keys)
        XCTAssertEqual(h.request(c, "QUIT"), try example(under: "### `QUIT`", startingWith: ["ok", "bye"]))
    }

    /// Every error code the engine can send is in the table, and the table has no code the engine lacks.
    func testErrorCodesAsDocumented() throws {
        let doc = try protocolText()
        let start = try XCTUnwrap(doc.range(of: "## Error codes"))
        let end = try XCTUnwrap(doc.range(of: "## Verbs"))
        let table = doc[start.upperBound..<end.lowerBound].split(separator: "\n").filter { $0.hasPrefix("| `") }
            .compactMap { row in row.split(separator: "`").dropFirst().first.map(String.init) }
        // not-ready and no-identity are in the enum, but nothing sends them any more.
        let sent = ErrorCode.allCases.filter { $0 != .notReady && $0 != .noIdentity }.map(\.rawValue)
        XCTAssertEqual(Set(table), Set(sent))
    }
}
