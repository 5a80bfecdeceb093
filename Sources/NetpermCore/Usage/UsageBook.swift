// SPDX-License-Identifier: LGPL-2.1-or-later
/// One app's usage (or other processes'): this period's, the previous period's, and since its last reset.
public struct AppUsage: Equatable, Sendable {
    public var current = UsageTotals()
    public var previous = UsageTotals()
    public var sinceReset = UsageTotals()
    /// When it was last reset (`RESET-USAGE`), in seconds since the epoch; nil: never.
    public var resetAt: Int?
    /// The share of its budget (80 or 100) last announced in this period: each is told once.
    public var announced = 0

    public init() {}

    var isEmpty: Bool { current.isEmpty && previous.isEmpty && sinceReset.isEmpty && resetAt == nil && announced == 0 }
}

/// Every app's usage, kept from the kernel's counters by their growth since the last reading (nft cannot reset one
/// counter, and a counter survives the daemon: a restart, even a crash, goes on from the values the last process
/// saved). Pure: readings in, totals out (docs/USAGE.md).
public struct UsageBook: Equatable, Sendable {
    /// The first day of the current period; nil before the first reading.
    public var period: CivilDate?
    /// The period was taken from a clock no time service had synchronized: once one has, the totals are the
    /// period's the clock then says, whatever it is (PeriodMove).
    public var provisional = false
    public var apps: [String: AppUsage] = [:]
    /// Packets of no app of the policy: other processes, forwarded traffic, connections without a tag.
    public var other = AppUsage()
    /// The table the last reading came from, and its counters then.
    public var instance: String?
    public var baseline: [UsageKey: UsageCounter] = [:]

    public init() {}

    public subscript(app: String) -> AppUsage { apps[app] ?? AppUsage() }

    /// Adds what each counter grew by since the last reading of the same table (all of it, for a new table or a
    /// counter made again), to the app its tag names (`owner`) or to other processes. Returns the apps whose
    /// counts moved.
    @discardableResult
    public mutating func absorb(_ reading: UsageReading, owner: (UInt32) -> String?) -> Set<String> {
        let same = reading.instance == instance
        var moved: Set<String> = []
        for (key, now) in reading.counters {
            var delta = now
            if same, let was = baseline[key], now.bytes >= was.bytes, now.packets >= was.packets {
                delta = UsageCounter(bytes: now.bytes - was.bytes, packets: now.packets - was.packets)
            }
            guard delta.bytes != 0 || delta.packets != 0 else { continue }
            let app = key.mark.flatMap(owner)
            func add(_ u: inout AppUsage) {
                u.current.add(key.usageClass, key.direction, bytes: delta.bytes, packets: delta.packets)
                u.sinceReset.add(key.usageClass, key.direction, bytes: delta.bytes, packets: delta.packets)
            }
            if let app {
                add(&apps[app, default: AppUsage()])
                moved.insert(app)
            } else {
                add(&other)
            }
        }
        instance = reading.instance
        // A counter at zero is as good as none: its growth is its value either way.
        baseline = reading.counters.filter { $0.value.bytes != 0 || $0.value.packets != 0 }
        return moved
    }

    /// Moves to the period starting on `start`: the current totals become the previous period's (nothing, when a
    /// whole period or more passed unseen), and each budget's announcements start again. Returns whether it moved.
    @discardableResult
    public mutating func roll(to start: CivilDate, startDay: Int) -> Bool {
        guard let period else { self.period = start; return false }
        guard start != period else { return false }
        let adjacent = UsagePeriod.next(after: period, startDay: startDay) == start
        func roll(_ u: inout AppUsage) {
            u.previous = adjacent ? u.current : UsageTotals()
            u.current = UsageTotals()
            u.announced = 0
        }
        for id in apps.keys { roll(&apps[id]!) }
        roll(&other)
        apps = apps.filter { !$0.value.isEmpty }
        self.period = start
        return true
    }

    /// `RESET-USAGE`: an app's (or, with nil, everyone's) counts of this period and since the last reset start
    /// from nothing now; the previous period's stay.
    public mutating func reset(_ app: String?, at epoch: Int) {
        func reset(_ u: inout AppUsage) {
            u.current = UsageTotals()
            u.sinceReset = UsageTotals()
            u.resetAt = epoch
            u.announced = 0
        }
        if let app {
            reset(&apps[app, default: AppUsage()])
        } else {
            for id in apps.keys { reset(&apps[id]!) }
            reset(&other)
        }
    }

    /// Forgets apps no longer in the policy (`keep`), once their counts are of no period shown.
    public mutating func drop(except keep: Set<String>) {
        apps = apps.filter { keep.contains($0.key) || !$0.value.current.isEmpty }
    }
}
