// SPDX-License-Identifier: LGPL-2.1-or-later
/// What following the main table has for the engine: only a change of outcome is reported.
public enum SteeringChange: Equatable, Sendable {
    /// Nothing new: no plan, or the same outcome as last reported.
    case unchanged
    /// Steering is in force again after a failure.
    case recovered
    /// Steering failed, or failed otherwise than last reported.
    case failed(EdgeError)
}

/// What the Steerer decides about the plan it keeps in the kernel, with no I/O (SteeringUpkeepTests): the plan in
/// force, whether the last install went through (until it does, every kernel change installs it again, and a later
/// table sync that succeeds does not hide the failure), which outcomes the engine hears of, what the two maps must
/// be told to hold what the plan marks, and which routing tables a sync reads. The Steerer writes the maps and
/// tables and hands back what came of it.
public struct SteeringUpkeep: Sendable {
    /// The plan in force (nil: none, or removed).
    public private(set) var plan: SteeringPlan?
    /// The last install of the plan went through (program, maps, tables).
    public private(set) var installed = false
    /// The last error reported, so that following the main table reports only changes.
    public private(set) var lastError: EdgeError?
    /// What the maps hold, as written (empty: maps just made, or none).
    public private(set) var written = Marks()
    /// Steering's tables this process's plans used since it last read every table (nil: it has not yet, or a
    /// removal since): what a later read must look at besides those the rules name, to find routes left behind.
    public private(set) var ownTables: Set<UInt32>?

    public init() {}

    /// The marks of unit cgroups (by id) and of uids.
    public struct Marks: Equatable, Sendable {
        public var cgroups: [UInt64: UInt32] = [:]
        public var uids: [UInt32: UInt32] = [:]
    }

    /// What a map must be told: the keys to write (with their marks) and those to delete, in key order.
    public struct MapChanges<Key: Hashable & Comparable & Sendable>: Equatable, Sendable {
        public var update: [(key: Key, mark: UInt32)]
        public var delete: [Key]

        public static func == (a: Self, b: Self) -> Bool {
            a.delete == b.delete && a.update.map(\.key) == b.update.map(\.key) && a.update.map(\.mark) == b.update.map(\.mark)
        }

        init(from old: [Key: UInt32], to new: [Key: UInt32]) {
            update = new.filter { old[$0.key] != $0.value }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            delete = old.keys.filter { new[$0] == nil }.sorted()
        }
    }

    /// What carrying out a plan (or following the main table) takes.
    public enum Step: Equatable, Sendable {
        /// The program, maps and tables made to hold the plan.
        case install(SteeringPlan)
        /// Only the tables synced with the main table (the plan is installed).
        case sync(SteeringPlan)
        /// Everything of steering's removed: program first (no new socket is marked), then rules, then tables.
        case remove
    }

    /// The engine hands over `plan` (nil: remove everything): the step that carries it out.
    public mutating func apply(_ plan: SteeringPlan?) -> Step {
        self.plan = plan
        guard let plan else {
            installed = false
            written = Marks()
            return .remove
        }
        return .install(plan)
    }

    /// The step `apply` asked for ended with `error`: what the engine hears (always, as the answer to its plan).
    public mutating func applied(_ error: EdgeError?) -> EdgeError? {
        installed = plan != nil && error == nil
        lastError = error
        return error
    }

    /// The kernel's picture changed: the tables follow the main table, or a plan that did not go in is installed
    /// again; nil with no plan.
    public func follow() -> Step? {
        guard let plan else { return nil }
        return installed ? .sync(plan) : .install(plan)
    }

    /// The step `follow` asked for ended with `error`: the engine hears of it only when it differs from the last
    /// one reported.
    public mutating func followed(_ error: EdgeError?) -> SteeringChange {
        installed = error == nil
        guard error != lastError else { return .unchanged }
        lastError = error
        return error.map(SteeringChange.failed) ?? .recovered
    }

    /// The maps were made anew: they hold nothing.
    public mutating func mapsMade() {
        written = Marks()
    }

    /// What each map must be told to hold `plan`'s marks.
    public func mapChanges(_ plan: SteeringPlan) -> (cgroups: MapChanges<UInt64>, uids: MapChanges<UInt32>) {
        (MapChanges(from: written.cgroups, to: plan.cgroupMarks), MapChanges(from: written.uids, to: plan.uidMarks))
    }

    /// The cgroups' map holds `plan`'s marks.
    public mutating func wroteCgroups(_ plan: SteeringPlan) { written.cgroups = plan.cgroupMarks }
    /// The uids' map holds `plan`'s marks.
    public mutating func wroteUIDs(_ plan: SteeringPlan) { written.uids = plan.uidMarks }

    /// The routing tables a sync for `plan` reads (nil: every table): every one the first time and for a removal (to
    /// find what an earlier run left); after that only steering's own (those its plans used, and those its rules
    /// name), so that a kernel change costs the same whatever other tables hold.
    public func tablesToRead(_ plan: SteeringPlan?) -> Set<UInt32>? {
        guard let plan else { return nil }
        return ownTables.map { $0.union(plan.allowances.map(\.table)) }
    }

    /// A sync for `plan` went through: with `addsOnly` false, what the read found is dealt with (leftovers deleted
    /// too), so later reads look at steering's own tables only. A failure, or additions alone, read every table
    /// again next time.
    public mutating func synced(_ plan: SteeringPlan?, addsOnly: Bool) {
        guard !addsOnly else { return }
        ownTables = plan.map { (ownTables ?? []).union($0.allowances.map(\.table)) }
    }
}
