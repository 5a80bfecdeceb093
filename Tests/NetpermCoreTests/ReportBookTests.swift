// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol
import XCTest

/// The privacy report's pure parts (docs/PRIVACY.md): [Report], who is recorded, names learnt per app, bounds and
/// the order of eviction, days rolling, the file, and hostile DNS answers.
final class ReportBookTests: XCTestCase {
    let maps = ReportOwner(app: "maps", uid: nil)
    let alices = ReportOwner(app: "chat", uid: 1000)
    let bobs = ReportOwner(app: "game", uid: 1001)
    let wifi = ReportLink(kind: .wifi)
    let wwan = ReportLink(kind: .wwan, metered: true)
    let t0 = 1_764_979_200  // 2025-12-06 00:00 UTC

    func book(days: Int = 7, limits: ReportBook.Limits = .init()) -> ReportBook {
        var b = ReportBook(limits: limits)
        var s = ReportSettings()
        s.enabled = true
        s.days = days
        b.configure(s, now: t0)
        return b
    }

    func conn(_ o: ReportOwner, _ address: String, _ link: ReportLink, at t: Int, _ outcome: ReportOutcome = .allowed,
              port: UInt16 = 443) -> ReportConnection {
        ReportConnection(owner: o, address: address, port: port, proto: 6, link: link, time: t, outcome: outcome)
    }

    func testReportSection() throws {
        XCTAssertEqual(try parsePolicy("").report, ReportSettings(), "off by default")
        XCTAssertFalse(ReportSettings().enabled)
        let on = try parsePolicy("[Usage]\nCount=yes\n[Report]\nEnabled=yes\nDays=3\n").report
        XCTAssertTrue(on.enabled)
        XCTAssertEqual(on.days, 3)
        let path = "/etc/netpermd/netpermd.conf"
        let bad = Config.parse(files: [(path, "[Report]\nEnabled=maybe\nDays=0\nDays=32\nKeep=1\n")], accounts: FakeAccounts())
        XCTAssertEqual(bad.problems.map(\.description), [
            "\(path):2: [Report]: bad value 'maybe' for Enabled= (expected yes or no)",
            "\(path):3: [Report]: bad value '0' for Days= (expected days, 1 to 31)",
            "\(path):4: [Report]: bad value '32' for Days= (expected days, 1 to 31)",
            "\(path):5: warning: [Report]: unknown key 'Keep' (expected Enabled= or Days=); ignored",
        ])
        let uncounted = Config.parse(files: [(path, "[Report]\nEnabled=yes\n")], accounts: FakeAccounts())
        XCTAssertEqual(uncounted.problems.map(\.description), [
            "\(path):2: [Report]: Enabled=yes needs [Usage] Count=yes: the report is learnt through the counting table",
        ])
    }

    func testOffUntilTurnedOnByTheMachineAndByEachPerson() {
        var off = ReportBook()
        off.record(conn(maps, "192.0.2.1", wifi, at: t0))
        XCTAssertTrue(off.entries.isEmpty, "the machine's report is off by default")

        var b = book()
        b.record(conn(maps, "192.0.2.1", wifi, at: t0))
        b.record(conn(alices, "192.0.2.2", wifi, at: t0))
        XCTAssertEqual(b.rows().map(\.key.owner), [maps], "a person's own app waits for that person to turn it on")
        b.setPerson(1000, on: true)
        b.record(conn(alices, "192.0.2.2", wifi, at: t0 + 1))
        b.record(conn(bobs, "192.0.2.3", wifi, at: t0 + 1))
        XCTAssertEqual(b.rows().map(\.key.owner), [alices, maps])
        // Alice turns hers off: hers go, the machine's stay.
        b.setPerson(1000, on: false)
        XCTAssertEqual(b.rows().map(\.key.owner), [maps])
        // The admin turns it off: everything goes.
        b.configure(ReportSettings(), now: t0 + 2)
        XCTAssertTrue(b.entries.isEmpty)
        XCTAssertEqual(b.people, [], "the people's choices go with the rest")
        XCTAssertEqual(b.names.count, 0)
    }

    func testEntriesByDestinationAndLinkWithRefusalsAndBytes() {
        var b = book()
        b.learn(ReportAnswer(owner: maps, name: "tiles.example.org", addresses: ["192.0.2.7", "2001:db8::7"], time: t0))
        b.record(conn(maps, "192.0.2.7", wifi, at: t0 + 10))
        b.record(conn(maps, "2001:db8::7", wifi, at: t0 + 20))
        b.record(conn(maps, "192.0.2.7", wwan, at: t0 + 30))
        b.record(conn(maps, "192.0.2.7", wwan, at: t0 + 31, .refused(.budget)))
        b.record(conn(maps, "198.51.100.1", wwan, at: t0 + 40, .refused(.denied)))
        b.record(conn(maps, "198.51.100.1", wwan, at: t0 + 41, .refused(.ask)))
        b.add(ReportBytes(owner: maps, address: "2001:db8::7", link: wifi, time: t0 + 50, bytes: 1500))
        let rows = b.rows()
        XCTAssertEqual(rows.map { "\($0.key.host) \($0.key.link.kind)" },
                       ["198.51.100.1 wwan", "tiles.example.org wifi", "tiles.example.org wwan"])
        let tilesWifi = rows[1].entry
        XCTAssertEqual(tilesWifi.connections, 2)
        XCTAssertEqual(tilesWifi.address, "2001:db8::7", "the last address reached")
        XCTAssertEqual([tilesWifi.first, tilesWifi.last], [t0 + 10, t0 + 20])
        XCTAssertEqual(tilesWifi.bytes, 1500)
        XCTAssertEqual([rows[2].entry.connections, rows[2].entry.budget], [1, 1])
        XCTAssertEqual([rows[0].entry.connections, rows[0].entry.denied, rows[0].entry.ask], [0, 1, 1])
        XCTAssertTrue(rows[2].key.link.metered)
    }

    /// A hostile app's answer naming the addresses another app connects to names only its own connections.
    func testAnAnswerNamesOnlyTheAppThatReceivedIt() {
        var b = book()
        b.setPerson(1000, on: true)
        b.setPerson(1001, on: true)
        b.learn(ReportAnswer(owner: bobs, name: "evil.example", addresses: ["192.0.2.9"], time: t0))
        b.record(conn(alices, "192.0.2.9", wifi, at: t0 + 1))
        b.record(conn(bobs, "192.0.2.9", wifi, at: t0 + 1))
        XCTAssertEqual(b.rows(where: { $0 == alices }).map(\.key.host), ["192.0.2.9"])
        XCTAssertEqual(b.rows(where: { $0 == bobs }).map(\.key.host), ["evil.example"])
        // Nor another uid's copy of the same app.
        let alicesGame = ReportOwner(app: "game", uid: 1000)
        b.record(conn(alicesGame, "192.0.2.9", wifi, at: t0 + 2))
        XCTAssertEqual(b.rows(where: { $0 == alicesGame }).map(\.key.host), ["192.0.2.9"])
    }

    /// The kernel hears an app's answer before its connection, but the loop reads the two sockets in either order:
    /// an answer read just after the connection still names it (merged with the entry of that name if there is one),
    /// another app's connection to the address stays by address, and an old entry by address keeps its address.
    func testAnAnswerReadAfterItsConnectionNamesIt() {
        var b = book()
        b.setPerson(1000, on: true)
        b.record(conn(maps, "192.0.2.20", wifi, at: t0))  // by address long before: not this answer's
        b.record(conn(maps, "192.0.2.21", wifi, at: t0 + 100))
        b.record(conn(maps, "192.0.2.21", wwan, at: t0 + 100, .refused(.budget)))
        b.record(conn(alices, "192.0.2.21", wifi, at: t0 + 100))
        b.learn(ReportAnswer(owner: maps, name: "tiles.example.org", addresses: ["192.0.2.20", "192.0.2.21"], time: t0 + 101))
        XCTAssertEqual(b.rows(where: { $0 == maps }).map { "\($0.key.host) \($0.key.link.kind)" },
                       ["192.0.2.20 wifi", "tiles.example.org wifi", "tiles.example.org wwan"])
        XCTAssertEqual(b.rows(where: { $0 == maps }).map(\.entry.budget), [0, 0, 1])
        XCTAssertEqual(b.rows(where: { $0 == alices }).map(\.key.host), ["192.0.2.21"], "never another app's")
        // Bytes at the connection's end find it by its name.
        b.add(ReportBytes(owner: maps, address: "192.0.2.21", link: wifi, time: t0 + 102, bytes: 7))
        XCTAssertEqual(b.rows(where: { $0 == maps })[1].entry.bytes, 7)

        // Into an entry of that name already there: one entry, its counts added.
        b.record(conn(maps, "192.0.2.22", wifi, at: t0 + 103))
        b.learn(ReportAnswer(owner: maps, name: "tiles.example.org", addresses: ["192.0.2.22"], time: t0 + 103))
        let tiles = b.rows(where: { $0 == maps }).filter { $0.key.host == "tiles.example.org" && $0.key.link == wifi }
        XCTAssertEqual(tiles.map(\.entry.connections), [2])
        XCTAssertEqual(tiles.map(\.entry.address), ["192.0.2.22"])
        XCTAssertEqual(tiles.map(\.entry.first), [t0 + 100])

        // Past two windows an answer no longer renames what was recorded by address.
        b.record(conn(maps, "192.0.2.23", wifi, at: t0 + 200))
        b.learn(ReportAnswer(owner: maps, name: "late.example", addresses: ["192.0.2.23"],
                             time: t0 + 200 + 2 * 5))
        XCTAssertTrue(b.rows(where: { $0 == maps }).contains { $0.key.host == "192.0.2.23" })
    }

    /// A user's own unit's app (ReportUnits) is named by its uid's app's answers (the answers' rule knows the tag
    /// only), never by another's; its cgroup id travels in the connection's labels, bit by bit.
    func testAUsersUnitIsNamedByItsUidsAnswersAndFoundByItsLabels() {
        var b = book()
        b.setPerson(1000, on: true)
        let unit = ReportOwner(app: "org.gnome.Maps", uid: 1000)
        b.learn(ReportAnswer(owner: alices, name: "tiles.example.org", addresses: ["192.0.2.30"], time: t0))
        b.learn(ReportAnswer(owner: maps, name: "evil.example", addresses: ["192.0.2.31"], time: t0))
        var c = conn(unit, "192.0.2.30", wifi, at: t0 + 1)
        c.namer = alices
        b.record(c)
        c.address = "192.0.2.31"
        b.record(c)
        b.add(ReportBytes(owner: unit, address: "192.0.2.30", link: wifi, time: t0 + 2, bytes: 5, namer: alices))
        XCTAssertEqual(b.rows(where: { $0 == unit }).map { "\($0.key.host) \($0.entry.bytes)" },
                       ["192.0.2.31 0", "tiles.example.org 5"])

        let id: UInt64 = 0x1_0000_2a05
        var labels = [UInt8](repeating: 0, count: 16)
        for bit in (0..<64).filter({ id & (1 << UInt64($0)) != 0 }).map({ ReportUnits.idBase + $0 }) + [ReportUnits.present] {
            labels[bit / 8] |= 1 << UInt8(bit % 8)
        }
        XCTAssertEqual(ReportLabels.unit(labels), id)
        labels[ReportUnits.present / 8] = 0
        XCTAssertNil(ReportLabels.unit(labels), "no unit without its bit")
        let u = Ruleset.Tagging.UserUnit(level: 5, key: .cgroup("/u.slice/app.scope", id), id: id,
                                         owner: UserApp(uid: 1000, app: "org.gnome.Maps"))
        let chains = ReportUnits.chains([u], on: true)
        XCTAssertEqual(chains.first { $0.name == "report_unit" }?.rules, ["socket cgroupv2 level 5 @user_units goto report_level_5"])
        XCTAssertEqual(chains.first { $0.name == "report_level_5" }?.rules.count, 1 + id.nonzeroBitCount)
        XCTAssertEqual(ReportUnits.maps([u], on: true).filter { $0.name.hasPrefix("report_bit_") && !$0.elements.isEmpty }.count,
                       id.nonzeroBitCount)
        XCTAssertEqual(ReportUnits.maps([u], on: true).first { $0.name == "report_units" }?.elements,
                       ["\"/u.slice/app.scope\" : 0x00002a05"], "its mark for a refusal: the id's low 32 bits")
        XCTAssertEqual(ReportUnits.maps([u], on: false).first { $0.name == "report_units" }?.elements, [])
        XCTAssertTrue(ReportUnits.chains([u], on: false).allSatisfy(\.rules.isEmpty), "nothing while the report is off")
    }

    func testDaysRollWholeAndFewerDaysDropTheOlder() {
        var b = book(days: 3)
        for d in 0..<5 { b.record(conn(maps, "192.0.2.\(d)", wifi, at: t0 + d * 86400)) }
        XCTAssertEqual(b.rows().map(\.key.host), ["192.0.2.2", "192.0.2.3", "192.0.2.4"], "today and the two before")
        var s = ReportSettings()
        s.enabled = true
        s.days = 1
        b.configure(s, now: t0 + 4 * 86400 + 5)
        XCTAssertEqual(b.rows().map(\.key.host), ["192.0.2.4"])
        // The same destination on two days is two entries; bytes go to the newest.
        s.days = 7
        b.configure(s, now: t0 + 4 * 86400 + 6)
        b.record(conn(maps, "192.0.2.4", wifi, at: t0 + 5 * 86400))
        b.add(ReportBytes(owner: maps, address: "192.0.2.4", link: wifi, time: t0 + 5 * 86400 + 1, bytes: 9))
        XCTAssertEqual(b.rows().map(\.entry.bytes), [0, 9])
    }

    /// Past the bound one entry goes for each new one, the oldest by its last time first (ReportAge: made longest
    /// ago, unless used since); an old entry used again stays. Never thousands at once: a flood's drops are one a
    /// connection.
    func testBoundedOldestDroppedFirst() {
        var limits = ReportBook.Limits()
        limits.entries = 16
        var b = book(limits: limits)
        for i in 0..<16 { b.record(conn(maps, "10.0.0.\(i)", wifi, at: t0 + i)) }
        b.record(conn(maps, "10.0.0.0", wifi, at: t0 + 100))  // the oldest, used again
        XCTAssertEqual(b.entries.count, 16)
        b.record(conn(maps, "10.0.0.99", wifi, at: t0 + 101))
        XCTAssertEqual(b.entries.count, 16, "one dropped for the new one")
        XCTAssertEqual(b.evicted, 1)
        var hosts = Set(b.rows().map(\.key.host))
        XCTAssertFalse(hosts.contains("10.0.0.1"), "the oldest went")
        XCTAssertTrue(hosts.contains("10.0.0.2"))
        XCTAssertTrue(hosts.contains("10.0.0.0"), "used again: kept")
        XCTAssertTrue(hosts.contains("10.0.0.99"))
        b.record(conn(maps, "10.0.0.98", wifi, at: t0 + 102))
        hosts = Set(b.rows().map(\.key.host))
        XCTAssertFalse(hosts.contains("10.0.0.2"), "then the next oldest")
        XCTAssertTrue(hosts.contains("10.0.0.0"), "not the one used again, queued again by its last time")
        // A flood of new destinations never holds more than the bound, and each drop is one entry.
        for i in 0..<1000 {
            b.record(conn(maps, "10.1.\(i / 256).\(i % 256)", wifi, at: t0 + 200 + i / 100))
            XCTAssertEqual(b.entries.count, 16)
        }
        XCTAssertEqual(b.evicted, 1002)
        XCTAssertEqual(Set(b.rows().map(\.key.host)), Set((984..<1000).map { "10.1.\($0 / 256).\($0 % 256)" }),
                       "the newest stay, all of one second or not")
        // The same inputs drop the same entries in every process, whatever the dictionaries' order; a book read back
        // from its file queues its entries by their last time (ties in the keys' order).
        var same = book(limits: limits)
        for i in 0..<17 { same.record(conn(maps, "10.2.0.\(i)", wifi, at: t0)) }
        XCTAssertEqual(same.entries.count, 16)
        XCTAssertNil(same.entries.keys.first { $0.host == "10.2.0.0" }, "the first made of one second goes first")
        var restored = book(limits: limits)
        restored.restore(b.entries.merging([ReportKey(owner: maps, day: ReportBook.day(of: t0), host: "10.9.9.9", link: wifi):
                                               ReportEntry(address: "10.9.9.9", port: 1, proto: 6, first: t0, last: t0)]) { a, _ in a },
                         people: [])
        restored.record(conn(maps, "10.2.0.1", wifi, at: t0 + 2000))
        XCTAssertEqual(restored.entries.count, 16)
        XCTAssertNil(restored.entries.keys.first { $0.host == "10.9.9.9" }, "the oldest of the file went first")
        // Below the bound nothing is dropped: the keys of entries gone by their day leave the queue all the same.
        var days = book(days: 1)
        for i in 0..<3000 { days.record(conn(maps, "10.4.\(i / 256).\(i % 256)", wifi, at: t0)) }
        days.record(conn(maps, "10.5.0.1", wifi, at: t0 + 86400))
        XCTAssertEqual(days.entries.count, 1)
        XCTAssertEqual(days.age.count, 1)
    }

    func testNamesBounded() {
        var limits = ReportBook.Limits()
        limits.names.perOwner = 8
        limits.names.total = 16
        var b = book(limits: limits)
        let many = (0..<1000).map { "10.2.\($0 / 256).\($0 % 256)" }
        b.learn(ReportAnswer(owner: maps, name: "many.example", addresses: many, time: t0))
        XCTAssertLessThanOrEqual(b.names.count, 8, "an answer of 1,000 addresses is bounded")
        XCTAssertNil(b.names.name(of: many[0], for: maps), "beyond the 32 of one answer, or the oldest: dropped")
        XCTAssertEqual(b.names.name(of: many[31], for: maps), "many.example", "the newest of the 32 taken stays")
        XCTAssertNil(b.names.name(of: many[32], for: maps), "the 33rd is never read")
        for app in 0..<10 {
            let o = ReportOwner(app: "app\(app)", uid: nil)
            for i in 0..<4 { b.learn(ReportAnswer(owner: o, name: "n\(i).example", addresses: ["10.3.\(app).\(i)"], time: t0)) }
        }
        XCTAssertLessThanOrEqual(b.names.count, 16)
        XCTAssertEqual(b.names.name(of: "10.3.9.3", for: ReportOwner(app: "app9", uid: nil)), "n3.example")
        XCTAssertNil(b.names.name(of: "10.3.0.0", for: ReportOwner(app: "app0", uid: nil)), "the oldest learnt went first")
    }

    func testFileRoundTripAndRefusals() throws {
        var b = book()
        b.setPerson(1000, on: true)
        b.learn(ReportAnswer(owner: alices, name: "chat.example", addresses: ["192.0.2.1"], time: t0))
        b.record(conn(alices, "192.0.2.1", wwan, at: t0 + 5))
        b.record(conn(maps, "2001:db8::1", ReportLink(kind: .wwan, metered: true, roaming: true), at: t0 + 6, .refused(.denied)))
        b.add(ReportBytes(owner: alices, address: "192.0.2.1", link: wwan, time: t0 + 9, bytes: 4096))
        let text = b.encoded()
        XCTAssertEqual(text, """
            # netpermd's privacy report, written by the daemon (docs/PRIVACY.md).
            version 2
            person 1000
            entry 20428 chat 1000 wwan m chat.example 192.0.2.1 443 6 \(t0 + 5) \(t0 + 5) 1 4096 0 0 0 0 0
            entry 20428 maps - wwan mr 2001:db8::1 2001:db8::1 443 6 \(t0 + 6) \(t0 + 6) 0 0 1 0 0 \(t0 + 6) \(t0 + 6)

            """)
        var back = try ReportBook.parse(text, path: "report")
        XCTAssertEqual(back.people, [1000])
        XCTAssertEqual(back.entries, b.entries)
        var s = ReportSettings()
        s.enabled = true
        back.configure(s, now: t0 + 10)
        XCTAssertEqual(back.entries, b.entries, "kept across a restart")
        // A version 1 file (before refusals had times of their own): its refusals take the entry's times.
        let old = try ReportBook.parse("version 1\nentry 20428 maps - wwan m h 1.2.3.4 1 6 10 20 1 0 0 2 0\n", path: "r")
        XCTAssertEqual(old.entries.values.map { [$0.refusedFirst, $0.refusedLast] }, [[10, 20]])
        for bad in ["version 3", "entry 1 maps", "entry 20428 maps - wwan m a\u{1}b 1.2.3.4 1 6 1 1 1 1 1 1 1",
                    "entry 20428 maps - tunnel - h 1.2.3.4 1 6 1 1 1 1 1 1 1", "person -1"] {
            XCTAssertThrowsError(try ReportBook.parse("version 1\n" + bad + "\n", path: "report"), bad)
        }
    }

    /// The bound on disk: 7 days of 10,000 connections a day to 1,000 names is 7,000 entries, under 16 MiB
    /// (BENCHMARKS.md figure 24 quotes what this prints).
    func testSevenDaysOfTenThousandConnectionsADayToAThousandNamesOnDisk() throws {
        var b = book()
        let owner = ReportOwner(app: "browser", uid: nil)
        for day in 0..<7 {
            let start = t0 + day * 86400
            for n in 0..<1000 {
                b.learn(ReportAnswer(owner: owner, name: "host\(n).cdn-\(n % 37).example.net",
                                     addresses: ["10.\(n / 250).\(n % 250).\(day + 1)"], time: start))
            }
            for i in 0..<10_000 {
                let n = i % 1000
                b.record(conn(owner, "10.\(n / 250).\(n % 250).\(day + 1)", i % 3 == 0 ? wwan : wifi, at: start + i * 8,
                              i % 50 == 0 ? .refused(.denied) : .allowed, port: UInt16(443 + i % 2)))
            }
        }
        let text = b.encoded()
        XCTAssertLessThan(b.entries.count, b.limits.entries)
        XCTAssertEqual(b.entries.count, 7 * 1000 * 2, "per day, each name over wifi and wwan")
        XCTAssertLessThan(text.utf8.count, 16 << 20)
        XCTAssertEqual(try ReportBook.parse(text, path: "report").entries, b.entries)
        print("report file for 7 days x 10,000 connections/day to 1,000 names: \(b.entries.count) entries, "
              + "\(text.utf8.count) bytes")
    }

    func testAddressText() {
        XCTAssertEqual(AddressText.text([192, 0, 2, 1]), "192.0.2.1")
        XCTAssertEqual(AddressText.text([0, 9, 10, 99]), "0.9.10.99")
        XCTAssertEqual(AddressText.text([100, 105, 250, 255]), "100.105.250.255")
        func v6(_ s: String) -> String? { AddressText.text(IPAddress(s)!.bytes) }
        for s in ["2001:db8::1", "::1", "::", "fe80::1:0:0:1", "2001:db8:0:1:1:1:1:1", "1::", "2001:0:0:1::1",
                  "::ffff:192.0.2.1", "2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff"] {
            XCTAssertEqual(v6(s), s)
        }
        XCTAssertEqual(v6("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1", "the first of equal runs")
        XCTAssertNil(AddressText.text([1, 2, 3]))
    }
}
