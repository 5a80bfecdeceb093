// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermProtocol
import XCTest

/// What every request line gets whatever its verb: the framing-independent part of the protocol (PROTOCOL.md,
/// "Framing" and "Error codes"), and the verbs that touch no state (PING, HELP, QUIT).
final class EngineProtocolTests: XCTestCase {
    private func harness() -> (EngineHarness, ConnectionID) {
        let h = EngineHarness(links: [Links.eth])
        return (h, h.connect(Peers.curl))
    }

    func testPing() {
        let (h, c) = harness()
        XCTAssertEqual(h.send(c, "PING"), [#"{"ok":true,"pong":true}"#])
    }

    /// A blank line is not a request: no reply at all, and the connection goes on.
    func testBlankLinesGetNoReply() {
        let (h, c) = harness()
        let before = h.steps.count
        for line in ["", "   ", " \t ", "\r", "\r\t "] { XCTAssertEqual(h.send(c, line), [], "'\(line)'") }
        XCTAssertEqual(Array(h.steps[before...]), [], "no effect at all")
        XCTAssertEqual(h.request(c, "PING")["pong"], true)
    }

    func testNulByte() {
        let (h, c) = harness()
        for bytes: [UInt8] in [[0x50, 0, 0x49], [0], Array("PING".utf8) + [0]] {
            let r = h.sendBytes(c, bytes).map(EngineHarness.parse)
            XCTAssertEqual(r.count, 1)
            XCTAssertEqual(r.first?["error"], "nul-byte", "\(bytes)")
            XCTAssertEqual(r.first?["message"], "request contains a NUL byte")
        }
        // NUL is checked first: a line that is both gets the more specific code.
        XCTAssertEqual(h.sendBytes(c, [0xFF, 0x00]).map(EngineHarness.parse).first?["error"], "nul-byte")
        XCTAssertEqual(h.request(c, "PING")["pong"], true, "the connection stays usable")
    }

    func testInvalidUTF8() {
        let (h, c) = harness()
        // A broken sequence, a byte that is never UTF-8, and an overlong encoding of '/'.
        for bytes: [UInt8] in [[0x50, 0x49, 0xC3, 0x28], [0xFF], [0xC0, 0xAF], Array("QUERY ".utf8) + [0xE2, 0x82]] {
            let r = h.sendBytes(c, bytes).map(EngineHarness.parse)
            XCTAssertEqual(r.count, 1)
            XCTAssertEqual(r.first?["error"], "invalid-utf8", "\(bytes)")
            XCTAssertEqual(r.first?["message"], "request is not valid UTF-8")
        }
        // Valid UTF-8 beyond ASCII is a request like any other (here: naming another app, which curl may not).
        XCTAssertEqual(h.request(c, "QUERY é")["error"], "permission-denied")
    }

    func testUnknownVerb() {
        let (h, c) = harness()
        let message = h.requestError(c, "FROB x", .unknownVerb)
        XCTAssertEqual(message, "unknown verb 'FROB'; send HELP for the list")
        // Only whole verbs: no prefixes, no extensions.
        for line in ["quer", "queryy", "ping1", "PIN G", "QUERY\u{1}"] { h.requestError(c, line, .unknownVerb) }
    }

    /// The echoed verb is capped, so a client cannot make the reply huge.
    func testUnknownVerbEchoIsCapped() {
        let (h, c) = harness()
        let message = h.requestError(c, String(repeating: "Q", count: 1000), .unknownVerb)
        XCTAssertTrue(message.contains("'" + String(repeating: "Q", count: 64) + "'"), message)
        XCTAssertFalse(message.contains(String(repeating: "Q", count: 65)), message)
    }

    func testVerbsAreCaseInsensitive() {
        let (h, c) = harness()
        for line in ["PING", "ping", "Ping", "pInG"] { XCTAssertEqual(h.request(c, line)["pong"], true, line) }
        XCTAssertEqual(h.request(c, "status")["version"], .string(DaemonState.version))
        XCTAssertNotNil(h.request(c, "Links")["links"]?.arrayValue)
        XCTAssertNotNil(h.request(c, "help")["verbs"]?.arrayValue)
        XCTAssertEqual(h.request(c, "qUeRy")["app"], "curl")
        XCTAssertEqual(h.request(c, "Quit")["bye"], true)
    }

    /// Words are split on spaces and tabs, however many.
    func testArgumentsSplitOnSpacesAndTabs() {
        let (h, c) = harness()
        XCTAssertEqual(h.request(c, "  \tQUERY \t curl  ")["app"], "curl")
        let sub = h.connect(Peers.curl)
        XCTAssertEqual(h.subscribe(sub, "\tlinks \t policy ").ack["subscribed"], .array(["links", "policy"]))
    }

    /// Every verb refuses one word more than it takes, with its usage, before anything else is checked (so an
    /// unprivileged caller learns the usage too), and without holding, closing or subscribing the connection.
    func testTooManyArgumentsForEveryVerb() {
        let maxArgs: [Verb: Int] = [.ping: 0, .help: 0, .status: 0, .links: 0, .query: 1, .apps: 0, .reload: 0,
                                    .subscribe: 8, .wait: 2, .prompts: 0, .answer: 3, .decide: 4, .forget: 2,
                                    .decisions: 0, .metrics: 0, .usage: 1, .resetUsage: 1, .quit: 0, .reach: 2,
                                    .scope: 66, .owns: 2, .report: 1, .resetReport: 1, .keepReport: 1]
        XCTAssertEqual(Set(maxArgs.keys), Set(Verb.allCases), "a new verb needs its row here")
        for peer in [Peers.root, Peers.curl] {
            let h = EngineHarness(links: [Links.eth])
            let c = h.connect(peer)
            for verb in Verb.allCases {
                let words = Array(repeating: "links", count: maxArgs[verb]! + 1)
                let line = ([verb.rawValue.uppercased()] + words).joined(separator: " ")
                XCTAssertEqual(h.requestError(c, line, .badArguments), "usage: \(verb.usage)", line)
            }
            let conn = h.connections[c]!
            XCTAssertFalse(conn.held)
            XCTAssertFalse(conn.closed, "a refused QUIT does not close")
            XCTAssertFalse(conn.keepsOpen, "a refused SUBSCRIBE does not subscribe")
            XCTAssertEqual(h.armedTimers, 0)
            XCTAssertTrue(h.persisted.isEmpty)
        }
    }

    func testLineTooLong() {
        let (h, c) = harness()
        let r = h.sendTooLong(c).map(EngineHarness.parse)
        XCTAssertEqual(r.count, 1)
        XCTAssertEqual(r.first?["error"], "line-too-long")
        XCTAssertEqual(r.first?["message"], "request longer than 4096 bytes; it was discarded")
        XCTAssertFalse(h.connections[c]!.closed)
        XCTAssertEqual(h.request(c, "PING")["pong"], true)
    }

    /// The reply, then the close (once it is sent); what was pipelined after QUIT is never answered.
    func testQuitRepliesThenCloses() {
        let h = EngineHarness(links: [])
        let c = h.connect(Peers.curl)
        // A held WAIT lets QUIT and PING queue up behind it, as they would in the transport.
        XCTAssertEqual(h.send(c, "WAIT"), [])
        XCTAssertEqual(h.send(c, "QUIT"), [])
        XCTAssertEqual(h.send(c, "PING"), [])
        let mark = h.steps.count
        h.setLinks([Links.eth])
        let got = h.take(c)
        XCTAssertEqual(got.count, 2, "the WAIT's reply and QUIT's, not PING's: \(got)")
        XCTAssertEqual(got.last, #"{"ok":true,"bye":true}"#)
        let steps = Array(h.steps[mark...])
        XCTAssertEqual(steps.filter { $0.hasSuffix(" \(c)") }, ["reply \(c)", "resume \(c)", "reply \(c)", "close \(c)"])
        XCTAssertTrue(h.connections[c]!.closed)
        XCTAssertEqual(h.send(c, "PING"), [])
    }

    func testHelpListsEveryVerb() throws {
        let (h, c) = harness()
        let r = h.request(c, "HELP")
        XCTAssertEqual(r.keys, ["ok", "verbs"])
        let verbs = try XCTUnwrap(r["verbs"]?.arrayValue)
        XCTAssertEqual(verbs.map { $0["verb"]?.stringValue }, Verb.allCases.map(\.usage))
        for usage in ["PING", "HELP", "STATUS", "LINKS", "QUERY [APP]", "APPS", "RELOAD", "WAIT [APP] [SECONDS]",
                      "PROMPTS", "DECIDE APP KIND allow|deny [--once]", "FORGET APP [KIND]", "QUIT"] {
            XCTAssertTrue(verbs.contains { $0["verb"]?.stringValue == usage }, usage)
        }
        XCTAssertTrue(verbs.allSatisfy { $0.keys == ["verb", "summary"] && !($0["summary"]?.stringValue ?? "").isEmpty })
    }

    /// A connection the engine does not know (already closed) gets nothing, whatever it sent.
    func testInputsForUnknownConnectionsAreIgnored() {
        let (h, _) = harness()
        let mark = h.steps.count
        h.feed(.line(77, Array("PING".utf8)))
        h.feed(.lineTooLong(77))
        h.feed(.closed(77))
        XCTAssertEqual(Array(h.steps[mark...]), [])
    }
}
