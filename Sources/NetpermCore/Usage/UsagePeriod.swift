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

/// What the machine says of its wall clock: whether a period may start by it.
public enum ClockTrust: String, Equatable, Sendable {
    /// A time service synchronized it (systemd-timesyncd's `/run/systemd/timesync/synchronized`, or the kernel's NTP
    /// status, which chrony and ntpd keep).
    case synchronized
    /// A time service runs (systemd-timesyncd) and has not synchronized it yet: the clock may be a dead RTC's.
    case waiting
    /// Nothing says: the clock is believed while it advances as the boot clock does.
    case free
}

/// The time as the edge reads it: seconds since the epoch, the local calendar day then, what the machine says of
/// the clock, and the boot clock (CLOCK_BOOTTIME: seconds that pass whatever the wall clock does, suspend included).
public struct WallTime: Equatable, Sendable {
    public var epoch: Int
    public var date: CivilDate
    public var trust: ClockTrust
    public var boot: Double
    public init(epoch: Int, date: CivilDate, trust: ClockTrust = .synchronized, boot: Double = 0) {
        self.epoch = epoch; self.date = date; self.trust = trust; self.boot = boot
    }
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

/// How the current period follows the clock (docs/USAGE.md, "Periods and clocks"): it moves only forward, only by a
/// clock worth believing, and never drops what was counted.
public enum PeriodMove: Equatable, Sendable {
    case stay
    /// The first period: `provisional` when the clock was not synchronized (a dead RTC's 1970).
    case first(CivilDate, provisional: Bool)
    /// A new period began: the current totals become the previous period's.
    case roll(CivilDate)
    /// The same totals, under another start: `PeriodStart=` changed, or a period taken from a clock not synchronized
    /// turned out wrong once it was.
    case relabel(CivilDate, Relabel)
    /// The clock is behind the current period's start (stepped back, or a dead RTC): counted in the current period.
    case behind(CivilDate)
    /// The clock says a new period, but it is not to be believed yet (a time service waits to synchronize it, or it
    /// jumped ahead of the boot clock).
    case untrusted(CivilDate)

    public enum Relabel: String, Equatable, Sendable {
        case startDay = "PeriodStart= changed"
        case synchronized = "the clock was synchronized"
    }

    /// `steady`: the wall clock has advanced as the boot clock did for a while (Engine.steadyClockSeconds) of this
    /// process's looks at it.
    public static func decide(period: CivilDate?, provisional: Bool, now: WallTime, startDay: Int, steady: Bool) -> PeriodMove {
        let start = UsagePeriod.start(containing: now.date, startDay: startDay)
        guard let period else { return .first(start, provisional: now.trust != .synchronized) }
        if period != period.months(0, day: startDay) {
            // Not a start of this PeriodStart=: the day changed. The totals stay current, under the period holding now
            // (or the old start, when the clock is behind it).
            return .relabel(UsagePeriod.start(containing: max(now.date, period), startDay: startDay), .startDay)
        }
        if provisional, now.trust == .synchronized {
            return .relabel(start, .synchronized)
        }
        if start == period { return .stay }
        if start < period { return .behind(start) }
        switch now.trust {
        case .synchronized: return .roll(start)
        case .waiting: return .untrusted(start)
        case .free: return steady ? .roll(start) : .untrusted(start)
        }
    }
}
