import XCTest
@testable import NetpermCore

/// QUERY's reply is written straight to bytes; it must be the very bytes of the same reply built as a tree.
final class ReplyEncodingTests: XCTestCase {
    private let network = NetworkState(links: [
        makeLink(2, "wlan0", .wifi, metric: 600),
        makeLink(3, "wwan \"0\"\\x", .wwan, metric: 100, metered: true),
        makeLink(4, "eth0", .ethernet, metric: nil),
    ])

    /// Every permission set over the network above, with and without a decision, plus not-ready and no links.
    private var verdicts: [Verdict] {
        var out: [Verdict] = []
        for (i, p) in allPermissionSets.enumerated() {
            var effective = EffectivePermissions(permissions: p)
            if i % 3 == 0 { effective.sources[.wwan] = .decision }
            if i % 5 == 0 { effective.sources[.wifi] = .once }
            out.append(Verdict.compute(app: i % 2 == 0 ? "app\(i)" : "ünïcode \"q\"\tapp", matchedBy: .executable,
                                       effective: effective, network: network, ready: true))
        }
        out.append(Verdict.compute(app: "x", matchedBy: .defaults, permissions: .builtIn, network: network, ready: false))
        out.append(Verdict.compute(app: "x", matchedBy: .name, permissions: .builtIn, network: NetworkState(),
                                   ready: true))
        return out
    }

    func testDirectBytesEqualTheTreesEncoding() throws {
        let identity = PeerIdentity(pid: 7, uid: 1000, gids: [1000], executable: "/usr/bin/a\"b", unit: nil,
                                    problem: "no\nexe")
        let vs = verdicts
        XCTAssertEqual(vs.count, 83)
        XCTAssertTrue(vs.contains { $0.available && $0.via?.metered == true })
        XCTAssertTrue(vs.contains { !$0.deniedKinds.isEmpty && !$0.pendingKinds.isEmpty })
        for v in vs {
            for reply in [VerdictReply(head: [("ok", true)], v),
                          VerdictReply(head: [("ok", false), ("error", "timeout")], v, identity: identity)] {
                let direct = Response(reply).encodedLine()
                let tree = Response(reply.json).encodedLine()
                XCTAssertEqual(String(decoding: direct, as: UTF8.self), String(decoding: tree, as: UTF8.self))
                XCTAssertEqual(try JSONParser.parse(String(decoding: direct.dropLast(), as: UTF8.self)), reply.json)
            }
        }
    }

    /// The tree a QUERY reply hands to tests and the bytes it sends agree, and the verdict's fields come in order.
    func testVerdictReplyTreeHasTheVerdictsFields() {
        let v = verdicts[5]
        let reply = Response(VerdictReply(head: [("ok", true)], v))
        guard case let .object(members) = reply.json else { return XCTFail("not an object: \(reply.json)") }
        XCTAssertEqual(members.map(\.0), ["ok", "app", "matched_by", "available", "reason", "via", "denied_kinds",
                                          "pending_kinds", "permissions", "sources"])
        XCTAssertEqual(reply.json, .object([("ok", true)] + { if case let .object(m) = v.json { return m }; return [] }()))
    }

    /// Strings of every length around the buffer's short-copy cases, escapes included, grow the buffer correctly.
    func testStringsOfEveryShortLength() throws {
        let buffer = ByteBuffer(capacity: 1)
        var expected = ""
        for n in 0...40 {
            let bytes: [UInt8] = (0..<n).map { i in i % 7 == 6 ? 0x22 : UInt8(97 + i % 26) }
            let s = String(decoding: bytes, as: UTF8.self)
            JSON.encode(s, into: buffer)
            expected += "\"" + s.replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        XCTAssertEqual(String(decoding: UnsafeBufferPointer(start: buffer.base, count: buffer.count), as: UTF8.self),
                       expected)
    }

    /// Link and app events are written straight to bytes too: the same bytes as their tree members.
    func testEventTailsEqualTheTreesEncoding() {
        var links = network.links
        links[0].addresses = ["10.0.0.1/24", "fe80::1/64"]
        links[1].metric = nil
        var events: [Event] = links.flatMap { l in [Event.link(.added, l), .link(.changed, l), .link(.removed, l)] }
        events += verdicts.map { Event.app($0) }
        for event in events {
            let reference = ByteBuffer(capacity: 16)
            JSON.appendMembers(event.fields, to: reference)
            reference.append(0x7D)
            reference.append(0x0A)
            XCTAssertEqual(String(decoding: event.encodedTailBytes(), as: UTF8.self),
                           String(decoding: UnsafeBufferPointer(start: reference.base, count: reference.count),
                                  as: UTF8.self))
        }
        XCTAssertFalse(Event.app(verdicts[0]).fields.contains { $0.0 == "matched_by" }, "app events omit matched_by")
    }

    func testKindKeysAreTheRawValues() {
        for kind in LinkKind.allCases { XCTAssertEqual(kind.key.description, kind.rawValue) }
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
}
