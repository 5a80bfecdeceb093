// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import XCTest

/// `[Defaults]` and `[App NAME]`: what they set, every error with its exact file, line and message, how drop-ins
/// merge, and who is privileged.
final class PolicyTests: XCTestCase {
    private let main = "/etc/netpermd/netpermd.conf"
    private let dropA = "/etc/netpermd/netpermd.conf.d/10-a.conf"
    private let dropB = "/etc/netpermd/netpermd.conf.d/20-b.conf"

    private func parse(_ files: [(String, String)], accounts: AccountResolver = FakeAccounts())
        throws(ConfigError) -> Config {
        try Config.parse(files: files.map { (path: $0.0, text: $0.1) }, accounts: accounts).get()
    }

    private func parse(_ text: String) throws(ConfigError) -> Config { try parse([(main, text)]) }

    /// Every problem's "path:line: message", in the order reported.
    private func problems(_ files: [(String, String)], accounts: AccountResolver = FakeAccounts()) -> [String] {
        Config.parse(files: files.map { (path: $0.0, text: $0.1) }, accounts: accounts).problems.map(\.description)
    }

    /// Asserts the exact and only error: file, line and whole message.
    private func assertError(_ files: [(String, String)], path: String, line expectedLine: Int, _ message: String,
                             file: StaticString = #filePath, line: UInt = #line) {
        let parsed = Config.parse(files: files.map { (path: $0.0, text: $0.1) }, accounts: FakeAccounts())
        XCTAssertNil(parsed.config, "expected an error, got \(parsed.config?.apps.map(\.id) ?? [])", file: file, line: line)
        XCTAssertEqual(parsed.problems.map(\.description), ["\(path):\(expectedLine): \(message)"], file: file, line: line)
    }

    private func assertError(_ text: String, line expectedLine: Int, _ message: String,
                             file: StaticString = #filePath, line: UInt = #line) {
        assertError([(main, text)], path: main, line: expectedLine, message, file: file, line: line)
    }

    /// Asserts that `text` loads with exactly one warning, at `line`, with this message.
    private func assertWarning(_ text: String, line expectedLine: Int, _ message: String,
                               file: StaticString = #filePath, line: UInt = #line) {
        let parsed = Config.parse(files: [(path: main, text: text)], accounts: FakeAccounts())
        XCTAssertNotNil(parsed.config, "a warning must not fail the load: \(parsed.problems)", file: file, line: line)
        XCTAssertEqual(parsed.problems.map(\.description), ["\(main):\(expectedLine): warning: \(message)"],
                       file: file, line: line)
    }

    private func app(_ config: Config, _ id: String, file: StaticString = #filePath, line: UInt = #line) throws
        -> AppPolicy {
        try XCTUnwrap(config.app(named: id), "no app \(id)", file: file, line: line)
    }

    // MARK: [Defaults]

    func testBuiltInDefaults() throws {
        let config = try parse("")
        XCTAssertEqual(config.defaults.wifi, .allow)
        XCTAssertEqual(config.defaults.wwan, .ask)
        XCTAssertEqual(config.defaults.ethernet, .allow)
        XCTAssertEqual(config.defaults.other, .allow)
        XCTAssertEqual(config.defaults, PermissionSet(wifi: .allow, wwan: .ask, ethernet: .allow, other: .allow))
        XCTAssertEqual(config.adminGroup, "netperm")
        XCTAssertTrue(config.apps.isEmpty)
        // Loopback is never restricted.
        XCTAssertEqual(config.defaults[.loopback], .allow)
    }

    func testDefaultsKeys() throws {
        let config = try parse("[Defaults]\nWiFi=deny\nWWAN=allow\nEthernet=ask\nOther=deny\n")
        XCTAssertEqual(config.defaults, PermissionSet(wifi: .deny, wwan: .allow, ethernet: .ask, other: .deny))
    }

    func testDefaultsPartialKeepsBuiltIns() throws {
        let config = try parse("[Defaults]\nWWAN=deny\n")
        XCTAssertEqual(config.defaults, PermissionSet(wifi: .allow, wwan: .deny, ethernet: .allow, other: .allow))
    }

    func testPermissionValuesAreCaseInsensitive() throws {
        let config = try parse("[Defaults]\nWiFi=DENY\nWWAN=Allow\nEthernet=aSk\n")
        XCTAssertEqual(config.defaults, PermissionSet(wifi: .deny, wwan: .allow, ethernet: .ask, other: .allow))
    }

    func testRepeatedKeyInOneSectionLastWins() throws {
        let config = try parse("[Defaults]\nWWAN=deny\nWWAN=allow\n")
        XCTAssertEqual(config.defaults.wwan, .allow)
    }

    // MARK: [App NAME]

    func testAppIdentityAndPermissions() throws {
        let config = try parse("""
        # apps
        [App firefox]
        Executable=/usr/lib/firefox/firefox /usr/bin/firefox-*
        Executable=/opt/firefox/firefox
        Unit=firefox.service  app-firefox-*.scope
        User=alice 1234
        User=bob
        WWAN=deny
        """)
        let a = try app(config, "firefox")
        XCTAssertEqual(a.executables.map(\.pattern), ["/usr/lib/firefox/firefox", "/usr/bin/firefox-*",
                                                      "/opt/firefox/firefox"])
        XCTAssertEqual(a.units.map(\.pattern), ["firefox.service", "app-firefox-*.scope"])
        XCTAssertEqual(a.uids, [1000, 1234, 1001])
        XCTAssertEqual(a.permissions, PartialPermissions([.wwan: .deny]))
        XCTAssertEqual(a.path, main)
        XCTAssertEqual(a.line, 2)
        XCTAssertEqual(config.permissions(for: a),
                       PermissionSet(wifi: .allow, wwan: .deny, ethernet: .allow, other: .allow))
        XCTAssertEqual(config.permissions(for: nil), config.defaults)
    }

    /// An [App] setting falls back to [Defaults] for what it does not set, whichever comes first in the file.
    func testAppPermissionsResolveOverDefaults() throws {
        let config = try parse("""
        [App a]
        User=alice
        WiFi=ask
        Other=deny
        [Defaults]
        WWAN=deny
        Ethernet=ask
        """)
        XCTAssertEqual(config.permissions(for: try app(config, "a")),
                       PermissionSet(wifi: .ask, wwan: .deny, ethernet: .ask, other: .deny))
    }

    func testNumericAndNamedUsers() throws {
        let config = try parse("[App a]\nUser=0 daemon 65534\n")
        XCTAssertEqual(try app(config, "a").uids, [0, 2, 65534])
    }

    func testValidAppNames() throws {
        let config = try parse("""
        [App a]
        User=1
        [App Firefox-ESR_2.0]
        User=2
        [App org.example.App]
        User=3
        """)
        XCTAssertEqual(config.apps.map(\.id), ["a", "Firefox-ESR_2.0", "org.example.App"])
        for id in ["a", "Firefox-ESR_2.0", "org.example.App", "Z9"] { XCTAssertTrue(AppPolicy.isValidID(id), id) }
        for id in ["", "7zip", "-x", ".x", "_x", "a b", "a/b", "é", "a:b", "caf\u{E9}"] {
            XCTAssertFalse(AppPolicy.isValidID(id), id)
        }
    }

    func testAppsKeepDefinitionOrder() throws {
        let config = try parse("[App zeta]\nUser=1\n[App alpha]\nUser=2\n[App mid]\nUser=3\n")
        XCTAssertEqual(config.apps.map(\.id), ["zeta", "alpha", "mid"])
        XCTAssertEqual(config.apps.map(\.line), [1, 3, 5])
    }

    /// systemd splits list values on any whitespace; the INI parser itself treats tabs as spaces around keys and
    /// values, so "Executable=/a<TAB>/b" must be two paths, not one path containing a tab that never matches.
    func testListValuesSplitOnTabsToo() throws {
        let config = try parse("[App a]\nExecutable=/usr/bin/a\t/usr/bin/b\nUnit=a.service\tb.service\n")
        let a = try app(config, "a")
        XCTAssertEqual(a.executables.map(\.pattern), ["/usr/bin/a", "/usr/bin/b"])
        XCTAssertEqual(a.units.map(\.pattern), ["a.service", "b.service"])
        XCTAssertEqual(config.match(makePeer(exe: "/usr/bin/b")).id, "a")
    }

    // MARK: errors

    // MARK: warnings: unknown keys are ignored

    func testUnknownKeyInDefaults() throws {
        assertWarning("[Defaults]\nWiFi=deny\n\nBogus=yes\n", line: 4, "[Defaults]: unknown key 'Bogus' (expected WiFi=, "
            + "WWAN=, Ethernet=, Other=, Metered=, Roaming=, AdminGroup=, PromptTimeoutSec=, UserDecisions=, MeteredBudget= or DesktopApps=); ignored")
        // Keys are case-sensitive, and the warning says which key was meant.
        assertWarning("[Defaults]\nwifi=allow\n", line: 2,
                      "[Defaults]: unknown key 'wifi' (did you mean WiFi=? keys are case-sensitive); ignored")
        assertWarning("[Defaults]\nWwan=allow\n", line: 2,
                      "[Defaults]: unknown key 'Wwan' (did you mean WWAN=? keys are case-sensitive); ignored")
        assertWarning("[Defaults]\nPromptTimeout=5\n", line: 2,
                      "[Defaults]: unknown key 'PromptTimeout' (did you mean PromptTimeoutSec=?); ignored")
        assertWarning("[Defaults]\nAdminGrop=wheel\n", line: 2,
                      "[Defaults]: unknown key 'AdminGrop' (did you mean AdminGroup=?); ignored")
        // A key of another section says where it belongs.
        assertWarning("[Defaults]\nKind=wifi\n", line: 2,
                      "[Defaults]: unknown key 'Kind' (Kind= belongs in [Interface GLOB] or [Network SSID]); ignored")
        assertWarning("[Defaults]\nUser=alice\n", line: 2,
                      "[Defaults]: unknown key 'User' (User= belongs in [App NAME]); ignored")
        // The value of an ignored key is not even looked at.
        let config = try parse("[Defaults]\nwwan=nonsense\nWiFi=deny\n")
        XCTAssertEqual(config.defaults, PermissionSet(wifi: .deny, wwan: .ask, ethernet: .allow, other: .allow))
    }

    func testUnknownKeyInApp() throws {
        assertWarning("[App curl]\nExecutable=/usr/bin/curl\nPath=/usr/bin\n", line: 3, "[App curl]: unknown key 'Path' "
            + "(expected Executable=, Unit=, UserUnit=, User=, DesktopId=, WiFi=, WWAN=, Ethernet=, Other=, Metered=, Roaming= or MeteredBudget=); ignored")
        assertWarning("[App curl]\nUser=alice\nAdminGroup=wheel\n", line: 3,
                      "[App curl]: unknown key 'AdminGroup' (AdminGroup= belongs in [Defaults]); ignored")
        assertWarning("[App curl]\nUser=alice\nKind=wwan\n", line: 3,
                      "[App curl]: unknown key 'Kind' (Kind= belongs in [Interface GLOB] or [Network SSID]); ignored")
        assertWarning("[App curl]\nUser=alice\nwwan=deny\n", line: 3,
                      "[App curl]: unknown key 'wwan' (did you mean WWAN=? keys are case-sensitive); ignored")
        assertWarning("[App curl]\nExecutible=/usr/bin/x\nUser=1\n", line: 2,
                      "[App curl]: unknown key 'Executible' (did you mean Executable=?); ignored")
        assertWarning("[App curl]\nUser=1\nEthernt=deny\n", line: 3,
                      "[App curl]: unknown key 'Ethernt' (did you mean Ethernet=?); ignored")
        // Ignored: curl keeps the defaults on WWAN.
        let config = try Config.parse(files: [(path: main, text: "[App curl]\nUser=alice\nwwan=deny\n")],
                                      accounts: FakeAccounts()).get()
        XCTAssertEqual(try app(config, "curl").permissions, PartialPermissions())
    }

    /// An unknown section is ignored whole, even when it is obviously a misspelt [App].
    func testMisspeltAppSectionIsIgnored() throws {
        let text = "[App a]\nUser=1\n[app firefox]\nExecutable=/usr/bin/firefox\nWWAN=deny\n"
        assertWarning(text, line: 3, "[app firefox]: unknown section (did you mean [App firefox]? section names are "
            + "case-sensitive); ignored")
        XCTAssertEqual(try parse(text).apps.map(\.id), ["a"])
    }

    /// When a typo leaves an [App] with no identity, the load fails: the app would silently never match.
    func testTypoThatEmptiesAnAppIsAnError() {
        XCTAssertEqual(problems([(main, "[App a]\nexecutable=/usr/bin/a\n")]), [
            "\(main):1: [App a]: no Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it",
            "\(main):2: warning: [App a]: unknown key 'executable' (did you mean Executable=? keys are case-sensitive); "
                + "ignored",
        ])
    }

    // MARK: errors

    func testBadPermissionValue() {
        assertError("[Defaults]\nWiFi=allow\nWWAN=maybe\n", line: 3,
                    "[Defaults]: bad value 'maybe' for WWAN= (expected allow, deny or ask)")
        assertError("[App a]\nUser=alice\n\nEthernet=no\n", line: 4,
                    "[App a]: bad value 'no' for Ethernet= (expected allow, deny or ask)")
        assertError("[App a]\nUser=alice\nOther=\n", line: 3, "[App a]: bad value '' for Other= (expected allow, deny or ask)")
    }

    func testDuplicateAppInOneFile() {
        assertError("# x\n[App a]\nUser=1\n\n[App b]\nUser=2\n[App a]\nUser=3\n", line: 7,
                    "[App a]: duplicate app (already defined at line 2 of this file)")
    }

    func testInvalidAppName() {
        assertError("[App ok]\nUser=1\n[App 7zip]\nUser=2\n", line: 3,
                    "[App 7zip]: invalid app name: it must start with a letter, then letters, digits, '.', '-' or '_'")
        assertError("\n[App fire fox]\nUser=2\n", line: 2,
                    "[App fire fox]: invalid app name: it must start with a letter, then letters, digits, '.', '-' or '_'")
        assertError("[App a/b]\nUser=2\n", line: 1,
                    "[App a/b]: invalid app name: it must start with a letter, then letters, digits, '.', '-' or '_'")
        assertError("[App]\nUser=2\n", line: 1, "[App]: needs a name, e.g. [App firefox]")
    }

    func testRelativeExecutable() {
        assertError("[App a]\nExecutable=/usr/bin/a bin/a\n", line: 2,
                    "[App a]: Executable= must be an absolute path or glob, got 'bin/a'")
        assertError("[App a]\nUser=1\nExecutable=*/curl\n", line: 3,
                    "[App a]: Executable= must be an absolute path or glob, got '*/curl'")
    }

    func testInvalidGlob() {
        assertError("[App a]\nExecutable=/usr/bin/[ab\n", line: 2, "[App a]: unclosed '[' in glob '/usr/bin/[ab'")
        assertError("[App a]\nUser=1\nUnit=ok.service foo[.service\n", line: 3, "[App a]: unclosed '[' in glob 'foo[.service'")
    }

    func testUnknownUser() {
        assertError("[App a]\nUser=alice mallory\n", line: 2, "[App a]: unknown user 'mallory' in User=")
        // Without a resolver no name resolves, but numeric uids still work.
        XCTAssertThrowsError(try parse([(main, "[App a]\nUser=alice\n")], accounts: NoAccounts()))
        XCTAssertEqual(try parse([(main, "[App a]\nUser=7\n")], accounts: NoAccounts()).app(named: "a")?.uids, [7])
    }

    func testAppWithNoWayToMatch() {
        assertError("[App a]\nUser=1\n\n[App b]\nWWAN=deny\n", line: 4,
                    "[App b]: no Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it")
        // Empty lists count as nothing.
        assertError("[App c]\nExecutable=\nUnit=\nUser=\n", line: 1,
                    "[App c]: no Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it")
        // Reported at the section's first definition, in the file that defined it.
        assertError([(main, "[Defaults]\nWWAN=ask\n"), (dropA, "\n\n[App d]\nWiFi=deny\n")], path: dropA, line: 3,
                    "[App d]: no Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it")
    }

    func testDefaultsWithArgument() {
        assertError("# x\n[Defaults main]\nWWAN=ask\n", line: 2, "[Defaults main]: [Defaults] takes no name")
    }

    func testPromptTimeout() throws {
        XCTAssertEqual(try parse("").promptTimeoutSec, 60)
        XCTAssertEqual(try parse("[Defaults]\nPromptTimeoutSec=1\n").promptTimeoutSec, 1)
        XCTAssertEqual(try parse("[Defaults]\nPromptTimeoutSec=86400\n").promptTimeoutSec, 86400)
        XCTAssertEqual(try parse([(main, "[Defaults]\nPromptTimeoutSec=30\n"), (dropA, "[Defaults]\nPromptTimeoutSec=90\n")])
            .promptTimeoutSec, 90)
        for bad in ["0", "-5", "86401", "1.5", "abc", ""] {
            assertError("[Defaults]\nWWAN=ask\nPromptTimeoutSec=\(bad)\n", line: 3,
                        "[Defaults]: bad value '\(bad)' for PromptTimeoutSec= (expected seconds, 1 to 86400)")
        }
    }

    func testEmptyAdminGroup() {
        assertError("[Defaults]\nAdminGroup=\n", line: 2, "[Defaults]: AdminGroup= needs a group name")
    }

    func testErrorInDropInNamesTheDropIn() {
        assertError([(main, "[App a]\nUser=1\n"), (dropA, "[App a]\nWWAN=sometimes\n")], path: dropA, line: 2,
                    "[App a]: bad value 'sometimes' for WWAN= (expected allow, deny or ask)")
    }

    // MARK: every problem in one pass

    /// Errors and warnings of the main file and a drop-in, all of them, in file order: the main file's, then the
    /// drop-in's. An [App] left with no identity is found only after the last file, but sorts to its header.
    func testEveryProblemOfEveryFileInOrder() {
        let mainText = """
        [Defaults]
        WWAN=perhaps
        Wifi=deny

        [App a]
        Executable=bin/a
        [App b]
        WiFi=deny
        """
        let dropText = """
        [App a]
        User=mallory
        [Match]
        DHCP=yes
        [Defaults]
        PromptTimeoutSec=forever
        """
        let parsed = Config.parse(files: [(path: main, text: mainText), (path: dropA, text: dropText)],
                                  accounts: FakeAccounts())
        XCTAssertNil(parsed.config)
        XCTAssertEqual(parsed.problems.map(\.description), [
            "\(main):2: [Defaults]: bad value 'perhaps' for WWAN= (expected allow, deny or ask)",
            "\(main):3: warning: [Defaults]: unknown key 'Wifi' (did you mean WiFi=? keys are case-sensitive); ignored",
            "\(main):6: [App a]: Executable= must be an absolute path or glob, got 'bin/a'",
            "\(main):7: [App b]: no Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it",
            "\(dropA):2: [App a]: unknown user 'mallory' in User=",
            "\(dropA):3: warning: [Match]: unknown section (expected [Defaults], [App NAME], [Interface GLOB], [Network SSID], [Enforcement], [Usage] or [Report]); "
                + "ignored",
            "\(dropA):6: [Defaults]: bad value 'forever' for PromptTimeoutSec= (expected seconds, 1 to 86400)",
        ])
        XCTAssertEqual(parsed.errorCount, 5)
        XCTAssertEqual(parsed.warningCount, 2)
        XCTAssertEqual(parsed.errors.map(\.path), [main, main, main, dropA, dropA])
        XCTAssertEqual(parsed.warnings.map(\.line), [3, 3])
        XCTAssertEqual(parsed.failure,
                       "\(main):2: [Defaults]: bad value 'perhaps' for WWAN= (expected allow, deny or ask) (and 4 more errors)")
    }

    /// Each list word is checked: two unknown users on one line are two errors, in the order written.
    func testEveryBadWordOfALine() {
        XCTAssertEqual(problems([(main, "[App a]\nUser=eve alice mallory\nExecutable=x /usr/bin/a y[\n")]), [
            "\(main):2: [App a]: unknown user 'eve' in User=",
            "\(main):2: [App a]: unknown user 'mallory' in User=",
            "\(main):3: [App a]: Executable= must be an absolute path or glob, got 'x'",
            "\(main):3: [App a]: Executable= must be an absolute path or glob, got 'y['",
        ])
    }

    /// A section with a bad name is still read, so its other mistakes show in the same run; nothing more is
    /// said about it (it is not kept, so no "nothing matches it").
    func testSectionWithABadNameIsStillChecked() {
        XCTAssertEqual(problems([(main, "[App 7zip]\nWWAN=maybe\nColour=red\n")]), [
            "\(main):1: [App 7zip]: invalid app name: it must start with a letter, then letters, digits, '.', '-' or '_'",
            "\(main):2: [App 7zip]: bad value 'maybe' for WWAN= (expected allow, deny or ask)",
            "\(main):3: warning: [App 7zip]: unknown key 'Colour' (expected Executable=, Unit=, UserUnit=, User=, DesktopId=, WiFi=, WWAN=, "
                + "Ethernet=, Other=, Metered=, Roaming= or MeteredBudget=); ignored",
        ])
        XCTAssertEqual(problems([(main, "[App a]\nUser=1\n[App a]\nWiFi=sometimes\n")]), [
            "\(main):3: [App a]: duplicate app (already defined at line 1 of this file)",
            "\(main):4: [App a]: bad value 'sometimes' for WiFi= (expected allow, deny or ask)",
        ])
        XCTAssertEqual(problems([(main, "[Defaults x]\nWWAN=no\n")]), [
            "\(main):1: [Defaults x]: [Defaults] takes no name",
            "\(main):2: [Defaults x]: bad value 'no' for WWAN= (expected allow, deny or ask)",
        ])
    }

    /// Warnings alone: the config loads and is the same as without the ignored lines.
    func testWarningsDoNotFailTheLoad() throws {
        let parsed = Config.parse(files: [
            (path: main, text: "[Defaults]\nWWAN=deny\nColour=red\n[App a]\nUser=alice\nwifi=deny\n"),
            (path: dropA, text: "[Match]\nDHCP=yes\n"),
        ], accounts: FakeAccounts())
        XCTAssertEqual(parsed.errorCount, 0)
        XCTAssertEqual(parsed.warningCount, 3)
        XCTAssertNil(parsed.failure)
        XCTAssertEqual(try parsed.get(), try parse("[Defaults]\nWWAN=deny\n\n[App a]\nUser=alice\n"))
        XCTAssertEqual(try parsed.get().app(named: "a")?.permissions, PartialPermissions())
    }

    // MARK: drop-ins

    func testDropInOverridesDefaults() throws {
        let config = try parse([(main, "[Defaults]\nWWAN=deny\nWiFi=deny\n"), (dropA, "[Defaults]\nWWAN=allow\n")])
        XCTAssertEqual(config.defaults, PermissionSet(wifi: .deny, wwan: .allow, ethernet: .allow, other: .allow))
    }

    /// Files apply in the order given (the reader sorts drop-ins), so the later one wins, whatever its name.
    func testLaterFileWins() throws {
        let a = (dropA, "[Defaults]\nWWAN=deny\n"), b = (dropB, "[Defaults]\nWWAN=ask\n")
        XCTAssertEqual(try parse([(main, "[Defaults]\nWWAN=allow\n"), a, b]).defaults.wwan, .ask)
        XCTAssertEqual(try parse([(main, "[Defaults]\nWWAN=allow\n"), b, a]).defaults.wwan, .deny)
    }

    func testDropInOverridesAppPermissionAndKeepsTheRest() throws {
        let config = try parse([
            (main, "[App a]\nUser=alice\nWWAN=deny\nWiFi=deny\n[App b]\nUser=bob\n"),
            (dropA, "[App a]\nWWAN=allow\n"),
        ])
        let a = try app(config, "a")
        XCTAssertEqual(a.permissions, PartialPermissions([.wwan: .allow, .wifi: .deny]))
        XCTAssertEqual(a.uids, [1000])
        XCTAssertEqual(a.path, main)
        XCTAssertEqual(a.line, 1)
        XCTAssertEqual(config.apps.map(\.id), ["a", "b"])
    }

    /// A list set in a later file replaces the earlier list (lines in that one section still accumulate);
    /// lists the drop-in does not mention are kept.
    func testDropInReplacesExecutableList() throws {
        let config = try parse([
            (main, "[App a]\nExecutable=/usr/bin/a /usr/bin/a2\nUnit=a.service\nUser=alice\n"),
            (dropA, "[App a]\nExecutable=/opt/a/a\nExecutable=/opt/a/b\n"),
        ])
        let a = try app(config, "a")
        XCTAssertEqual(a.executables.map(\.pattern), ["/opt/a/a", "/opt/a/b"])
        XCTAssertEqual(a.units.map(\.pattern), ["a.service"])
        XCTAssertEqual(a.uids, [1000])
        // The executable index follows the merged lists.
        XCTAssertEqual(config.match(makePeer(uid: 5, exe: "/opt/a/b")).matchedBy, .executable)
        XCTAssertEqual(config.match(makePeer(uid: 5, exe: "/usr/bin/a")).matchedBy, .defaults)
    }

    func testDropInReplacesUnitAndUserLists() throws {
        let config = try parse([
            (main, "[App a]\nExecutable=/usr/bin/a\nUnit=a.service\nUser=alice\n"),
            (dropA, "[App a]\nUnit=b.service\nUser=bob\nUser=7\n"),
        ])
        let a = try app(config, "a")
        XCTAssertEqual(a.executables.map(\.pattern), ["/usr/bin/a"])
        XCTAssertEqual(a.units.map(\.pattern), ["b.service"])
        XCTAssertEqual(a.uids, [1001, 7])
    }

    func testDropInCanClearAList() throws {
        let config = try parse([
            (main, "[App a]\nExecutable=/usr/bin/a\nUser=alice\n"),
            (dropA, "[App a]\nExecutable=\n"),
        ])
        let a = try app(config, "a")
        XCTAssertEqual(a.executables, [])
        XCTAssertEqual(a.uids, [1000])
    }

    func testAppRedefinedInLaterFileIsNotADuplicate() throws {
        let config = try parse([
            (main, "[App a]\nUser=alice\n"),
            (dropA, "[App a]\nWWAN=deny\n[App c]\nUser=3\n"),
            (dropB, "[App a]\nWiFi=ask\n"),
        ])
        XCTAssertEqual(config.apps.map(\.id), ["a", "c"])
        XCTAssertEqual(try app(config, "a").permissions, PartialPermissions([.wwan: .deny, .wifi: .ask]))
        XCTAssertEqual(try app(config, "c").path, dropA)
        XCTAssertEqual(try app(config, "c").line, 3)
    }

    /// Twice in the same drop-in is a duplicate there (the main file's definition does not count as the first).
    func testDuplicateInsideADropIn() {
        assertError([(main, "[App a]\nUser=alice\n"), (dropA, "[App a]\nWWAN=deny\n\n[App a]\nWiFi=deny\n")],
                    path: dropA, line: 4, "[App a]: duplicate app (already defined at line 1 of this file)")
    }

    // MARK: AdminGroup and privilege

    func testAdminGroupName() throws {
        XCTAssertEqual(try parse("").adminGroup, "netperm")
        XCTAssertEqual(try parse("[Defaults]\nAdminGroup=wheel\n").adminGroup, "wheel")
        // A drop-in's AdminGroup= wins.
        let dropped = try parse([(main, "[Defaults]\nAdminGroup=nosuch\n"), (dropA, "[Defaults]\nAdminGroup=wheel\n")])
        XCTAssertEqual(dropped.adminGroup, "wheel")
    }

    func testIsPrivileged() throws {
        let config = try parse("[Defaults]\nAdminGroup=wheel\n")
        let wheel = { FakeAccounts().gid(forGroup: config.adminGroup) }
        XCTAssertTrue(config.isPrivileged(makePeer(uid: 1000, gids: [1000, 27, 10], exe: "/usr/bin/x"), adminGID: wheel))
        XCTAssertTrue(config.isPrivileged(makePeer(uid: 1000, gids: [10], exe: nil), adminGID: wheel))
        XCTAssertFalse(config.isPrivileged(makePeer(uid: 1000, gids: [1000, 27, 990], exe: "/usr/bin/x"),
                                           adminGID: wheel))
        XCTAssertFalse(config.isPrivileged(makePeer(uid: 10, gids: [100], exe: nil), adminGID: wheel),
                       "uid equal to the gid")
        // No admin group on the system: only root.
        XCTAssertFalse(config.isPrivileged(makePeer(uid: 1000, gids: [990, 10, 0], exe: nil), adminGID: { nil }))
    }

    /// Root is privileged without a group lookup, which may load NSS modules.
    func testRootNeedsNoGroupLookup() throws {
        let config = try parse("")
        var lookups = 0
        XCTAssertTrue(config.isPrivileged(makePeer(uid: 0, gids: [], exe: nil), adminGID: { lookups += 1; return nil }))
        XCTAssertEqual(lookups, 0)
        XCTAssertFalse(config.isPrivileged(makePeer(uid: 1000, gids: [1000], exe: nil),
                                           adminGID: { lookups += 1; return 990 }))
        XCTAssertEqual(lookups, 1)
    }
}
