// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol
import XCTest

/// Usage's pure parts (docs/USAGE.md): sizes, the [Usage] section and MeteredBudget=, periods, totals kept from the
/// kernel's counters by their growth, and the usage file.
final class UsageBookTests: XCTestCase {
    let wwanM = UsageClass(kind: .wwan, metered: true)
    let wifi = UsageClass(kind: .wifi, metered: false)

    func testSizes() {
        XCTAssertEqual(ByteSize.parse("500000"), 500_000)
        XCTAssertEqual(ByteSize.parse("200M"), 200 << 20)
        XCTAssertEqual(ByteSize.parse("200MiB"), 200 << 20)
        XCTAssertEqual(ByteSize.parse("200MB"), 200 << 20)
        XCTAssertEqual(ByteSize.parse("1.5G"), 3 << 29)
        XCTAssertEqual(ByteSize.parse("1k"), 1024)
        XCTAssertEqual(ByteSize.parse("2T"), 2 << 40)
        for bad in ["", "M", "-1", "1.5", "1,5G", "12X", "1.G", "0x10", "99999999999999999999", "5000000000T"] {
            XCTAssertNil(ByteSize.parse(bad), bad)
        }
        XCTAssertEqual(ByteSize.text(512), "512 B")
        XCTAssertEqual(ByteSize.text(1536), "1.5 KiB")
        XCTAssertEqual(ByteSize.text(1 << 20), "1 MiB")
        XCTAssertEqual(ByteSize.text(200 << 20), "200 MiB")
        XCTAssertEqual(ByteSize.text((10 << 20) - 1), "10 MiB", "rounded")
        XCTAssertEqual(ByteSize.text(UInt64.max), "16 EiB")
    }

    func testUsageSectionAndBudgets() throws {
        let c = try parsePolicy("""
            [Usage]
            Count=yes
            PeriodStart=15
            SaveIntervalSec=5
            [Defaults]
            MeteredBudget=1G
            [App maps]
            User=1000
            MeteredBudget=200M
            [App backup]
            User=1001
            MeteredBudget=infinity
            [App web]
            User=1002
            """)
        XCTAssertEqual(c.usage.count, true)
        XCTAssertEqual(c.usage.periodStart, 15)
        XCTAssertEqual(c.usage.saveIntervalSec, 5)
        XCTAssertEqual(c.meteredBudget(for: c.app(named: "maps")), 200 << 20)
        XCTAssertNil(c.meteredBudget(for: c.app(named: "backup")), "infinity: none, whatever [Defaults] say")
        XCTAssertEqual(c.meteredBudget(for: c.app(named: "web")), 1 << 30, "[Defaults]' budget")
        XCTAssertEqual(try parsePolicy("").usage, UsageSettings(), "counting is off by default")

        let path = "/etc/netpermd/netpermd.conf"
        let bad = Config.parse(files: [(path, """
            [Usage]
            Count=sometimes
            PeriodStart=32
            SaveIntervalSec=0
            Budget=1
            [App maps]
            User=1000
            MeteredBudget=lots
            """)], accounts: FakeAccounts())
        XCTAssertEqual(bad.problems.map(\.description), [
            "\(path):2: [Usage]: bad value 'sometimes' for Count= (expected yes or no)",
            "\(path):3: [Usage]: bad value '32' for PeriodStart= (expected a day of the month, 1 to 31)",
            "\(path):4: [Usage]: bad value '0' for SaveIntervalSec= (expected seconds, 1 to 86400)",
            "\(path):5: warning: [Usage]: unknown key 'Budget' (expected Count=, PeriodStart=, SaveIntervalSec= or MetricsApps=); ignored",
            "\(path):8: [App maps]: bad value 'lots' for MeteredBudget= (expected a size such as 200M, 1.5G or 500000, or infinity)",
        ])
        // Nothing would count what the budget is of: an error where it is set.
        let uncounted = Config.parse(files: [(path, "[App maps]\nUser=1000\nMeteredBudget=1M\n")], accounts: FakeAccounts())
        XCTAssertEqual(uncounted.problems.map(\.description), [
            "\(path):3: [App maps]: MeteredBudget= needs [Usage] Count=yes: nothing counts what apps use without it",
        ])
        XCTAssertNil(uncounted.config)
    }

    func testPeriods() {
        func d(_ s: String) -> CivilDate { CivilDate(s)! }
        XCTAssertEqual(UsagePeriod.start(containing: d("2026-12-02"), startDay: 1), d("2026-12-01"))
        XCTAssertEqual(UsagePeriod.start(containing: d("2026-12-14"), startDay: 15), d("2026-11-15"))
        XCTAssertEqual(UsagePeriod.start(containing: d("2026-12-15"), startDay: 15), d("2026-12-15"))
        XCTAssertEqual(UsagePeriod.start(containing: d("2027-01-10"), startDay: 15), d("2026-12-15"), "across a year")
        // A month shorter than the day: its last day.
        XCTAssertEqual(UsagePeriod.start(containing: d("2027-02-28"), startDay: 31), d("2027-02-28"))
        XCTAssertEqual(UsagePeriod.start(containing: d("2027-02-27"), startDay: 31), d("2027-01-31"))
        XCTAssertEqual(UsagePeriod.start(containing: d("2028-02-29"), startDay: 30), d("2028-02-29"), "a leap year")
        XCTAssertEqual(UsagePeriod.next(after: d("2027-01-31"), startDay: 31), d("2027-02-28"))
        XCTAssertEqual(UsagePeriod.next(after: d("2027-02-28"), startDay: 31), d("2027-03-31"))
        XCTAssertEqual(UsagePeriod.next(after: d("2026-12-01"), startDay: 1), d("2027-01-01"))
        for bad in ["2026-13-01", "2026-02-30", "26-12-01", "2026-1-01", ""] { XCTAssertNil(CivilDate(bad), bad) }
    }

    /// Totals are the counters' growth since the last reading of the same table, to the app its tag names; a new
    /// table, or a counter made again, counts from zero; untracked packets and unknown tags are other processes'.
    func testAbsorbCountsGrowthOnce() {
        var book = UsageBook()
        let owner: (UInt32) -> String? = { $0 == 0x6E80_0001 ? "maps" : nil }
        var r = UsageReading(instance: "b:1:7", counters: [
            UsageKey(.sent, wwanM, mark: 0x6E80_0001): UsageCounter(bytes: 1000, packets: 10),
            UsageKey(.received, wwanM, mark: 0x6E80_0001): UsageCounter(bytes: 5000, packets: 8),
            UsageKey(.sent, wifi, mark: 0): UsageCounter(bytes: 300, packets: 3),
            UsageKey(.received, wifi, mark: nil): UsageCounter(bytes: 40, packets: 1),
        ])
        XCTAssertEqual(book.absorb(r, owner: owner), ["maps"])
        XCTAssertEqual(book["maps"].current[wwanM], UsageCounts(sentBytes: 1000, sentPackets: 10, receivedBytes: 5000, receivedPackets: 8))
        XCTAssertEqual(book["maps"].current.meteredBytes, 6000)
        XCTAssertEqual(book.other.current[wifi], UsageCounts(sentBytes: 300, sentPackets: 3, receivedBytes: 40, receivedPackets: 1))
        XCTAssertEqual(book.absorb(r, owner: owner), [], "the same reading again adds nothing")
        r.counters[UsageKey(.sent, wwanM, mark: 0x6E80_0001)] = UsageCounter(bytes: 1500, packets: 14)
        book.absorb(r, owner: owner)
        XCTAssertEqual(book["maps"].current[wwanM].sentBytes, 1500)
        XCTAssertEqual(book["maps"].sinceReset[wwanM].sentBytes, 1500)
        // The counter was made again (its element went): its value is all new.
        r.counters[UsageKey(.sent, wwanM, mark: 0x6E80_0001)] = UsageCounter(bytes: 100, packets: 1)
        book.absorb(r, owner: owner)
        XCTAssertEqual(book["maps"].current[wwanM].sentBytes, 1600)
        // Another table (a reboot, a flush): every counter is new.
        r.instance = "b:1:9"
        book.absorb(r, owner: owner)
        XCTAssertEqual(book["maps"].current[wwanM].sentBytes, 1700)
        XCTAssertEqual(book["maps"].current[wwanM].receivedBytes, 10000)
        XCTAssertEqual(book.other.current[wifi].sentBytes, 600)
    }

    func testPeriodsRollAndResets() {
        var book = UsageBook()
        book.absorb(UsageReading(instance: "i", counters: [UsageKey(.sent, wwanM, mark: 1): UsageCounter(bytes: 10, packets: 1)]),
                    owner: { _ in "maps" })
        let dec = CivilDate("2026-12-01")!, jan = CivilDate("2027-01-01")!
        XCTAssertFalse(book.roll(to: dec, startDay: 1), "the first period is only noted")
        book.apps["maps"]!.announced = 80
        XCTAssertTrue(book.roll(to: jan, startDay: 1))
        XCTAssertEqual(book["maps"].previous[wwanM].sentBytes, 10)
        XCTAssertTrue(book["maps"].current.isEmpty)
        XCTAssertEqual(book["maps"].sinceReset[wwanM].sentBytes, 10, "a period does not reset")
        XCTAssertEqual(book["maps"].announced, 0, "a new period announces again")
        // Two months unseen: the previous period had nothing counted.
        book.apps["maps"]!.current[wwanM] = UsageCounts(sentBytes: 5)
        XCTAssertTrue(book.roll(to: CivilDate("2027-03-01")!, startDay: 1))
        XCTAssertTrue(book["maps"].previous.isEmpty)
        book.apps["maps"]!.current[wwanM] = UsageCounts(sentBytes: 7)
        book.other.current[wifi] = UsageCounts(receivedBytes: 9)
        book.reset("maps", at: 1_800_000_000)
        XCTAssertTrue(book["maps"].current.isEmpty)
        XCTAssertTrue(book["maps"].sinceReset.isEmpty)
        XCTAssertEqual(book["maps"].resetAt, 1_800_000_000)
        XCTAssertEqual(book.other.current[wifi].receivedBytes, 9, "one app's reset leaves the others")
        book.reset(nil, at: 1_800_000_100)
        XCTAssertTrue(book.other.current.isEmpty)
        XCTAssertEqual(book.other.resetAt, 1_800_000_100)
        book.apps["gone"] = AppUsage()
        book.apps["gone"]!.previous[wifi] = UsageCounts(sentBytes: 1)
        book.drop(except: ["maps"])
        XCTAssertNil(book.apps["gone"], "an app no longer in the policy, with nothing this period")
    }

    func testTheFileReadsBackAsWritten() throws {
        var book = UsageBook()
        book.period = CivilDate("2026-12-01")
        book.absorb(UsageReading(instance: "7d0e:4096:12", counters: [
            UsageKey(.sent, wwanM, mark: 0x6E80_12AB): UsageCounter(bytes: 1_048_576, packets: 812),
            UsageKey(.received, wifi, mark: nil): UsageCounter(bytes: 1200, packets: 10),
        ]), owner: { _ in "maps" })
        book.apps["maps"]!.previous[wifi] = UsageCounts(sentBytes: 1, sentPackets: 2, receivedBytes: 3, receivedPackets: 4)
        book.apps["maps"]!.announced = 80
        book.reset("idle", at: 1_764_550_000)
        let text = book.encoded()
        XCTAssertEqual(text, """
            # netpermd's data usage, written by the daemon (docs/USAGE.md).
            version 1
            period 2026-12-01
            kernel 7d0e:4096:12
            counter sent wwan_metered 0x6e8012ab 1048576 812
            counter received wifi untracked 1200 10
            app idle reset 1764550000
            app maps announced 80
            app maps current wwan_metered 1048576 812 0 0
            app maps previous wifi 1 2 3 4
            app maps total wwan_metered 1048576 812 0 0
            other current wifi 0 0 1200 10
            other total wifi 0 0 1200 10

            """)
        XCTAssertEqual(try UsageBook.parse(text, path: "/var/lib/netpermd/usage"), book)
        XCTAssertEqual(try UsageBook.parse("", path: "u"), UsageBook())
        for (bad, line, message) in [("version 2\n", 1, "unknown version '2'"),
                                     ("version 1\nperiod 2026-13-01\n", 2, "expected period YYYY-MM-DD [provisional]"),
                                     ("version 1\nperiod 2026-12-01 maybe\n", 2, "expected period YYYY-MM-DD [provisional]"),
                                     ("app 9x current wifi 1 1 1 1\n", 1, "expected app NAME"),
                                     ("app maps current wlan 1 1 1 1\n", 1,
                                      "expected current CLASS SENT-BYTES SENT-PACKETS RECEIVED-BYTES RECEIVED-PACKETS"),
                                     ("counter sent wifi 12 1 1\n", 1, "bad mark '12'"),
                                     ("other current wifi 1 x 1 1\n", 1, "bad number 'x'"),
                                     ("frob\n", 1, "unknown line 'frob'")] {
            XCTAssertThrowsError(try UsageBook.parse(bad, path: "u"), bad) { e in
                XCTAssertEqual((e as? ConfigError)?.description, "u:\(line): \(message)", bad)
            }
        }
    }

    /// Issue 47: a user's own app (a desktop app's unit) is counted apart by its unit's cgroup, for the uid and app the
    /// unit was first read as, beside the tags' counts (which keep every byte: its uid's app, or other processes).
    /// A unit gone keeps its owner while its counter lasts; another table's cgroup ids (a reboot) are other units.
    func testUsersOwnAppsAreCountedApartByTheirUnits() throws {
        var book = UsageBook()
        let maps1000 = UserApp(uid: 1000, app: "org.gnome.Maps"), maps1001 = UserApp(uid: 1001, app: "org.gnome.Maps")
        var units: [UInt64: UserApp] = [51: maps1000, 52: maps1001]
        var r = UsageReading(instance: "b:1:7", counters: [
            UsageKey(.sent, wifi, mark: 0x6E80_0001): UsageCounter(bytes: 9000, packets: 9),
        ], unitCounters: [
            UnitUsageKey(.sent, wifi, cgroup: 51): UsageCounter(bytes: 3000, packets: 3),
            UnitUsageKey(.received, wifi, cgroup: 51): UsageCounter(bytes: 4000, packets: 4),
            UnitUsageKey(.sent, wifi, cgroup: 52): UsageCounter(bytes: 700, packets: 1),
            UnitUsageKey(.sent, wifi, cgroup: 99): UsageCounter(bytes: 5, packets: 1),
        ])
        XCTAssertEqual(book.absorb(r, owner: { $0 == 0x6E80_0001 ? "person" : nil }, unitOwner: { units[$0] }), ["person"])
        XCTAssertEqual(book["person"].current[wifi].sentBytes, 9000, "the tag's count is whole")
        XCTAssertEqual(book[maps1000].current[wifi], UsageCounts(sentBytes: 3000, sentPackets: 3, receivedBytes: 4000, receivedPackets: 4))
        XCTAssertEqual(book[maps1001].current[wifi].sentBytes, 700, "the same app of another uid is apart")
        XCTAssertEqual(Set(book.userApps.keys), [maps1000, maps1001], "an unknown cgroup is no one's")
        XCTAssertTrue(book.apps["org.gnome.Maps"] == nil && book.other.isEmpty, "nothing moves to an app's or other's count")
        // The unit went (its scope ended) and its last bytes are read: still its app's. Then a unit at the same
        // id would be asked about only when its counter is new.
        units = [:]
        r.unitCounters[UnitUsageKey(.sent, wifi, cgroup: 51)] = UsageCounter(bytes: 3500, packets: 4)
        book.absorb(r, owner: { _ in nil }, unitOwner: { units[$0] })
        XCTAssertEqual(book[maps1000].current[wifi].sentBytes, 3500)
        XCTAssertEqual(book[maps1000].sinceReset[wifi].sentBytes, 3500)
        // Another table: cgroup ids are another boot's, asked again.
        r.instance = "b:2:3"
        units = [51: UserApp(uid: 1002, app: "org.example.Other")]
        book.absorb(r, owner: { _ in nil }, unitOwner: { units[$0] })
        XCTAssertEqual(book[maps1000].current[wifi].sentBytes, 3500, "not the new boot's unit 51")
        XCTAssertEqual(book[UserApp(uid: 1002, app: "org.example.Other")].current[wifi].sentBytes, 3500)
        XCTAssertNil(book.unitOwners[52], "a unit asked of no one is forgotten")

        // Read back as written; periods, resets and drops as for the apps.
        let text = book.encoded()
        XCTAssertTrue(text.contains("unit sent wifi 51 1002 org.example.Other 3500 4\n"), text)
        XCTAssertTrue(text.contains("user 1000 org.gnome.Maps current wifi 3500 4 4000 4\n"), text)
        XCTAssertEqual(try UsageBook.parse(text, path: "u"), book)
        XCTAssertThrowsError(try UsageBook.parse("user x org.gnome.Maps current wifi 1 1 1 1\n", path: "u"))
        XCTAssertThrowsError(try UsageBook.parse("unit sent wifi 51 1000 9x 1 1\n", path: "u"))
        book.reset("org.gnome.Maps", at: 1_800_000_000)
        XCTAssertTrue(book[maps1000].current.isEmpty && book[maps1001].current.isEmpty, "every uid's part of the app")
        XCTAssertEqual(book[UserApp(uid: 1002, app: "org.example.Other")].current[wifi].sentBytes, 3500)
        book.period = CivilDate("2026-12-01")
        book.roll(to: CivilDate("2027-01-01")!, startDay: 1)
        XCTAssertEqual(book[UserApp(uid: 1002, app: "org.example.Other")].previous[wifi].sentBytes, 3500)
        book.drop(except: [])
        XCTAssertNotNil(book.userApps[UserApp(uid: 1002, app: "org.example.Other")], "its previous period is still shown")
    }
}
