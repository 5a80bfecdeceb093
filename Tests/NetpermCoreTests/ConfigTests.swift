import NetpermCore
import XCTest

/// Config and INI parsing. Every error must point at the exact file and line and name the problem, because
/// the daemon refuses to start on a bad config and the message is all the user gets.
final class ConfigTests: XCTestCase {
    private let path = "/etc/netpermd/netpermd.conf"

    private func parse(_ text: String) throws(ConfigError) -> Config {
        try Config.parse(files: [(path: path, text: text)])
    }

    /// Asserts that `text` fails at `line` with a message containing every fragment in `mentions`.
    private func assertError(_ text: String, line expectedLine: Int, mentions: [String],
                             file: StaticString = #filePath, line: UInt = #line) {
        do throws(ConfigError) {
            let config = try parse(text)
            XCTFail("expected an error, got \(config)", file: file, line: line)
        } catch {
            XCTAssertEqual(error.path, path, file: file, line: line)
            XCTAssertEqual(error.line, expectedLine, "wrong line for: \(error.message)", file: file, line: line)
            for m in mentions {
                XCTAssertTrue(error.message.contains(m), "'\(error.message)' should mention '\(m)'",
                              file: file, line: line)
            }
            XCTAssertEqual(error.description, "\(path):\(expectedLine): \(error.message)", file: file, line: line)
        }
    }

    // MARK: good files

    func testGoodFile() throws {
        let text = """
        # netpermd configuration
        ; semicolon comments too

        [Interface wwan*]
        Metered=no

        [Interface enp0s20f0u*]
          Kind = wwan
        \tMetered\t=\tyes\t
        [Interface usb0]
        Kind=WiFi
        """
        let config = try parse(text)
        XCTAssertEqual(config.interfaces, [
            InterfaceOverride(glob: try Glob("wwan*"), kind: nil, metered: false),
            InterfaceOverride(glob: try Glob("enp0s20f0u*"), kind: .wwan, metered: true),
            InterfaceOverride(glob: try Glob("usb0"), kind: .wifi, metered: nil),
        ])
    }

    func testEmptyAndCommentOnlyFiles() throws {
        XCTAssertEqual(try parse(""), Config())
        XCTAssertEqual(try parse("# nothing\n; here\n\n   \n"), Config())
    }

    /// Files written on Windows: the "\r" must not end up in values or break headers. (In Swift "\r\n" is a single
    /// Character, so splitting a String on "\n" does not split CRLF lines at all.)
    func testCRLF() throws {
        let config = try parse("[Interface eth0]\r\nMetered=yes\r\n")
        XCTAssertEqual(config.interfaces, [InterfaceOverride(glob: try Glob("eth0"), kind: nil, metered: true)])
    }

    /// Line numbers must still count CRLF lines.
    func testCRLFErrorLine() {
        assertError("# c\r\n[Interface eth0]\r\nMetered=maybe\r\n", line: 3, mentions: ["'maybe'"])
    }

    func testBooleanSpellings() {
        for s in ["yes", "true", "on", "1", "YES", "True"] { XCTAssertEqual(Ini.parseBool(s), true, s) }
        for s in ["no", "false", "off", "0", "No", "OFF"] { XCTAssertEqual(Ini.parseBool(s), false, s) }
        for s in ["", "y", "n", "2", "yes please"] { XCTAssertNil(Ini.parseBool(s), s) }
    }

    /// Drop-ins are appended after the main file, so their sections come later and win.
    func testDropInsAppendInOrder() throws {
        let config = try Config.parse(files: [
            (path: "/etc/netpermd/netpermd.conf", text: "[Interface ww*]\nMetered=no\n"),
            (path: "/etc/netpermd/netpermd.conf.d/10-modem.conf", text: "[Interface wwan0]\nKind=ethernet\n"),
        ])
        XCTAssertEqual(config.interfaces.map(\.glob.pattern), ["ww*", "wwan0"])
        XCTAssertEqual(config.interfaces.map(\.kind), [nil, .ethernet])
    }

    /// An error in a drop-in names the drop-in, not the main file.
    func testErrorInDropInNamesThatFile() {
        let dropIn = "/etc/netpermd/netpermd.conf.d/20-bad.conf"
        XCTAssertThrowsError(try Config.parse(files: [
            (path: path, text: "[Interface ww*]\nMetered=no\n"),
            (path: dropIn, text: "\n\n[Interface x]\nMetered=perhaps\n"),
        ])) { error in
            XCTAssertEqual((error as? ConfigError)?.path, dropIn)
            XCTAssertEqual((error as? ConfigError)?.line, 4)
        }
    }

    func testIniKeepsSectionArgumentAndLines() throws {
        let sections = try Ini.parse("\n[Interface   wl* ]\nKind=a=b\n[Other]\n", path: "p")
        XCTAssertEqual(sections.count, 2)
        XCTAssertEqual(sections[0].name, "Interface")
        XCTAssertEqual(sections[0].argument, "wl*")
        XCTAssertEqual(sections[0].line, 2)
        XCTAssertEqual(sections[0].entries.map(\.key), ["Kind"])
        XCTAssertEqual(sections[0].entries.map(\.value), ["a=b"])
        XCTAssertEqual(sections[0].entries.map(\.line), [3])
        XCTAssertEqual(sections[1].name, "Other")
        XCTAssertNil(sections[1].argument)
        XCTAssertEqual(sections[1].line, 4)
    }

    // MARK: errors, each with its line

    func testUnknownSection() {
        assertError("# c\n[Interface wl*]\nKind=wifi\n[Network]\nDHCP=yes\n", line: 4,
                    mentions: ["unknown section", "[Network]"])
    }

    func testUnknownKey() {
        assertError("[Interface wl*]\nKind=wifi\n\nMTU=1400\n", line: 4, mentions: ["unknown key", "'MTU'"])
    }

    /// Keys are case-sensitive as in systemd: "kind" is not "Kind".
    func testKeyIsCaseSensitive() {
        assertError("[Interface wl*]\nkind=wifi\n", line: 2, mentions: ["unknown key", "'kind'"])
    }

    func testBadKindValue() {
        assertError("[Interface wl*]\n\nKind=cellular\n", line: 3,
                    mentions: ["'cellular'", "Kind=", "wifi, wwan, ethernet, loopback, other"])
    }

    func testBadMeteredValue() {
        assertError("[Interface wl*]\nKind=wifi\nMetered=sometimes\n", line: 3, mentions: ["'sometimes'", "Metered="])
    }

    func testKeyBeforeSection() {
        assertError("# leading comment\nKind=wifi\n[Interface wl*]\n", line: 2, mentions: ["'Kind='", "before any [Section]"])
    }

    func testMalformedHeader() {
        assertError("[Interface wl*]\nKind=wifi\n[Interface ww*\nMetered=no\n", line: 3,
                    mentions: ["malformed section header", "'[Interface ww*'"])
        assertError("\n[]\n", line: 2, mentions: ["malformed section header"])
    }

    func testEmptySectionName() {
        assertError("[  ]\n", line: 1, mentions: ["empty section name"])
    }

    func testMissingEquals() {
        assertError("[Interface wl*]\nKind wifi\n", line: 2, mentions: ["Key=value", "'Kind wifi'"])
    }

    func testMissingKey() {
        assertError("[Interface wl*]\n = wifi\n", line: 2, mentions: ["missing key"])
    }

    func testInterfaceWithoutGlob() {
        assertError("\n[Interface]\nKind=wifi\n", line: 2, mentions: ["[Interface] needs a name or glob"])
        assertError("[Interface   ]\nKind=wifi\n", line: 1, mentions: ["[Interface] needs a name or glob"])
    }

    func testInvalidGlob() {
        assertError("[Interface ww*]\nMetered=no\n[Interface wl[0-9]\nKind=wifi\n", line: 3,
                    mentions: ["unclosed '['", "'wl[0-9'"])
    }

    func testInterfaceWithNeitherKey() {
        assertError("[Interface ww*]\nMetered=no\n\n[Interface eth*]\n# Kind=wifi\n", line: 4,
                    mentions: ["[Interface eth*]", "neither Kind= nor Metered="])
    }

    func testDescriptionFormat() {
        let e = ConfigError(path: "/a.conf", line: 7, message: "boom")
        XCTAssertEqual(e.description, "/a.conf:7: boom")
        // A file-level problem (no line) must not print ":0:".
        XCTAssertEqual(ConfigError(path: "/a.conf", line: 0, message: "unreadable").description, "/a.conf: unreadable")
    }
}
