// SPDX-License-Identifier: LGPL-2.1-or-later
import XCTest
// Verb(ascii:) is internal: the engine is its only user.
@testable import NetpermCore
@testable import NetpermProtocol

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Request parsing: what the client typed, turned into a verb or a stable error code; time-outs as WAIT takes them.
final class RequestParserTests: XCTestCase {
    private func parse(_ s: String) -> Result<Request, RequestError>? { RequestParser.parse(bytes(s)) }

    private func code(_ r: Result<Request, RequestError>?) -> ErrorCode? {
        if case let .failure(e)? = r { return e.error.code }
        return nil
    }

    func testVerbsAreCaseInsensitive() {
        for s in ["PING", "ping", "Ping", "pInG"] { XCTAssertEqual(try parse(s)?.get(), .ping, s) }
        XCTAssertEqual(try parse("status")?.get(), .status)
        XCTAssertEqual(try parse("Links")?.get(), .links)
        XCTAssertEqual(try parse("HELP")?.get(), .help)
        XCTAssertEqual(try parse("quit")?.get(), .quit)
    }

    func testArgumentsSplitOnSpacesAndTabs() {
        XCTAssertEqual(try parse("  SUBSCRIBE \t links   apps ")?.get(), .subscribe([.links, .apps]))
        XCTAssertEqual(try parse("wait\tfirefox\r0.5")?.get(), .wait(app: "firefox", timeout: 500_000))
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
        XCTAssertEqual(e.error.code, .unknownVerb)
        XCTAssertNil(e.verb)
        XCTAssertTrue(e.error.message.contains("'FROB'"), e.error.message)
    }

    /// An echoed unknown verb is capped so a client cannot make the reply huge.
    func testUnknownVerbEchoIsCapped() {
        guard case let .failure(e)? = parse(String(repeating: "Q", count: 1000)) else { return XCTFail("expected failure") }
        XCTAssertTrue(e.error.message.contains("'" + String(repeating: "Q", count: 64) + "'"), e.error.message)
        XCTAssertFalse(e.error.message.contains(String(repeating: "Q", count: 65)))
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
            (.notFound, "not-found"), (.notReady, "not-ready"), (.policyInvalid, "policy-invalid"),
            (.noIdentity, "no-identity"), (.timeout, "timeout"), (.internalError, "internal"),
            (.tooManyConnections, "too-many-connections"), (.tooManyDecisions, "too-many-decisions"),
        ]
        for (code, raw) in expected { XCTAssertEqual(code.rawValue, raw) }
        XCTAssertEqual(expected.count, ErrorCode.allCases.count, "a new code needs its row here")
    }

    func testVerbsMatchInAnyCaseAndNothingElse() {
        for (word, verb) in [("query", Verb.query), ("QUERY", .query), ("QuErY", .query), ("wait", .wait),
                             ("Subscribe", .subscribe), ("quit", .quit)] {
            XCTAssertEqual(Verb(ascii: ArraySlice(word.utf8)), verb, word)
        }
        for word in ["quer", "queryy", "", "qu ery", "QUERY\u{0}", "ping1"] {
            XCTAssertNil(Verb(ascii: ArraySlice(word.utf8)), word)
        }
    }

    // MARK: Seconds

    func testParseSeconds() {
        let table: [(String, UInt64?)] = [
            ("30", 30_000_000), ("0.5", 500_000), ("1.25", 1_250_000), (".5", 500_000), ("0", 0),
            ("5.", 5_000_000), ("0.000001", 1), ("1.1234567", 1_123_456), ("99999999", 99_999_999_000_000),
            ("", nil), ("-1", nil), ("1e3", nil), ("abc", nil), (".", nil), ("1.2.3", nil), ("+1", nil),
            (" 1", nil), ("0x10", nil), ("100000000", nil), ("nan", nil), ("inf", nil),
        ]
        for (text, expected) in table {
            XCTAssertEqual(Seconds.parseMicroseconds(text), expected, "'\(text)'")
        }
    }

    /// Only ASCII digits are digits. A digit followed by a combining mark is one Character that sorts between
    /// "0" and "9", so a Character-range check lets it through and the fraction then silently becomes 0.
    func testParseSecondsRejectsNonASCIIDigits() {
        for text in ["1.5\u{0301}", "2\u{0301}", "1.\u{0665}", "\u{FF15}"] {
            XCTAssertNil(Seconds.parseMicroseconds(text), "'\(text)' (\(text.unicodeScalars.map { $0.value }))")
        }
    }
}
