// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import XCTest

/// DNS answers as the report reads them (docs/PRIVACY.md), built byte by byte as a server sends them, hostile ones
/// among them.
final class DNSAnswerTests: XCTestCase {
    func name(_ labels: [[UInt8]]) -> [UInt8] { labels.flatMap { [UInt8($0.count)] + $0 } + [0] }
    func name(_ s: String) -> [UInt8] { name(s.split(separator: ".").map { Array($0.utf8) }) }

    func u16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

    /// A response with one question and `answers` (owner bytes, type, rdata).
    func message(question: [UInt8], answers: [([UInt8], Int, [UInt8])], flags: Int = 0x8180) -> [UInt8] {
        var m = u16(0x1234) + u16(flags) + u16(1) + u16(answers.count) + u16(0) + u16(0)
        m += question + u16(1) + u16(1)
        for (owner, type, data) in answers {
            m += owner + u16(type) + u16(1) + [0, 0, 0, 60] + u16(data.count) + data
        }
        return m
    }

    let toQuestion: [UInt8] = [0xC0, 12]

    func testAddressesThroughACNAMEShownUnderTheNameAsked() {
        let cdn = name("cdn.example.net")
        let m = message(question: name("Tiles.Example.ORG"), answers: [
            (toQuestion, 5, cdn), (cdn, 1, [192, 0, 2, 7]), (cdn, 28, [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [7]),
            (cdn, 16, Array("text".utf8)),
        ])
        XCTAssertEqual(DNSAnswer.parse(message: m[...]),
                       DNSAnswer(name: "tiles.example.org", addresses: ["192.0.2.7", "2001:db8::7"]))
    }

    func testFromAnIPPacket() {
        let dns = message(question: name("a.example"), answers: [(toQuestion, 1, [10, 0, 0, 1])])
        let udp = u16(53) + u16(40000) + u16(8 + dns.count) + [0, 0] + dns
        var v4: [UInt8] = [0x45, 0] + u16(20 + udp.count) + [0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 53, 10, 0, 0, 2]
        v4 += udp
        XCTAssertEqual(DNSAnswer.parse(ipPacket: v4)?.addresses, ["10.0.0.1"])
        var v6: [UInt8] = [0x60, 0, 0, 0] + u16(udp.count) + [17, 64] + [UInt8](repeating: 0, count: 32)
        v6 += udp
        XCTAssertEqual(DNSAnswer.parse(ipPacket: v6)?.name, "a.example")
        var fromElsewhere = v4
        fromElsewhere[21] = 54
        XCTAssertNil(DNSAnswer.parse(ipPacket: fromElsewhere), "only answers from port 53")
        XCTAssertNil(DNSAnswer.parse(ipPacket: Array(v4.prefix(30))))
    }

    func testNotAnAnswer() {
        let q = name("a.example")
        let a = [(toQuestion, 1, [UInt8]([10, 0, 0, 1]))]
        XCTAssertNil(DNSAnswer.parse(message: message(question: q, answers: a, flags: 0x0100)[...]), "a query")
        XCTAssertNil(DNSAnswer.parse(message: message(question: q, answers: a, flags: 0x8183)[...]), "NXDOMAIN")
        XCTAssertNil(DNSAnswer.parse(message: message(question: q, answers: a, flags: 0x8380)[...]), "truncated")
        XCTAssertNil(DNSAnswer.parse(message: message(question: q, answers: [])[...]), "no address")
        XCTAssertNil(DNSAnswer.parse(message: message(question: q, answers: [(toQuestion, 1, [1, 2, 3])])[...]), "bad A")
    }

    /// Control characters, spaces and dots inside labels are written visibly; a name over 253 characters as written
    /// is refused (a 255-byte wire name, or one that escaping makes long).
    func testHostileNames() {
        let a = [(toQuestion, 1, [UInt8]([10, 0, 0, 1]))]
        let controls = name([[0x1B] + Array("[2Kx".utf8), Array("a b.c\\".utf8), [0x0A, 0xFF], Array("ORG".utf8)])
        XCTAssertEqual(DNSAnswer.parse(message: message(question: controls, answers: a)[...])?.name,
                       "\\x1b[2kx.a\\x20b\\x2ec\\x5c.\\x0a\\xff.org")
        // 4 labels of 63 bytes: 255 bytes on the wire, 255 characters as text.
        let longest = name([[UInt8]](repeating: [UInt8](repeating: 0x61, count: 63), count: 4))
        XCTAssertEqual(longest.count, 4 * 64 + 1)
        XCTAssertNil(DNSAnswer.parse(message: message(question: longest, answers: a)[...]))
        let fits = name([[UInt8]](repeating: [UInt8](repeating: 0x61, count: 63), count: 3) + [[UInt8](repeating: 0x62, count: 61)])
        XCTAssertEqual(DNSAnswer.parse(message: message(question: fits, answers: a)[...])?.name.utf8.count, 253)
        let escapedLong = name([[UInt8]](repeating: [UInt8](repeating: 0x01, count: 63), count: 2))
        XCTAssertNil(DNSAnswer.parse(message: message(question: escapedLong, answers: a)[...]), "escaping past 253")
        XCTAssertTrue(DNSName.isShowable(DNSAnswer.parse(message: message(question: controls, answers: a)[...])!.name))
        // Fuzz/engine: a name of one empty label was "", which the report's file cannot hold (it did not read back).
        XCTAssertNil(DNSName.text(labels: [[]]))
        XCTAssertNil(DNSName.text(labels: [Array("a".utf8)[...], []]))
    }

    func testAThousandAnswersAndPointerLoops() {
        let answers = (0..<1000).map { i in (toQuestion, 1, [UInt8]([10, 9, UInt8(i / 256), UInt8(i % 256)])) }
        let parsed = DNSAnswer.parse(message: message(question: name("many.example"), answers: answers)[...])
        XCTAssertEqual(parsed?.addresses.count, DNSAnswer.maxAddresses)
        XCTAssertEqual(parsed?.addresses.first, "10.9.0.0")
        // A pointer to itself, and one forwards: refused, not followed.
        var loop = message(question: name("a.example"), answers: [([0xC0, 0], 1, [10, 0, 0, 1])])
        let owner = 12 + name("a.example").count + 4
        loop[owner + 1] = UInt8(owner)
        XCTAssertNil(DNSAnswer.parse(message: loop[...]))
        let forwards = message(question: name("a.example"), answers: [([0xC0, 0xFF], 1, [10, 0, 0, 1])])
        XCTAssertNil(DNSAnswer.parse(message: forwards[...]))
        // Cut anywhere: nil, never a crash.
        let whole = message(question: name("a.example"), answers: [(toQuestion, 1, [10, 0, 0, 1])])
        for n in 0..<whole.count { XCTAssertNil(DNSAnswer.parse(message: whole.prefix(n)), "\(n)") }
    }
}
