// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermProtocol
import XCTest

/// Other people's text on a terminal (defect 7 of issue 14): every control, the bidi controls and invalid UTF-8
/// are written visibly, nothing else changes.
final class SafeTextTests: XCTestCase {
    /// What an unprivileged user put in a directory name to rewrite the agent's prompt line.
    static let hostile = "/tmp/\u{1B}[2K\u{1B}[1A\r\u{1B}]0;title\u{7}\u{9B}31m\u{202E}gpj.exe\u{2066}\u{7F}\nFORGED"

    func testEveryControlIsWrittenVisibly() {
        XCTAssertEqual(SafeText.escape(Self.hostile),
                       #"/tmp/\x1b[2K\x1b[1A\r\x1b]0;title\x07\u{9b}31m\u{202e}gpj.exe\u{2066}\x7f\nFORGED"#)
        XCTAssertEqual(SafeText.escape("a\tb\0c\u{1F}"), #"a\tb\x00c\x1f"#)
        // Every C0 and C1 control, DEL, U+2028-202E and U+2066-2069; their neighbours are left alone.
        for v: UInt32 in Array(0..<0x20) + Array(0x7F...0x9F) + Array(0x2028...0x202E) + Array(0x2066...0x2069) {
            let c = Unicode.Scalar(v)!
            XCTAssertTrue(SafeText.isUnsafe(c), "U+\(String(v, radix: 16))")
            let escaped = SafeText.escape(String(c))
            XCTAssertTrue(escaped.hasPrefix("\\") && escaped.unicodeScalars.allSatisfy { $0.isASCII && $0.value >= 0x20 },
                          "U+\(String(v, radix: 16)) -> \(escaped.debugDescription)")
        }
        for v: UInt32 in [0x20, 0x7E, 0xA0, 0xE9, 0x2027, 0x202F, 0x2065, 0x206A, 0xFFFD, 0x1F4F6] {
            let c = String(Unicode.Scalar(v)!)
            XCTAssertEqual(SafeText.escape(c), c, "U+\(String(v, radix: 16))")
        }
    }

    /// Backslashes stay: escaping what is escaped changes nothing, so the client may escape at both ends.
    func testEscapingTwiceChangesNothing() {
        let once = SafeText.escape(Self.hostile)
        XCTAssertEqual(SafeText.escape(once), once)
        XCTAssertEqual(SafeText.escape(#"C:\dir\x1b"#), #"C:\dir\x1b"#)
    }

    func testNewlinesCanBeKept() {
        XCTAssertEqual(SafeText.escape("a\u{1B}\nb\r\n", keepingNewlines: true), "a\\x1b\nb\\r\n")
        XCTAssertEqual(SafeText.escape("a\nb"), "a\\nb")
    }

    func testInvalidUTF8IsWrittenAsBytes() {
        XCTAssertEqual(SafeText.escape(utf8: Array("ok é 📶".utf8)), "ok é 📶")
        XCTAssertEqual(SafeText.escape(utf8: [0x61, 0xFF, 0x62, 0x1B]), #"a\xffb\x1b"#)
        // A sequence cut short, an overlong '/', a surrogate, past U+10FFFF, a stray continuation byte.
        XCTAssertEqual(SafeText.escape(utf8: [0xE2, 0x82, 0x41]), #"\xe2\x82A"#)
        XCTAssertEqual(SafeText.escape(utf8: [0xC0, 0xAF]), #"\xc0\xaf"#)
        XCTAssertEqual(SafeText.escape(utf8: [0xED, 0xA0, 0x80]), #"\xed\xa0\x80"#)
        XCTAssertEqual(SafeText.escape(utf8: [0xF4, 0x90, 0x80, 0x80]), #"\xf4\x90\x80\x80"#)
        XCTAssertEqual(SafeText.escape(utf8: [0x80, 0xF0, 0x9F, 0x93, 0xB6]), #"\x80"# + "📶")
        // C1 encoded as UTF-8 is a control like any other.
        XCTAssertEqual(SafeText.escape(utf8: [0xC2, 0x9B]), #"\u{9b}"#)
        XCTAssertEqual(SafeText.escape(utf8: [0xE2, 0x80, 0xAE]), #"\u{202e}"#)
    }

    /// An excerpt is at most its bytes of escaped text, cut between characters and escapes, then "...".
    func testExcerpt() {
        XCTAssertEqual(SafeText.excerpt("abc", maxBytes: 3), "abc")
        XCTAssertEqual(SafeText.excerpt("abcd", maxBytes: 3), "abc...")
        XCTAssertEqual(SafeText.excerpt("ab\u{1B}", maxBytes: 5), "ab...")
        XCTAssertEqual(SafeText.excerpt("ab\u{1B}", maxBytes: 6), #"ab\x1b"#)
        XCTAssertEqual(SafeText.excerpt("aé", maxBytes: 2), "a...")
        XCTAssertEqual(SafeText.excerpt("", maxBytes: 0), "")
        XCTAssertEqual(SafeText.excerpt("x", maxBytes: 0), "...")
        // Only what is shown is looked at: 10 MB of text costs what 60 bytes do.
        let huge = String(repeating: "\u{1B}[2K", count: 2_500_000)
        let t = ContinuousClock.now
        let cut = SafeText.excerpt(huge, maxBytes: 60)
        XCTAssertEqual(cut, String(repeating: #"\x1b[2K"#, count: 8) + #"\x1b..."#)
        XCTAssertLessThan(ContinuousClock.now - t, .milliseconds(50))
    }
}
