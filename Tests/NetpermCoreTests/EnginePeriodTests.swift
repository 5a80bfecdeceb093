// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import XCTest

/// Issue 31, point 8: periods survive any clock (docs/USAGE.md, "Periods and clocks"). Before: a clock stepping
/// back across a period's start, a dead RTC's 1970 at boot, NTP correcting a clock a month ahead, and a reload
/// moving `PeriodStart=` each wiped the current and the previous period's totals and reopened every budget.
extension EngineUsageTests {
    /// `maps` sent `bytes` this period (December 2026) and the engine stopped: its saved book, and the kernel's
    /// counters, which outlive it.
    func december(_ bytes: UInt64) throws -> (UsageBook, UsageReading) {
        let h = harness()
        count(h, "maps", sent: bytes)
        wall.pass(10)
        h.advance(bySeconds: 10)
        h.feed(.stopping)
        let book = try XCTUnwrap(h.usageSaves.last)
        XCTAssertEqual(book.period, CivilDate("2026-12-01"))
        return (book, try XCTUnwrap(h.usageReading))
    }

    func usage(_ h: EngineHarness) -> (start: String?, current: Int?, previous: Int?) {
        let r = h.request(h.connect(), "USAGE maps")
        let a = r["apps"]?.arrayValue?.first
        return (r["period"]?["start"]?.stringValue, a?["current"]?["sent_bytes"]?.intValue, a?["previous"]?["sent_bytes"]?.intValue)
    }

    /// A gateway with no RTC boots at 1970-01-02 (timesyncd runs, not synchronized yet), then NTP sets the clock.
    func testADeadRTCsBootDropsNothing() throws {
        let (book, reading) = try december(1_502_507)
        wall.now = 86400 + 60
        wall.trust = .waiting
        let h = harness(usage: book, reading: reading)
        h.advance(bySeconds: 10)
        XCTAssertEqual(usage(h).start, "2026-12-01", "the period never moves back")
        XCTAssertEqual(usage(h).current, 1_502_507)
        XCTAssertEqual(h.request(h.connect(), "QUERY maps")["reason"], "budget-exhausted", "its budget stays used up")
        XCTAssertFalse(h.logged(containing: "is before this period's start (2026-12-01)").isEmpty)
        assertNTPKeeps(h, at: 1_796_083_200 + 4 * 86400, current: 1_502_507)
    }

    /// NTP sets the clock to `now` (December 2026): the period stays December's, its totals as they were.
    func assertNTPKeeps(_ h: EngineHarness, at now: Double, current: Int, line: UInt = #line) {
        wall.now = now
        wall.trust = .synchronized
        h.advance(bySeconds: 10)
        XCTAssertEqual(usage(h).start, "2026-12-01", line: line)
        XCTAssertEqual(usage(h).current, current, line: line)
    }

    /// A clock stepped two minutes back across the first of the month: January stays January.
    func testAStepBackAcrossThePeriodsStartDropsNothing() throws {
        let h = harness()
        count(h, "maps", sent: 500_000)
        wall.pass(31 * 86400 - 60)   // 2026-12-31 23:59 UTC
        h.advance(bySeconds: 10)
        wall.pass(120)
        h.advance(bySeconds: 10)
        XCTAssertEqual(usage(h).start, "2027-01-01")
        count(h, "maps", sent: 801_571)
        wall.pass(10)
        h.advance(bySeconds: 10)
        XCTAssertEqual(usage(h).current, 301_571)
        wall.now -= 180
        h.advance(bySeconds: 10)
        XCTAssertEqual(usage(h).start, "2027-01-01", "not back to December")
        XCTAssertEqual(usage(h).current, 301_571)
        XCTAssertEqual(usage(h).previous, 500_000)
    }

    /// A clock a month ahead at start (nothing synchronizes it yet), then corrected by NTP: December stays December.
    func testAClockAheadThenCorrectedDropsNothing() throws {
        let (book, reading) = try december(700_000)
        let december = wall.now
        wall.now += 31 * 86400
        wall.trust = .waiting
        let h = harness(usage: book, reading: reading)
        for _ in 0..<3 {
            wall.pass(10)
            h.advance(bySeconds: 10)
        }
        XCTAssertEqual(usage(h).start, "2026-12-01", "a clock no service synchronized yet starts no period")
        XCTAssertFalse(h.logged(containing: "not synchronized yet: not moving to it yet").isEmpty)
        assertNTPKeeps(h, at: december + 60, current: 700_000)
    }

    /// Without any time service: a clock that jumps ahead is not believed at once; one that advances with the boot
    /// clock is (the month passes).
    func testAFreeClockIsBelievedWhenSteady() throws {
        let h = harness()
        wall.trust = .free
        count(h, "maps", sent: 100)
        wall.pass(10)
        h.advance(bySeconds: 10)
        wall.now += 31 * 86400
        h.advance(bySeconds: 10)
        XCTAssertEqual(usage(h).start, "2026-12-01", "a jump is not time passing")
        wall.pass(600)
        h.advance(bySeconds: 10)
        XCTAssertEqual(usage(h).start, "2026-12-01", "nor ten minutes after it")
        wall.pass(300)
        h.advance(bySeconds: 10)
        XCTAssertEqual(usage(h).start, "2027-01-01", "it went on steadily for a quarter of an hour: believed")
        XCTAssertEqual(usage(h).previous, 100)
    }

    /// A first period taken from a clock not synchronized is provisional: once synchronized, the totals are the
    /// period's the clock then says (not dropped as a whole period passed unseen).
    func testAProvisionalPeriodIsRelabelledOnceSynchronized() throws {
        let real = wall.now
        wall.now = 86400
        wall.trust = .waiting
        let h = harness()
        count(h, "maps", sent: 251_586)
        wall.pass(10)
        h.advance(bySeconds: 10)
        XCTAssertEqual(usage(h).start, "1970-01-01")
        XCTAssertEqual(h.usageSaves.last?.provisional, true)
        XCTAssertEqual(try UsageBook.parse(try XCTUnwrap(h.usageSaves.last).encoded(), path: "u").provisional, true,
                       "kept across a restart")
        wall.now = real
        wall.trust = .synchronized
        h.advance(bySeconds: 10)
        XCTAssertEqual(usage(h).start, "2026-12-01")
        XCTAssertEqual(usage(h).current, 251_586, "the same totals, under the real period")
        XCTAssertFalse(h.logged(containing: "the clock was synchronized: this period's totals are the period of 2026-12-01's").isEmpty)
        h.feed(.stopping)
        XCTAssertEqual(h.usageSaves.last?.provisional, false)
    }

    /// A reload moving PeriodStart= from 1 to 15 keeps the totals and the budget's bytes.
    func testMovingPeriodStartKeepsTheTotals() throws {
        let h = harness()
        count(h, "maps", sent: 701_675)
        wall.pass(19 * 86400)   // 2026-12-20
        h.advance(bySeconds: 10)
        h.reload(policy: Self.policy.replacingOccurrences(of: "[Usage]\n", with: "[Usage]\nPeriodStart=15\n"))
        wall.pass(10)
        h.advance(bySeconds: 10)
        XCTAssertEqual(usage(h).start, "2026-12-15")
        XCTAssertEqual(usage(h).current, 701_675)
        XCTAssertTrue(h.usageScripts.last!.contains("used 701675 bytes"), "its quota is made again with what it used")
    }

    func testThePeriodDecision() {
        func d(_ s: String) -> CivilDate { CivilDate(s)! }
        func at(_ s: String, _ t: ClockTrust = .synchronized) -> WallTime { WallTime(epoch: 0, date: d(s), trust: t) }
        XCTAssertEqual(PeriodMove.decide(period: nil, provisional: false, now: at("1970-01-02", .waiting), startDay: 1, steady: false),
                       .first(d("1970-01-01"), provisional: true))
        XCTAssertEqual(PeriodMove.decide(period: d("2026-12-01"), provisional: false, now: at("2027-01-01"), startDay: 1, steady: false),
                       .roll(d("2027-01-01")))
        XCTAssertEqual(PeriodMove.decide(period: d("2027-01-01"), provisional: false, now: at("2026-12-31"), startDay: 1, steady: true),
                       .behind(d("2026-12-01")))
        XCTAssertEqual(PeriodMove.decide(period: d("2026-12-01"), provisional: false, now: at("2027-01-02", .free), startDay: 1, steady: false),
                       .untrusted(d("2027-01-01")))
        XCTAssertEqual(PeriodMove.decide(period: d("2026-12-01"), provisional: false, now: at("2027-01-02", .free), startDay: 1, steady: true),
                       .roll(d("2027-01-01")))
        XCTAssertEqual(PeriodMove.decide(period: d("2026-12-01"), provisional: false, now: at("2026-12-10"), startDay: 15, steady: false),
                       .relabel(d("2026-11-15"), .startDay))
        XCTAssertEqual(PeriodMove.decide(period: d("2026-02-28"), provisional: false, now: at("2026-03-01"), startDay: 31, steady: false),
                       .stay, "February's last day is the 31st's start there")
    }
}
