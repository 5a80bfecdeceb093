// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import NetpermProtocol
import XCTest

/// Config and INI parsing. Every problem must point at the exact file and line, name its section and the
/// problem, because the message is all the user gets; unknown sections and keys are warnings, as in systemd.
final class ConfigTests: XCTestCase {
    private let path = "/etc/netpermd/netpermd.conf"

    private func parse(_ text: String) throws(ConfigError) -> Config {
        try Config.parse(files: [(path: path, text: text)]).get()
    }

    /// Every problem's "path:line: message", in the order reported.
    private func problems(_ text: String) -> [String] {
        Config.parse(files: [(path: path, text: text)]).problems.map(\.description)
    }

    /// Asserts that `text` fails with one error, at `line`, whose message contains every fragment in `mentions`.
    private func assertError(_ text: String, line expectedLine: Int, mentions: [String],
                             file: StaticString = #filePath, line: UInt = #line) {
        let parsed = Config.parse(files: [(path: path, text: text)])
        XCTAssertNil(parsed.config, "expected an error", file: file, line: line)
        guard parsed.errors.count == 1, let error = parsed.errors.first else {
            return XCTFail("expected one error, got \(parsed.problems)", file: file, line: line)
        }
        XCTAssertEqual(error.path, path, file: file, line: line)
        XCTAssertEqual(error.line, expectedLine, "wrong line for: \(error.text)", file: file, line: line)
        for m in mentions {
            XCTAssertTrue(error.text.contains(m), "'\(error.text)' should mention '\(m)'", file: file, line: line)
        }
        XCTAssertEqual(error.description, "\(path):\(expectedLine): \(error.text)", file: file, line: line)
        XCTAssertEqual(parsed.failure, error.description, file: file, line: line)
    }

    /// Asserts that `text` loads, with exactly these warnings ("LINE: MESSAGE").
    private func assertWarnings(_ text: String, _ expected: [String], file: StaticString = #filePath, line: UInt = #line) {
        let parsed = Config.parse(files: [(path: path, text: text)])
        XCTAssertNotNil(parsed.config, "warnings alone must not fail the load: \(parsed.problems)", file: file, line: line)
        let want = expected.map { w -> String in
            let colon = w.firstIndex(of: ":")!
            return "\(path):\(w[..<colon]): warning:\(w[w.index(after: colon)...])"
        }
        XCTAssertEqual(parsed.problems.map(\.description), want, file: file, line: line)
        XCTAssertEqual(parsed.warningCount, expected.count, file: file, line: line)
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
        ]).get()
        XCTAssertEqual(config.interfaces.map(\.glob.pattern), ["ww*", "wwan0"])
        XCTAssertEqual(config.interfaces.map(\.kind), [nil, .ethernet])
    }

    /// An error in a drop-in names the drop-in, not the main file.
    func testErrorInDropInNamesThatFile() {
        let dropIn = "/etc/netpermd/netpermd.conf.d/20-bad.conf"
        XCTAssertThrowsError(try Config.parse(files: [
            (path: path, text: "[Interface ww*]\nMetered=no\n"),
            (path: dropIn, text: "\n\n[Interface x]\nMetered=perhaps\n"),
        ]).get()) { error in
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

    // MARK: warnings: ignored, with the file, the line and the section

    func testUnknownSectionIsIgnoredWithAWarning() throws {
        let text = "# c\n[Interface wl*]\nKind=wifi\n[Match]\nDHCP=yes\nKind=wwan\n"
        // Its entries are not read: no warning for DHCP=, and Kind=wwan does not reach [Interface wl*].
        assertWarnings(text, ["4: [Match]: unknown section (expected [Defaults], [App NAME], [Interface GLOB], [Network SSID], [Enforcement], [Usage] or [Report]); "
            + "ignored"])
        XCTAssertEqual(try parse(text), try parse("[Interface wl*]\nKind=wifi\n"))
    }

    func testUnknownSectionHints() {
        assertWarnings("[interface wl*]\nKind=wifi\n", ["1: [interface wl*]: unknown section (did you mean "
            + "[Interface wl*]? section names are case-sensitive); ignored"])
        assertWarnings("\n[Default]\nWWAN=deny\n", ["2: [Default]: unknown section (did you mean [Defaults]?); ignored"])
        assertWarnings("[Apps firefox]\nUser=1\n", ["1: [Apps firefox]: unknown section (did you mean [App firefox]?); "
            + "ignored"])
        // Whitespace ends the name: a tab before the argument is a space.
        XCTAssertEqual(problems("[App\tfirefox]\nUser=1\n"), [])
    }

    func testUnknownKeyIsIgnoredWithAWarning() throws {
        let text = "[Interface wl*]\nKind=wifi\n\nMTU=1400\n"
        assertWarnings(text, ["4: [Interface wl*]: unknown key 'MTU' (expected Kind=, Metered= or Roaming=); ignored"])
        XCTAssertEqual(try parse(text).interfaces, [InterfaceOverride(glob: try Glob("wl*"), kind: .wifi, metered: nil)])
    }

    func testUnknownKeyHints() {
        assertWarnings("[Interface usb*]\nKindd=wwan\nMetered=yes\n",
                       ["2: [Interface usb*]: unknown key 'Kindd' (did you mean Kind=?); ignored"])
        assertWarnings("[Interface usb*]\nKind=wwan\nMetred=yes\n",
                       ["3: [Interface usb*]: unknown key 'Metred' (did you mean Metered=?); ignored"])
        assertWarnings("[Interface usb*]\nKind=wwan\nWWAN=deny\n",
                       ["3: [Interface usb*]: unknown key 'WWAN' (WWAN= belongs in [Defaults] or [App NAME]); ignored"])
    }

    /// Keys are case-sensitive as in systemd: "kind" is not "Kind", and the warning says so. The section is then
    /// left with nothing to do, which is an error of its own (reported at its header, so first).
    func testKeyIsCaseSensitive() {
        XCTAssertEqual(problems("[Interface wl*]\nkind=wifi\n"), [
            "\(path):1: [Interface wl*]: sets none of Kind=, Metered=, Roaming=",
            "\(path):2: warning: [Interface wl*]: unknown key 'kind' (did you mean Kind=? keys are case-sensitive); ignored",
        ])
    }

    // MARK: errors, each with its line and section

    func testBadKindValue() {
        assertError("[Interface wl*]\n\nKind=cellular\n", line: 3,
                    mentions: ["'cellular'", "Kind=", "wifi, wwan, ethernet, loopback, other"])
    }

    func testBadMeteredValue() {
        assertError("[Interface wl*]\nKind=wifi\nMetered=sometimes\n", line: 3, mentions: ["'sometimes'", "Metered="])
    }

    func testKeyBeforeSection() {
        assertError("# leading comment\nKind=wifi\n[Interface wl*]\nKind=wifi\n", line: 2, mentions: ["'Kind='", "before any [Section]"])
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
        XCTAssertEqual(problems("[Interface wl*]\nKind wifi\nMetered=no\n"),
                       ["\(path):2: [Interface wl*]: expected 'Key=value' or '[Section]', got 'Kind wifi'"])
    }

    func testMissingKey() {
        XCTAssertEqual(problems("[Interface wl*]\n = wifi\nKind=wifi\n"),
                       ["\(path):2: [Interface wl*]: missing key before '=' in '= wifi'"])
    }

    /// The lines after a bad header belong to no section: not added to the one before, not reported again.
    func testLinesAfterABadHeaderAreSkipped() {
        XCTAssertEqual(problems("[Interface wl*]\nKind=wifi\n[Interface ww*\nBogus=1\nKind=nonsense\n"),
                       ["\(path):3: malformed section header '[Interface ww*'"])
        XCTAssertEqual(problems("[ ]\nBogus=1\n[Interface x]\nBogus=2\nKind=wifi\n"), [
            "\(path):1: empty section name '[ ]'",
            "\(path):4: warning: [Interface x]: unknown key 'Bogus' (expected Kind=, Metered= or Roaming=); ignored",
        ])
    }

    func testInterfaceWithoutGlob() {
        assertError("\n[Interface]\nKind=wifi\n", line: 2, mentions: ["[Interface]: needs a name or glob"])
        assertError("[Interface   ]\nKind=wifi\n", line: 1, mentions: ["[Interface]: needs a name or glob"])
    }

    func testInvalidGlob() {
        assertError("[Interface ww*]\nMetered=no\n[Interface wl[0-9]\nKind=wifi\n", line: 3,
                    mentions: ["[Interface wl[0-9]: unclosed '['", "'wl[0-9'"])
    }

    func testInterfaceWithNeitherKey() {
        assertError("[Interface ww*]\nMetered=no\n\n[Interface eth*]\n# Kind=wifi\n", line: 4,
                    mentions: ["[Interface eth*]: sets none of Kind=, Metered=, Roaming="])
        // A bad value is its own error; "sets neither" would only repeat it.
        assertError("[Interface eth*]\nKind=cable\n", line: 2, mentions: ["[Interface eth*]: bad value 'cable' for Kind="])
        // A header without a glob is one error, not two.
        assertError("[Interface]\n", line: 1, mentions: ["[Interface]: needs a name or glob"])
    }

    // MARK: Metered= and [Network SSID]

    func testMeteredInAppAndDefaults() throws {
        let c = try parse("[Defaults]\nMetered=ask\n[App u]\nUnit=u.service\nMetered=DENY\n[App v]\nUnit=v.service\n")
        XCTAssertEqual(c.defaults.metered, .ask)
        XCTAssertEqual(c.permissions(for: c.app(named: "u")).metered, .deny)
        XCTAssertEqual(c.permissions(for: c.app(named: "v")).metered, .ask, "unset: [Defaults]'s")
        XCTAssertEqual(try parse("").defaults.metered, .allow, "the built-in default changes nothing")
        // In [App] and [Defaults] it is a permission, not [Interface]'s yes/no.
        assertError("[Defaults]\nWiFi=allow\nMetered=yes\n", line: 3,
                    mentions: ["[Defaults]: bad value 'yes' for Metered= (expected allow, deny or ask)"])
        assertError("[App u]\nUnit=u.service\nMetered=sometimes\n", line: 3,
                    mentions: ["[App u]: bad value 'sometimes' for Metered="])
        assertWarnings("[Defaults]\nmetered=deny\n", ["2: [Defaults]: unknown key 'metered' (did you mean Metered=? keys are case-sensitive); ignored"])
    }

    func testNetworkSections() throws {
        let c = try parse("""
        [Network Phone*]
        Metered=yes
        [Network My Cafe]
        Kind=ethernet
        Metered=no
        """)
        XCTAssertEqual(c.networks.map(\.glob.pattern), ["Phone*", "My Cafe"], "in file order; spaces inside are kept")
        XCTAssertEqual(c.networks.map(\.metered), [true, false])
        XCTAssertEqual(c.networks.map(\.kind), [nil, .ethernet])
        XCTAssertTrue(c.networks[0].matches(ssid: Array("Phone 12".utf8)))
        XCTAssertFalse(c.networks[0].matches(ssid: Array("phone".utf8)), "exact case, like [Interface]")
    }

    func testNetworkSectionErrorsNameFileAndLine() {
        assertError("\n[Network]\nMetered=yes\n", line: 2, mentions: ["[Network]: needs a name or glob, e.g. [Network CoffeeShop]"])
        assertError("[Network Cafe]\n# nothing\n", line: 1, mentions: ["[Network Cafe]: sets none of Kind=, Metered=, Roaming="])
        assertError("[Network Cafe]\nMetered=often\n", line: 2, mentions: ["[Network Cafe]: bad value 'often' for Metered= (expected yes or no)"])
        assertError("[Network Cafe]\nKind=cellular\n", line: 2, mentions: ["[Network Cafe]: bad value 'cellular' for Kind="])
        assertError("[Network Cafe[1]\nMetered=no\n", line: 1, mentions: ["[Network Cafe[1]: unclosed '['"])
        assertWarnings("[Network Cafe]\nMetered=no\nDHCP=yes\n", ["3: [Network Cafe]: unknown key 'DHCP' (expected Kind=, Metered= or Roaming=); ignored"])
    }

    /// decisions.conf stores Metered= next to the kinds, reads back the same, and a file from before Metered=
    /// still loads; Metered=ask is no decision.
    func testDecisionsFileWithMetered() throws {
        var d = Decisions()
        d.set("maps", .wwan, .allow, once: false)
        d.set("maps", .metered, .deny, once: false)
        d.set("nav", .metered, .allow, once: true)
        let text = d.encoded()
        XCTAssertTrue(text.contains("[App maps]\nWWAN=allow\nMetered=deny\n"), text)
        XCTAssertFalse(text.contains("nav"), "once-decisions are not written")
        let back = try Decisions.parse(text, path: "/state/decisions.conf")
        XCTAssertEqual(back.lasting, d.lasting)
        let old = try Decisions.parse("[App maps]\nWWAN=allow\nWiFi=deny\n", path: "/state/decisions.conf")
        XCTAssertEqual(old.decision("maps", .wwan)?.0, .allow)
        XCTAssertNil(old.decision("maps", .metered))
        XCTAssertThrowsError(try Decisions.parse("[App a]\nMetered=ask\n", path: "/d")) {
            XCTAssertEqual("\($0)", "/d:2: bad decision 'ask'")
        }
    }

    // MARK: every problem in one pass

    func testEveryProblemOfAFileInOrder() {
        let text = """
        [Interface wl*]
        Kind=radio
        Colour=blue
        [Interface ww*
        Metered=no
        [Interface eth*]
        Metered=often
        junk
        """
        let parsed = Config.parse(files: [(path: path, text: text)])
        XCTAssertNil(parsed.config)
        XCTAssertEqual(parsed.problems.map(\.description), [
            "\(path):2: [Interface wl*]: bad value 'radio' for Kind= (expected one of: wifi, wwan, ethernet, loopback, other)",
            "\(path):3: warning: [Interface wl*]: unknown key 'Colour' (expected Kind=, Metered= or Roaming=); ignored",
            "\(path):4: malformed section header '[Interface ww*'",
            "\(path):7: [Interface eth*]: bad value 'often' for Metered= (expected yes or no)",
            "\(path):8: [Interface eth*]: expected 'Key=value' or '[Section]', got 'junk'",
        ])
        XCTAssertEqual(parsed.errors.map(\.line), [2, 4, 7, 8])
        XCTAssertEqual(parsed.warnings.map(\.line), [3])
        XCTAssertEqual(parsed.errorCount, 4)
        XCTAssertEqual(parsed.warningCount, 1)
        XCTAssertEqual(parsed.failure, "\(path):2: [Interface wl*]: bad value 'radio' for Kind= (expected one of: "
            + "wifi, wwan, ethernet, loopback, other) (and 3 more errors)")
        XCTAssertThrowsError(try parsed.get()) { XCTAssertEqual(($0 as? ConfigError)?.line, 2) }
    }

    func testFailureCountsOneMoreErrorInTheSingular() {
        let parsed = Config.parse(files: [(path: path, text: "[Interface a]\nKind=x\nKind=y\n")])
        XCTAssertEqual(parsed.failure, "\(path):2: [Interface a]: bad value 'x' for Kind= (expected one of: wifi, wwan, "
            + "ethernet, loopback, other) (and 1 more error)")
        XCTAssertNil(Config.parse(files: [(path: path, text: "[Nope]\n")]).failure, "warnings are no failure")
    }

    /// However many problems a file has, only the first `limit` of each kind are kept; all are counted.
    func testProblemsBeyondTheLimitAreCountedNotKept() {
        let text = "[Interface x]\nKind=wifi\n" + String(repeating: "junk\nBogus=1\n", count: 300)
        let parsed = Config.parse(files: [(path: path, text: text)], limit: 10)
        XCTAssertEqual(parsed.errorCount, 300)
        XCTAssertEqual(parsed.warningCount, 300)
        XCTAssertEqual(parsed.errors.count, 10)
        XCTAssertEqual(parsed.warnings.count, 10)
        XCTAssertEqual(parsed.errors.map(\.line), Array(stride(from: 3, to: 23, by: 2)))
        XCTAssertTrue(parsed.failure?.hasSuffix(" (and 299 more errors)") == true, parsed.failure ?? "nil")
        XCTAssertEqual(Config.parse(files: [(path: path, text: text)]).errors.count, 100, "the default limit")
    }

    // MARK: short messages, whatever the file holds

    /// A quoted value is cut to 60 bytes with "..." and control characters escaped, so a huge or binary line makes
    /// a short message on one line.
    func testLongLinesAreCutInMessages() {
        let x60 = String(repeating: "x", count: 60)
        let megabyte = String(repeating: "x", count: 1 << 20)
        XCTAssertEqual(problems("[Defaults]\n" + megabyte + "\n"),
                       ["\(path):2: [Defaults]: expected 'Key=value' or '[Section]', got '\(x60)...'"])
        XCTAssertEqual(problems("[Defaults]\nWWAN=" + megabyte + "\n"),
                       ["\(path):2: [Defaults]: bad value '\(x60)...' for WWAN= (expected allow, deny or ask)"])
        XCTAssertEqual(problems("[Defaults]\n" + megabyte + "=1\n"),
                       ["\(path):2: warning: [Defaults]: unknown key '\(x60)...' (expected WiFi=, WWAN=, Ethernet=, Other=, "
                           + "Metered=, Roaming=, AdminGroup=, PromptTimeoutSec=, UserDecisions=, MeteredBudget= or DesktopApps=); ignore..."])
        XCTAssertEqual(problems(megabyte + "=1\n"), ["\(path):1: '\(x60)...=' appears before any [Section]"])
        // The section a message names is cut too.
        XCTAssertEqual(problems("[Frob " + megabyte + "]\n"), ["\(path):1: warning: [Frob " + x60.dropLast(5)
            + "...]: unknown section (expected [Defaults], [App NAME], [Interface GLOB], [Network SSID], [Enforcement], [Usage] or [Report]); ignored"])
        let app = "a" + megabyte
        XCTAssertEqual(problems("[App \(app)]\nWWAN=deny\n"),
                       ["\(path):1: [App a" + x60.dropLast(5) + "...]: no Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it"])
        for p in problems("[Defaults]\n" + megabyte + "\nWWAN=" + megabyte + "\n[App " + megabyte + "\n") {
            XCTAssertLessThan(p.utf8.count, 300, p)
        }
    }

    /// Defect 3 of issue 14: a 10 MB line, of text or of controls, makes an error under 300 bytes that still names
    /// file:line, wherever the line is quoted (the policy, its drop-ins, the decisions file), and the one line the
    /// daemon replies, logs and sends subscribers (`failure`) is as short.
    func testATenMegabyteLineMakesAShortErrorNamingFileAndLine() throws {
        let tenMB = String(repeating: "x", count: 10 << 20)
        // Every way a line is quoted, with text that needs escaping (shorter: 10 MB of each costs seconds here).
        let kinds = [String(repeating: "\u{1B}[2K\r\u{7}", count: 1 << 13), String(repeating: "é", count: 1 << 15),
                     String(repeating: "\u{202E}\u{9B}", count: 1 << 14)]
        func texts(_ line: String) -> [String] {
            ["[Defaults]\n" + line + "\n", "[Defaults]\nWWAN=" + line + "\n", "[Defaults]\nAdminGroup=x\n" + line + "=1\n",
             "[App a]\nUser=0\nExecutable=" + line + "\n", "[Interface " + line + "]\nKind=bogus\n"]
        }
        for (line, text) in texts(tenMB).prefix(2).map({ (tenMB, $0) }) + kinds.flatMap({ k in texts(k).map { (k, $0) } }) {
            let parsed = Config.parse(files: [(path: path, text: text)])
            let failure = parsed.failure ?? parsed.warnings.first?.description ?? "none"
            // The header's own line, or Kind='s when the header is a valid glob.
            let lineNos = text.hasPrefix("[Interface") ? [1, 2] : [text.split(separator: "\n").firstIndex { $0.contains(line) }! + 1]
            XCTAssertTrue(lineNos.contains { failure.hasPrefix("\(path):\($0): ") }, String(failure.prefix(300)))
            XCTAssertLessThan(failure.utf8.count, 300, String(failure.prefix(300)))
            XCTAssertFalse(failure.unicodeScalars.contains(where: SafeText.isUnsafe), failure)
        }
        for line in [tenMB] + kinds {
            XCTAssertThrowsError(try Decisions.parse("[App a]\nWWAN=" + line + "\n", path: "/state/decisions.conf")) {
                let d = "\($0)"
                XCTAssertTrue(d.hasPrefix("/state/decisions.conf:2: bad decision '"), String(d.prefix(300)))
                XCTAssertLessThan(d.utf8.count, 300, String(d.prefix(300)))
                XCTAssertFalse(d.unicodeScalars.contains(where: SafeText.isUnsafe), d)
            }
        }
        XCTAssertThrowsError(try Decisions.parse("[App a]\n" + kinds[0] + "=allow\n", path: "/d")) {
            XCTAssertLessThan("\($0)".utf8.count, 300, String("\($0)".prefix(300)))
        }
    }

    /// Whatever a caller puts in a message, and whatever the path, the error stays short and on one line.
    func testEveryErrorIsCappedAndEscaped() {
        let e = ConfigError(path: "/etc/x.d/" + String(repeating: "\u{1B}", count: 10_000) + ".conf", line: 3,
                            message: "bad: " + String(repeating: "y\n", count: 1 << 20))
        XCTAssertLessThanOrEqual(e.message.utf8.count, ConfigError.messageLimit + 3, e.message)
        XCTAssertTrue(e.message.hasPrefix("bad: y\\ny\\n"), e.message)
        XCTAssertTrue(e.description.hasPrefix("/etc/x.d/\\x1b\\x1b"), e.description)
        XCTAssertLessThan(e.description.utf8.count, ConfigError.pathLimit + ConfigError.messageLimit + 30)
        XCTAssertFalse(e.description.unicodeScalars.contains(where: SafeText.isUnsafe), e.description)
    }

    /// A config symlinked to /dev/zero reads as 16 MB of NUL bytes (the read limit): one short error, quickly.
    func testAFileOfNULBytes() {
        let zeros = String(decoding: [UInt8](repeating: 0, count: 1 << 24), as: UTF8.self)
        let p = problems(zeros)
        XCTAssertEqual(p, ["\(path):1: expected 'Key=value' or '[Section]', got '"
            + String(repeating: "\\x00", count: 15) + "...'"])
    }

    func testControlCharactersAreEscaped() {
        XCTAssertEqual(problems("[Defaults]\nWWAN=a\u{1}b\u{7F}c\u{1B}[31m\u{85}é\u{202E}\n"),
                       ["\(path):2: [Defaults]: bad value 'a\\x01b\\x7fc\\x1b[31m\\u{85}é\\u{202e}' for WWAN= "
                           + "(expected allow, deny or ask)"])
        XCTAssertEqual(ConfigError.clip("a\tb\rc\nd"), "a\\tb\\rc\\nd")
    }

    /// The limit is in bytes, of the escaped text, and a cut never splits a character or an escape.
    func testClipCountsEscapedBytes() {
        XCTAssertEqual(ConfigError.clip(String(repeating: "é", count: 30)), String(repeating: "é", count: 30))
        XCTAssertEqual(ConfigError.clip(String(repeating: "é", count: 31)), String(repeating: "é", count: 30) + "...")
        XCTAssertEqual(ConfigError.clip(String(repeating: "\u{1B}", count: 16)), String(repeating: "\\x1b", count: 15) + "...")
        XCTAssertEqual(ConfigError.quote(""), "''")
        // Cut in the middle of a long multi-byte line, the quote still ends cleanly.
        let long = String(repeating: "😀", count: 100)
        XCTAssertEqual(problems("[Defaults]\n" + long + "\n"),
                       ["\(path):2: [Defaults]: expected 'Key=value' or '[Section]', got '"
                           + String(repeating: "😀", count: 15) + "...'"])
        XCTAssertEqual(problems("[Defaults]\n" + String(repeating: "x", count: 58) + long + "\n"),
                       ["\(path):2: [Defaults]: expected 'Key=value' or '[Section]', got '"
                           + String(repeating: "x", count: 58) + "...'"])
    }

    func testDescriptionFormat() {
        let e = ConfigError(path: "/a.conf", line: 7, message: "boom")
        XCTAssertEqual(e.description, "/a.conf:7: boom")
        // A file-level problem (no line) must not print ":0:".
        XCTAssertEqual(ConfigError(path: "/a.conf", line: 0, message: "unreadable").description, "/a.conf: unreadable")
        XCTAssertEqual(ConfigError(path: "/a.conf", line: 7, message: "odd", severity: .warning).description,
                       "/a.conf:7: warning: odd")
    }
}
