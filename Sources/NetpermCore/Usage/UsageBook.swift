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

    mutating func add(_ delta: UsageCounter, _ c: UsageClass, _ direction: UsageDirection) {
        current.add(c, direction, bytes: delta.bytes, packets: delta.packets)
        sinceReset.add(c, direction, bytes: delta.bytes, packets: delta.packets)
    }
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
    /// Users' own apps' usage (UserApp), apart from `apps`: the same bytes are their uid's app's (or other
    /// processes') there too.
    public var userApps: [UserApp: AppUsage] = [:]
    /// The users' units' counters at the last reading, and whose each unit's cgroup was when first read: a unit gone
    /// since is still known by its counter, whose growth until it went is its app's.
    public var unitBaseline: [UnitUsageKey: UsageCounter] = [:]
    public var unitOwners: [UInt64: UserApp] = [:]

    public init() {}

    public subscript(app: String) -> AppUsage { apps[app] ?? AppUsage() }
    public subscript(user: UserApp) -> AppUsage { userApps[user] ?? AppUsage() }

    /// Adds what each counter grew by since the last reading of the same table (all of it, for a new table or a
    /// counter made again), to the app its tag names (`owner`) or to other processes. Returns the apps whose
    /// counts moved.
    /// Users' units' counters go to the user's own app their cgroup was first read as (`unitOwners`, else
    /// `unitOwner`: the unit's app now), or nowhere when not known (their bytes are in their tag's count all the same).
    @discardableResult
    public mutating func absorb(_ reading: UsageReading, owner: (UInt32) -> String?,
                                unitOwner: (UInt64) -> UserApp? = { _ in nil }) -> Set<String> {
        let same = reading.instance == instance
        var moved: Set<String> = []
        for (key, now) in reading.counters {
            let delta = Self.growth(now, since: same ? baseline[key] : nil)
            guard delta.bytes != 0 || delta.packets != 0 else { continue }
            if let app = key.mark.flatMap(owner) {
                apps[app, default: AppUsage()].add(delta, key.usageClass, key.direction)
                moved.insert(app)
            } else {
                other.add(delta, key.usageClass, key.direction)
            }
        }
        // Cgroup ids are a boot's own: another table's (after a reboot) are other units.
        let known = same ? unitOwners : [:]
        var owners: [UInt64: UserApp] = [:]
        for (key, now) in reading.unitCounters {
            guard let user = owners[key.cgroup] ?? known[key.cgroup] ?? unitOwner(key.cgroup) else { continue }
            owners[key.cgroup] = user
            let delta = Self.growth(now, since: same ? unitBaseline[key] : nil)
            guard delta.bytes != 0 || delta.packets != 0 else { continue }
            userApps[user, default: AppUsage()].add(delta, key.usageClass, key.direction)
        }
        instance = reading.instance
        // A counter at zero is as good as none: its growth is its value either way.
        baseline = reading.counters.filter { $0.value.bytes != 0 || $0.value.packets != 0 }
        unitBaseline = reading.unitCounters.filter { ($0.value.bytes != 0 || $0.value.packets != 0) && owners[$0.key.cgroup] != nil }
        // A unit no counter names any more (its element expired, long after its last packet) is forgotten.
        let counted = Set(unitBaseline.keys.lazy.map(\.cgroup))
        unitOwners = owners.filter { counted.contains($0.key) }
        return moved
    }

    /// What a counter grew by since `was` (all of it, for a counter new or made again).
    static func growth(_ now: UsageCounter, since was: UsageCounter?) -> UsageCounter {
        guard let was, now.bytes >= was.bytes, now.packets >= was.packets else { return now }
        return UsageCounter(bytes: now.bytes - was.bytes, packets: now.packets - was.packets)
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
        for u in userApps.keys { roll(&userApps[u]!) }
        roll(&other)
        apps = apps.filter { !$0.value.isEmpty }
        userApps = userApps.filter { !$0.value.isEmpty }
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
        // The app's users' own counts are parts of what was reset.
        for u in userApps.keys where app == nil || u.app == app { reset(&userApps[u]!) }
    }

    /// Forgets apps no longer in the policy (`keep`), once their counts are of no period shown.
    public mutating func drop(except keep: Set<String>) {
        apps = apps.filter { keep.contains($0.key) || !$0.value.current.isEmpty }
        // Users' own apps are listed from here, whether or not they run: kept while a period shown has counts.
        userApps = userApps.filter { keep.contains($0.key.app) || !$0.value.current.isEmpty || !$0.value.previous.isEmpty }
    }
}
