// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import XCTest

/// Which `[App]` a peer is: Executable, then Unit, then User; within each, the first section defined.
final class MatchingTests: XCTestCase {
    private func assertMatch(_ config: Config, _ peer: PeerIdentity, _ id: String, _ by: MatchedBy,
                             file: StaticString = #filePath, line: UInt = #line) {
        let m = config.match(peer)
        XCTAssertEqual(m.id, id, "\(peer.executable ?? "-") \(peer.unit ?? "-") uid \(peer.uid)", file: file, line: line)
        XCTAssertEqual(m.matchedBy, by, "\(peer.executable ?? "-")", file: file, line: line)
        if by == .defaults {
            XCTAssertNil(m.app, file: file, line: line)
        } else {
            XCTAssertEqual(m.app?.id, id, file: file, line: line)
            XCTAssertEqual(m.app, config.app(named: id), file: file, line: line)
        }
    }

    // MARK: kinds of match

    /// The User and Unit apps come first in the file, and still lose to a more specific kind of match.
    func testExecutableBeatsUnitBeatsUser() throws {
        let config = try parsePolicy("""
        [App byuser]
        User=alice
        [App byunit]
        Unit=foo.service
        [App byexe]
        Executable=/usr/bin/foo
        """)
        assertMatch(config, makePeer(uid: 1000, exe: "/usr/bin/foo", unit: "foo.service"), "byexe", .executable)
        assertMatch(config, makePeer(uid: 1000, exe: "/usr/bin/bar", unit: "foo.service"), "byunit", .unit)
        assertMatch(config, makePeer(uid: 1000, exe: nil, unit: "foo.service"), "byunit", .unit)
        assertMatch(config, makePeer(uid: 1000, exe: "/usr/bin/bar", unit: "bar.service"), "byuser", .user)
        assertMatch(config, makePeer(uid: 1000, exe: nil, unit: nil), "byuser", .user)
        assertMatch(config, makePeer(uid: 1001, exe: "/usr/bin/bar", unit: "bar.service"), "bar", .defaults)
    }

    func testExecutableGlobBeatsUnit() throws {
        let config = try parsePolicy("[App u]\nUnit=*.service\n[App g]\nExecutable=/usr/lib/*/helper\n")
        assertMatch(config, makePeer(exe: "/usr/lib/x/helper", unit: "x.service"), "g", .executable)
        assertMatch(config, makePeer(exe: "/usr/lib/helper", unit: "x.service"), "u", .unit)
    }

    /// One section may name a process three ways; with several sections the kind still decides first.
    func testSameAppByEveryKind() throws {
        let config = try parsePolicy("[App a]\nExecutable=/bin/a\nUnit=a.service\nUser=bob\n")
        assertMatch(config, makePeer(uid: 1, exe: "/bin/a"), "a", .executable)
        assertMatch(config, makePeer(uid: 1, exe: "/bin/b", unit: "a.service"), "a", .unit)
        assertMatch(config, makePeer(uid: 1001, exe: "/bin/b", unit: "b.service"), "a", .user)
    }

    // MARK: first [App] wins among executables

    func testLiteralThenGlob() throws {
        let config = try parsePolicy("[App lit]\nExecutable=/usr/bin/foo\n[App glob]\nExecutable=/usr/bin/*\n")
        assertMatch(config, makePeer(exe: "/usr/bin/foo"), "lit", .executable)
        assertMatch(config, makePeer(exe: "/usr/bin/bar"), "glob", .executable)
    }

    func testGlobThenLiteral() throws {
        let config = try parsePolicy("[App glob]\nExecutable=/usr/bin/*\n[App lit]\nExecutable=/usr/bin/foo\n")
        assertMatch(config, makePeer(exe: "/usr/bin/foo"), "glob", .executable)
        assertMatch(config, makePeer(exe: "/usr/bin/bar"), "glob", .executable)
        assertMatch(config, makePeer(exe: "/usr/sbin/foo"), "foo", .defaults)
    }

    func testNonMatchingGlobBeforeLiteralDoesNotHideIt() throws {
        let config = try parsePolicy("""
        [App g1]
        Executable=/opt/*/bin/x
        [App lit]
        Executable=/usr/bin/foo
        [App g2]
        Executable=/usr/*
        """)
        assertMatch(config, makePeer(exe: "/usr/bin/foo"), "lit", .executable)
        assertMatch(config, makePeer(exe: "/usr/bin/zzz"), "g2", .executable)
        assertMatch(config, makePeer(exe: "/opt/q/bin/x"), "g1", .executable)
    }

    func testTwoLiteralsAndTwoGlobsFirstWins() throws {
        let config = try parsePolicy("""
        [App first]
        Executable=/usr/bin/foo /usr/bin/b?r
        [App second]
        Executable=/usr/bin/foo /usr/bin/ba*
        """)
        assertMatch(config, makePeer(exe: "/usr/bin/foo"), "first", .executable)
        assertMatch(config, makePeer(exe: "/usr/bin/bar"), "first", .executable)
        assertMatch(config, makePeer(exe: "/usr/bin/bazz"), "second", .executable)
    }

    /// The same literal path in two sections (no globs anywhere): the first section keeps it.
    func testSameLiteralInTwoSections() throws {
        let config = try parsePolicy("""
        [App one]
        Executable=/usr/bin/foo
        [App two]
        Executable=/usr/bin/bar /usr/bin/foo
        """)
        assertMatch(config, makePeer(exe: "/usr/bin/foo"), "one", .executable)
        assertMatch(config, makePeer(exe: "/usr/bin/bar"), "two", .executable)
    }

    /// A section mixing a literal and a glob: a later section's literal must not beat its glob.
    func testMixedSectionGlobBeatsLaterLiteral() throws {
        let config = try parsePolicy("""
        [App mixed]
        Executable=/bin/one /usr/libexec/*
        [App lit]
        Executable=/usr/libexec/two
        """)
        assertMatch(config, makePeer(exe: "/usr/libexec/two"), "mixed", .executable)
        assertMatch(config, makePeer(exe: "/bin/one"), "mixed", .executable)
    }

    /// Many sections of literals and globs in random order, against the rule as written: the first section in
    /// definition order with any pattern that matches.
    func testExecutableMatchAgainstOracle() throws {
        var rng = SplitMix(seed: 0x5EED)
        let dirs = ["/usr/bin", "/usr/lib/app", "/opt/x/bin"]
        let names = ["a", "ab", "b", "ba", "c", "cc"]
        func randomPath() -> String { "\(dirs[rng.next(dirs.count)])/\(names[rng.next(names.count)])" }
        for round in 0..<20 {
            var text = ""
            for i in 0..<12 {
                var words: [String] = []
                for _ in 0..<(1 + rng.next(2)) {
                    switch rng.next(6) {
                    case 0: words.append("\(dirs[rng.next(dirs.count)])/\(names[rng.next(names.count)].prefix(1))*")
                    case 1: words.append("/*/\(names[rng.next(names.count)])")
                    case 2: words.append("\(dirs[rng.next(dirs.count)])/?")
                    default: words.append(randomPath())
                    }
                }
                text += "[App app\(i)]\nExecutable=\(words.joined(separator: " "))\n"
            }
            let config = try parsePolicy(text)
            for dir in dirs {
                for name in names {
                    let exe = "\(dir)/\(name)"
                    let expected = config.apps.first { $0.executables.contains { $0.matches(exe) } }
                    let m = config.match(makePeer(exe: exe))
                    XCTAssertEqual(m.id, expected?.id ?? name, "round \(round): \(exe)\n\(text)")
                    XCTAssertEqual(m.matchedBy, expected == nil ? .defaults : .executable, "round \(round): \(exe)")
                }
            }
        }
    }

    func testFirstUnitAppWins() throws {
        let config = try parsePolicy("[App any]\nUnit=*.service\n[App foo]\nUnit=foo.service\n[App s]\nUnit=*.scope\n")
        assertMatch(config, makePeer(uid: 5, exe: nil, unit: "foo.service"), "any", .unit)
        assertMatch(config, makePeer(uid: 5, exe: nil, unit: "app-x-1.scope"), "s", .unit)
        assertMatch(config, makePeer(uid: 5, exe: nil, unit: "x.slice"), "uid-5", .defaults)
    }

    func testFirstUserAppWins() throws {
        let config = try parsePolicy("[App one]\nUser=1001\n[App two]\nUser=alice bob\n")
        assertMatch(config, makePeer(uid: 1001, exe: nil), "one", .user)
        assertMatch(config, makePeer(uid: 1000, exe: nil), "two", .user)
    }

    // MARK: no match

    func testDerivedIDs() throws {
        let config = try parsePolicy("[App other]\nUser=1\n")
        assertMatch(config, makePeer(exe: "/usr/bin/curl"), "curl", .defaults)
        assertMatch(config, makePeer(exe: "/usr/lib/x/my prog+1"), "my_prog_1", .defaults)
        assertMatch(config, makePeer(uid: 1000, exe: nil), "uid-1000", .defaults)
        assertMatch(config, makePeer(uid: 0, exe: "/"), "uid-0", .defaults)

        let digit = config.match(makePeer(exe: "/opt/x/7zip"))
        XCTAssertEqual(digit.matchedBy, .defaults)
        XCTAssertTrue(AppPolicy.isValidID(digit.id), digit.id)
        XCTAssertTrue(digit.id.hasSuffix("7zip"), digit.id)
        for exe in ["/opt/x/.hidden", "/opt/x/_x", "/opt/x/-", "/opt/x/caf\u{E9}", "/opt/x/\u{1F600}"] {
            let id = Config.derivedID(makePeer(exe: exe))
            XCTAssertTrue(AppPolicy.isValidID(id), "\(exe) -> \(id)")
        }
    }

    /// A derived id is "an id for an app no section names". If an unmatched program is called like a policy app
    /// (/tmp/firefox next to [App firefox] for /usr/lib/firefox/firefox), sharing the id makes the daemon confuse
    /// the two: the tracker keeps one verdict per id, so that program's WAIT and event stream follow the policy
    /// app's permissions instead of [Defaults], while its QUERY answers with [Defaults].
    func testDerivedIDNeverNamesAPolicyApp() throws {
        let config = try parsePolicy("""
        [App firefox]
        Executable=/usr/lib/firefox/firefox
        WWAN=allow
        [App uid-1000]
        User=4242
        """)
        let impostor = config.match(makePeer(uid: 1000, exe: "/tmp/firefox"))
        XCTAssertEqual(impostor.matchedBy, .defaults)
        XCTAssertNil(impostor.app)
        XCTAssertNil(config.app(named: impostor.id), "derived id '\(impostor.id)' is a policy app's id")
        XCTAssertTrue(AppPolicy.isValidID(impostor.id), impostor.id)

        let noExe = config.match(makePeer(uid: 1000, exe: nil))
        XCTAssertEqual(noExe.matchedBy, .defaults)
        XCTAssertNil(config.app(named: noExe.id), "derived id '\(noExe.id)' is a policy app's id")
    }

    // MARK: cgroups

    func testUnitFromCgroupV2Service() {
        XCTAssertEqual(PeerIdentity.unit(fromCgroup: "0::/system.slice/nginx.service\n"), "nginx.service")
        XCTAssertEqual(PeerIdentity.unit(fromCgroup: "0::/system.slice/nginx.service"), "nginx.service")
        // A sub-cgroup inside a service (delegation) still belongs to the service.
        XCTAssertEqual(PeerIdentity.unit(fromCgroup: "0::/system.slice/foo.service/worker\n"), "foo.service")
        XCTAssertEqual(PeerIdentity.unit(fromCgroup: "0::/init.scope\n"), "init.scope")
    }

    func testUnitFromCgroupUserApp() {
        let text = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-firefox-123.scope\n"
        XCTAssertEqual(PeerIdentity.unit(fromCgroup: text), "app-firefox-123.scope")
        XCTAssertEqual(PeerIdentity.unit(fromCgroup: "0::/user.slice/user-1000.slice/session-2.scope\n"),
                       "session-2.scope")
        XCTAssertEqual(PeerIdentity.unit(fromCgroup: "0::/user.slice/user-1000.slice/user@1000.service/init.scope\n"),
                       "init.scope")
    }

    /// A unit of a user's own manager is that user's to name: it never matches Unit=, only UserUnit=.
    func testAUserUnitNamedLikeASystemServiceIsNotThatService() throws {
        let config = try parsePolicy("""
        [App apt]
        Unit=apt-daily.service
        [App browser]
        UserUnit=app-gnome-firefox-*.scope
        """)
        let spoof = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/apt-daily.service\n"
        let parsed = try XCTUnwrap(PeerIdentity.unitAndManager(fromCgroup: spoof))
        XCTAssertEqual(parsed.unit, "apt-daily.service")
        XCTAssertTrue(parsed.user)
        var peer = makePeer(uid: 1000, exe: "/usr/bin/sleep")
        peer.unit = parsed.unit
        peer.userUnit = parsed.user
        XCTAssertNotEqual(config.match(peer).id, "apt", "a user's apt-daily.service passed for the system's")
        peer.userUnit = false
        XCTAssertEqual(config.match(peer).id, "apt")

        let firefox = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-firefox-4242.scope\n"
        let f = try XCTUnwrap(PeerIdentity.unitAndManager(fromCgroup: firefox))
        peer.unit = f.unit
        peer.userUnit = f.user
        XCTAssertEqual(config.match(peer).id, "browser")
        XCTAssertEqual(config.match(peer).matchedBy, .unit)
        XCTAssertFalse(try XCTUnwrap(PeerIdentity.unitAndManager(fromCgroup: "0::/system.slice/apt-daily.service")).user)
        XCTAssertFalse(try XCTUnwrap(PeerIdentity.unitAndManager(
            fromCgroup: "0::/user.slice/user-1000.slice/session-2.scope")).user, "a login session is the system's")
    }

    /// cgroup v1 / hybrid: only the name=systemd line counts; controller hierarchies may be anywhere.
    func testUnitFromCgroupHybrid() {
        let text = """
        12:pids:/system.slice/wrong.service
        11:cpu,cpuacct:/system.slice/wrong2.service
        1:name=systemd:/system.slice/cron.service
        """
        XCTAssertEqual(PeerIdentity.unit(fromCgroup: text), "cron.service")
        // With the unified line present too (hybrid), it is used.
        XCTAssertEqual(PeerIdentity.unit(fromCgroup: text + "\n0::/system.slice/cron.service\n"), "cron.service")
    }

    func testNoUnit() {
        XCTAssertNil(PeerIdentity.unit(fromCgroup: "0::/\n"))
        XCTAssertNil(PeerIdentity.unit(fromCgroup: ""))
        XCTAssertNil(PeerIdentity.unit(fromCgroup: "0::/user.slice/user-1000.slice\n"))
        XCTAssertNil(PeerIdentity.unit(fromCgroup: "12:pids:/system.slice/x.service\n"))
    }
}

/// Small deterministic generator so randomized tests reproduce.
struct SplitMix {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next64() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func next(_ n: Int) -> Int { Int(next64() % UInt64(n)) }
}
