// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol
import XCTest

/// Each verb's words read into its typed request, or refused with the protocol's error (the same code and message
/// the engine gave when it read them itself): only syntax here, nothing that depends on the daemon's state.
final class RequestArgumentsTests: XCTestCase {
    private func parse(_ s: String) -> Request? {
        guard case let .success(r)? = RequestParser.parse(Array(s.utf8)) else { return nil }
        return r
    }

    /// The error a line gets, and whether the caller's access to its verb is checked first.
    private func refusal(_ s: String, file: StaticString = #filePath, line: UInt = #line) -> RequestError? {
        guard case let .failure(e)? = RequestParser.parse(Array(s.utf8)) else {
            XCTFail("'\(s)' was accepted", file: file, line: line)
            return nil
        }
        return e
    }

    private func assertRefused(_ s: String, _ message: String, accessFirst verb: Verb?, file: StaticString = #filePath,
                               line: UInt = #line) {
        guard let e = refusal(s, file: file, line: line) else { return }
        XCTAssertEqual(e.error.code, .badArguments, s, file: file, line: line)
        XCTAssertEqual(e.error.message, message, s, file: file, line: line)
        XCTAssertEqual(e.verb, verb, s, file: file, line: line)
    }

    func testVerbsWithoutArguments() {
        let table: [(String, Request)] = [("PING", .ping), ("help", .help), ("STATUS", .status), ("links", .links),
                                          ("APPS", .apps), ("reload", .reload), ("PROMPTS", .prompts),
                                          ("decisions", .decisions), ("METRICS", .metrics), ("quit", .quit)]
        for (line, request) in table {
            XCTAssertEqual(parse(line), request, line)
            XCTAssertEqual(parse(line)?.verb, request.verb)
            assertRefused(line + " x", "usage: \(request.verb.usage)", accessFirst: nil)
        }
    }

    /// Too many words is refused before the caller's access is looked at (as before the parser typed them).
    func testTooManyWordsForEveryVerb() {
        for verb in Verb.allCases {
            let line = verb.rawValue + String(repeating: " links", count: verb.maxArgs + 1)
            assertRefused(line, "usage: \(verb.usage)", accessFirst: nil)
        }
    }

    func testEveryCaseNamesItsVerb() {
        let lines = ["PING", "HELP", "STATUS", "LINKS", "QUERY", "REACH 192.0.2.1", "APPS", "RELOAD", "SUBSCRIBE",
                     "WAIT", "PROMPTS", "ANSWER 1 allow", "DECIDE a wifi allow", "FORGET a", "DECISIONS", "METRICS",
                     "USAGE", "RESET-USAGE", "SCOPE 1 made", "OWNS org.a.B 1", "REPORT", "RESET-REPORT", "KEEP-REPORT yes",
                     "QUIT"]
        XCTAssertEqual(lines.compactMap { parse($0)?.verb }, Verb.allCases)
    }

    /// OWNS NAME PID: a name and a positive pid.
    func testOwns() {
        XCTAssertEqual(parse("OWNS org.gnome.Maps 4242"), .owns(name: "org.gnome.Maps", pid: 4242))
        XCTAssertEqual(parse(Request.owns(name: "org.gnome.Maps", pid: 7).line), .owns(name: "org.gnome.Maps", pid: 7))
        for bad in ["OWNS", "OWNS org.gnome.Maps", "OWNS org.gnome.Maps 0", "OWNS org.gnome.Maps x"] {
            assertRefused(bad, "usage: OWNS NAME PID", accessFirst: .owns)
        }
    }

    /// SCOPE ID made, or failed with any words of why; read back from its line.
    func testScope() {
        XCTAssertEqual(parse("SCOPE 7 made"), .scope(id: 7, failed: nil))
        XCTAssertEqual(parse("scope 7 FAILED"), .scope(id: 7, failed: ""))
        XCTAssertEqual(parse("SCOPE 7 failed Access denied by the manager"),
                       .scope(id: 7, failed: "Access denied by the manager"))
        for r in [Request.scope(id: 7, failed: nil), .scope(id: 8, failed: "no such process")] {
            XCTAssertEqual(parse(r.line), r)
        }
        for bad in ["SCOPE", "SCOPE 7", "SCOPE x made", "SCOPE 7 made now", "SCOPE 7 done"] {
            assertRefused(bad, "usage: SCOPE ID made|failed [WHY]", accessFirst: .scope)
        }
    }

    func testQueryUsageAndResetUsageTakeAnyName() {
        XCTAssertEqual(parse("QUERY"), .query(app: nil))
        XCTAssertEqual(parse("query firefox"), .query(app: "firefox"))
        // Whether the app exists, or the name could be one, is the engine's: it answers not-found.
        XCTAssertEqual(parse("QUERY 1x"), .query(app: "1x"))
        XCTAssertEqual(parse("USAGE"), .usage(app: nil))
        XCTAssertEqual(parse("usage maps"), .usage(app: "maps"))
        XCTAssertEqual(parse("RESET-USAGE"), .resetUsage(app: nil))
        XCTAssertEqual(parse("reset-usage maps"), .resetUsage(app: "maps"))
        assertRefused("QUERY a b", "usage: QUERY [APP]", accessFirst: nil)
        assertRefused("RESET-USAGE a b", "usage: RESET-USAGE [APP]", accessFirst: nil)
    }

    func testReach() {
        XCTAssertEqual(parse("REACH 192.0.2.1"), .reach(IPAddress("192.0.2.1")!, text: "192.0.2.1", timeout: nil))
        XCTAssertEqual(parse("reach 2001:db8::1 2.5"),
                       .reach(IPAddress("2001:db8::1")!, text: "2001:db8::1", timeout: 2_500_000))
        assertRefused("REACH", "usage: REACH ADDRESS [SECONDS]", accessFirst: .reach)
        assertRefused("REACH example.org", "'example.org' is not an IP address (e.g. 192.0.2.1 or 2001:db8::1, "
            + "without a port or zone)", accessFirst: .reach)
        assertRefused("REACH 192.0.2.1 soon", "bad time-out 'soon': expected seconds, e.g. 30 or 0.5", accessFirst: .reach)
        // The address is checked before the time-out.
        assertRefused("REACH x soon", "'x' is not an IP address (e.g. 192.0.2.1 or 2001:db8::1, without a port or zone)",
                      accessFirst: .reach)
    }

    func testSubscribe() {
        XCTAssertEqual(parse("SUBSCRIBE"), .subscribe(Topic.defaults))
        XCTAssertEqual(parse("subscribe PROMPTS self"), .subscribe([.prompts, .own]))
        XCTAssertEqual(parse("SUBSCRIBE links links"), .subscribe([.links]))
        assertRefused("SUBSCRIBE links bogus", "unknown topic 'bogus' (expected links, apps, policy, prompts, self, usage, mine, scopes)",
                      accessFirst: .subscribe)
    }

    func testWait() {
        XCTAssertEqual(parse("WAIT"), .wait(app: nil, timeout: nil))
        XCTAssertEqual(parse("WAIT firefox"), .wait(app: "firefox", timeout: nil))
        XCTAssertEqual(parse("WAIT 30"), .wait(app: nil, timeout: 30_000_000))
        XCTAssertEqual(parse("wait firefox .5"), .wait(app: "firefox", timeout: 500_000))
        assertRefused("WAIT 1 2", "'1' is not an app id (they start with a letter); usage: WAIT [APP] [SECONDS]",
                      accessFirst: .wait)
        assertRefused("WAIT a b", "usage: WAIT [APP] [SECONDS]", accessFirst: .wait)
        assertRefused("WAIT firefox -1", "bad time-out '-1': expected seconds, e.g. 30 or 0.5", accessFirst: .wait)
        // A long word is quoted in part, escaped.
        assertRefused("WAIT 9" + String(repeating: "x", count: 100),
                      "bad time-out '9" + String(repeating: "x", count: 59) + "...': expected seconds, e.g. 30 or 0.5",
                      accessFirst: .wait)
    }

    func testAnswer() {
        XCTAssertEqual(parse("ANSWER 3 allow"), .answer(prompt: 3, .choice(.allow, everyone: false)))
        XCTAssertEqual(parse("answer 3 DENY --everyone"), .answer(prompt: 3, .choice(.deny, everyone: true)))
        XCTAssertEqual(parse("ANSWER 7 once"), .answer(prompt: 7, .choice(.once, everyone: false)))
        XCTAssertEqual(parse("ANSWER 7 Dismiss"), .answer(prompt: 7, .dismiss))
        let usage = "usage: ANSWER ID allow|deny|once|dismiss [--everyone]"
        for line in ["ANSWER", "ANSWER 3", "ANSWER x allow", "ANSWER 3 maybe", "ANSWER 3 dismiss --everyone",
                     "ANSWER 3 allow --EVERYONE", "ANSWER 3 allow now"] {
            assertRefused(line, usage, accessFirst: .answer)
        }
    }

    func testDecide() {
        XCTAssertEqual(parse("DECIDE maps wwan allow"), .decide(app: "maps", kind: .wwan, .allow, once: false))
        XCTAssertEqual(parse("decide org.gnome.Maps METERED Deny --once"),
                       .decide(app: "org.gnome.Maps", kind: .metered, .deny, once: true))
        assertRefused("DECIDE maps wwan", "usage: DECIDE APP KIND allow|deny [--once]", accessFirst: .decide)
        assertRefused("DECIDE maps wwan allow --ONCE", "usage: DECIDE APP KIND allow|deny [--once]", accessFirst: .decide)
        assertRefused("DECIDE 9maps wwan allow", "invalid app id '9maps'", accessFirst: .decide)
        assertRefused("DECIDE maps loopback allow",
                      "bad kind 'loopback' (expected wifi, wwan, ethernet, other, metered or roaming)", accessFirst: .decide)
        assertRefused("DECIDE maps wwan ask", "bad decision 'ask' (expected allow or deny)", accessFirst: .decide)
        // In the engine's order: the app, then the kind, then the decision.
        assertRefused("DECIDE 9 x y", "invalid app id '9'", accessFirst: .decide)
        assertRefused("DECIDE a x y", "bad kind 'x' (expected wifi, wwan, ethernet, other, metered or roaming)",
                      accessFirst: .decide)
    }

    func testForget() {
        XCTAssertEqual(parse("FORGET maps"), .forget(app: "maps", kind: nil))
        XCTAssertEqual(parse("forget maps Roaming"), .forget(app: "maps", kind: .roaming))
        assertRefused("FORGET", "usage: FORGET APP [KIND]", accessFirst: .forget)
        assertRefused("FORGET -maps", "usage: FORGET APP [KIND]", accessFirst: .forget)
        assertRefused("FORGET maps cable", "bad kind 'cable' (expected wifi, wwan, ethernet, other, metered or roaming)",
                      accessFirst: .forget)
    }

    /// What a client sends for a typed request (netpermctl's agent and WAIT build theirs so) is read back as it.
    func testLinesReadBackAsTheirRequests() {
        let requests: [Request] = [
            .ping, .help, .status, .links, .apps, .reload, .prompts, .decisions, .metrics, .quit,
            .query(app: nil), .query(app: "maps"), .usage(app: nil), .usage(app: "maps"), .resetUsage(app: nil),
            .resetUsage(app: "maps"), .reach(IPAddress("2001:db8::1")!, text: "2001:db8::1", timeout: nil),
            .reach(IPAddress("192.0.2.1")!, text: "192.0.2.1", timeout: 1), .subscribe(Topic.defaults),
            .subscribe([.prompts, .usage]), .subscribe(Set(Topic.allCases)), .wait(app: nil, timeout: nil),
            .wait(app: nil, timeout: 0), .wait(app: "maps", timeout: 2_500_000), .wait(app: "maps", timeout: nil),
            .answer(prompt: 3, .choice(.once, everyone: false)), .answer(prompt: 3, .choice(.deny, everyone: true)),
            .answer(prompt: 12, .dismiss), .decide(app: "maps", kind: .wwan, .allow, once: false),
            .decide(app: "maps", kind: .roaming, .deny, once: true), .forget(app: "maps", kind: nil),
            .forget(app: "maps", kind: .metered),
        ]
        for r in requests { XCTAssertEqual(parse(r.line), r, r.line) }
        XCTAssertEqual(Request.answer(prompt: 3, .choice(.deny, everyone: true)).line, "ANSWER 3 deny --everyone")
        XCTAssertEqual(Request.wait(app: "maps", timeout: 1_500_000).line, "WAIT maps 1.500000")
        XCTAssertEqual(Request.subscribe([.usage, .prompts]).line, "SUBSCRIBE prompts usage")
        XCTAssertEqual(Request.resetUsage(app: nil).line, "RESET-USAGE")
    }

    /// What is not a verb's words is refused as before, with no verb whose access would come first.
    func testLineErrorsNameNoVerb() {
        for line: [UInt8] in [[0x50, 0], [0xFF], Array("FROB".utf8)] {
            guard case let .failure(e)? = RequestParser.parse(line) else { return XCTFail("\(line) was accepted") }
            XCTAssertNil(e.verb)
        }
    }
}
