// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermPolicy
import XCTest

/// Glob claims to behave like fnmatch(3) without flags; each case states the expected answer and is also
/// checked against the C library's fnmatch, so a wrong expectation here cannot hide a wrong matcher.
final class GlobTests: XCTestCase {
    private func check(_ pattern: String, _ text: String, _ expected: Bool,
                       file: StaticString = #filePath, line: UInt = #line) {
        let glob: Glob
        do { glob = try Glob(pattern) } catch {
            XCTFail("'\(pattern)' rejected: \(error.message)", file: file, line: line)
            return
        }
        XCTAssertEqual(glob.matches(text), expected, "'\(pattern)' vs '\(text)'", file: file, line: line)
        XCTAssertEqual(fnmatch(pattern, text, 0) == 0, expected,
                       "test expectation disagrees with fnmatch(3) for '\(pattern)' vs '\(text)'",
                       file: file, line: line)
    }

    func testLiteral() {
        check("wwan0", "wwan0", true)
        check("wwan0", "wwan01", false)
        check("wwan0", "wwan", false)
        check("", "", true)
        check("", "a", false)
    }

    func testStar() {
        check("*", "", true)
        check("*", "enp3s0", true)
        check("ww*", "wwan0", true)
        check("ww*", "ww", true)
        check("ww*", "wlan0", false)
        check("*0", "wwan0", true)
        check("*0", "wwan1", false)
        check("e*s*0", "enp3s0", true)
        check("e*s*1", "enp3s0", false)
        // Backtracking: the first 'a' tried for "*a" is not the one that must match.
        check("*ab", "aaab", true)
        check("*a*b*c", "xaybzc", true)
        check("*a*b*c", "xaybz", false)
        check("**", "x", true)
    }

    func testQuestionMark() {
        check("wlan?", "wlan0", true)
        check("wlan?", "wlan", false)
        check("wlan?", "wlan10", false)
        check("??", "ab", true)
        check("?", "", false)
    }

    func testRange() {
        check("eth[0-3]", "eth2", true)
        check("eth[0-3]", "eth4", false)
        check("[a-z]*", "wlp2s0", true)
        check("[a-z]*", "Wlp2s0", false)
        check("wl[pxa]*", "wlx00c0ca", true)
        check("wl[pxa]*", "wlo1", false)
        // A leading ']' is a member, and '-' at the end is literal.
        check("[]a]", "]", true)
        check("[a-]", "-", true)
        check("[a-]", "b", false)
    }

    func testNegatedClass() {
        check("eth[!0]", "eth1", true)
        check("eth[!0]", "eth0", false)
        check("[!x]*", "wlan0", true)
        check("[!x]*", "xl0", false)
        check("[^x]", "y", true)
        check("[^x]", "x", false)
        check("[!]]", "]", false)
        check("[!]]", "a", true)
        // A negated class still consumes exactly one character.
        check("a[!b]", "a", false)
    }

    func testEscapes() {
        check("\\*", "*", true)
        check("\\*", "x", false)
        check("a\\?", "a?", true)
        check("a\\?", "ab", false)
        check("a\\[b", "a[b", true)
        check("\\\\", "\\", true)
        check("*\\*", "wwan*", true)
        check("*\\*", "wwan0", false)
    }

    /// `\[` is an escaped bracket, not an unclosed class, so it must be accepted.
    func testEscapedBracketIsNotUnclosed() throws {
        let g = try Glob("foo\\[")
        XCTAssertTrue(g.matches("foo["))
        XCTAssertFalse(g.matches("foo"))
    }

    /// POSIX: '[' inside a bracket expression is an ordinary member, so "[[]" matches "[".
    func testBracketAsClassMember() {
        check("[[]", "[", true)
        check("eth[0[]", "eth[", true)
        check("eth[0[]", "eth1", false)
    }

    func testUnclosedBracketThrows() {
        for pattern in ["[", "wl[", "eth[0-3", "[!", "[]", "x[!]"] {
            XCTAssertThrowsError(try Glob(pattern), "'\(pattern)' should be invalid") { error in
                guard let invalid = error as? Glob.Invalid else { return XCTFail("wrong error type \(error)") }
                XCTAssertEqual(invalid.message, "unclosed '[' in glob '\(pattern)'")
            }
        }
    }

    func testIsLiteral() throws {
        XCTAssertTrue(try Glob("wwan0").isLiteral)
        XCTAssertFalse(try Glob("wwan*").isLiteral)
        XCTAssertFalse(try Glob("wwan?").isLiteral)
        XCTAssertFalse(try Glob("wwan[0]").isLiteral)
        XCTAssertFalse(try Glob("wwan\\0").isLiteral)
    }

    func testPatternIsKept() throws {
        XCTAssertEqual(try Glob("ww*").pattern, "ww*")
    }
}
