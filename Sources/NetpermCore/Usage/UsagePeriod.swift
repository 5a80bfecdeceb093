// SPDX-License-Identifier: LGPL-2.1-or-later
/// A day of the calendar, in the machine's local time (the edge converts; the core only counts days).
public struct CivilDate: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var year: Int, month: Int, day: Int

    public init(year: Int, month: Int, day: Int) { self.year = year; self.month = month; self.day = day }

    public static func < (a: CivilDate, b: CivilDate) -> Bool {
        (a.year, a.month, a.day) < (b.year, b.month, b.day)
    }

    public static func daysIn(year: Int, month: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// `2026-12-01`
    public var description: String {
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(year)-\(two(month))-\(two(day))"
    }

    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].utf8.count == 4, parts[1].utf8.count == 2, parts[2].utf8.count == 2,
              let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]), (1...12).contains(m),
              d >= 1, d <= CivilDate.daysIn(year: y, month: m) else { return nil }
        self.init(year: y, month: m, day: d)
    }

    /// The same day of the month `by` months later (or earlier), at most that month's last day.
    func months(_ by: Int, day wanted: Int) -> CivilDate {
        let index = year * 12 + (month - 1) + by
        let (y, m) = (index / 12, index % 12 + 1)
        return CivilDate(year: y, month: m, day: min(wanted, CivilDate.daysIn(year: y, month: m)))
    }
}

/// The time as the edge reads it: seconds since the epoch, and the local calendar day then.
public struct WallTime: Equatable, Sendable {
    public var epoch: Int
    public var date: CivilDate
    public init(epoch: Int, date: CivilDate) { self.epoch = epoch; self.date = date }
}

/// Usage periods, as a phone plan's: each starts at midnight of `[Usage] PeriodStart=` (a day of the month; in a
/// shorter month, its last day) and lasts until the next one.
public enum UsagePeriod {
    /// The first day of the period `date` falls in.
    public static func start(containing date: CivilDate, startDay: Int) -> CivilDate {
        let here = date.months(0, day: startDay)
        return date >= here ? here : date.months(-1, day: startDay)
    }

    /// The first day of the period after the one starting on `start`.
    public static func next(after start: CivilDate, startDay: Int) -> CivilDate {
        start.months(1, day: startDay)
    }
}
