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

/// What steering keeps in the kernel, and what the Steerer does next, with no I/O (SteeringUpkeepTests): held by
/// the engine's steering machine (`SteeringMachine.kernel`). The plan in force, whether the last install went
/// through (until it does, every kernel change installs it again, and a later table sync that succeeds does not
/// hide the failure), which outcomes the engine hears of, what the maps hold, whether they and the program exist,
/// and which routing tables a sync reads. One step at a time: a plan or a kernel change that comes while a step is
/// out waits for its answer (the latest plan, then the sync), so each step is decided from what the kernel holds.
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
    /// Both maps exist (made by an install, not removed since).
    public private(set) var mapsMade = false
    /// The program is attached (by an install, not removed since).
    public private(set) var attached = false
    /// The step handed out and not yet answered.
    public private(set) var inFlight: SteeringStep?
    /// A plan handed over while a step was out (`.some(nil)`: removal): carried out when it is answered.
    private var waitingPlan: SteeringPlan??
    /// A kernel change came while a step was out: followed when it (and a waiting plan) is answered.
    private var followWaiting = false
    private var lastID: UInt64 = 0

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

    /// What the engine hears of an answered step.
    public enum Heard: Equatable, Sendable {
        /// The answer to its plan, always.
        case answer(EdgeError?)
        /// A kernel change was followed: only a changed outcome.
        case change(SteeringChange)
    }

    /// The engine hands over `plan` (nil: remove everything): the step that carries it out, or nil while one is out.
    public mutating func apply(_ plan: SteeringPlan?) -> SteeringStep? {
        guard inFlight == nil else {
            waitingPlan = .some(plan)
            return nil
        }
        self.plan = plan
        guard let plan else {
            installed = false
            written = Marks()
            // The edge drops the program and the maps whatever the removal's outcome.
            mapsMade = false
            attached = false
            return handOut(.remove, follows: false)
        }
        return handOut(.install(install(plan)), follows: false)
    }

    /// The kernel's picture changed: the tables follow the main table, or a plan that did not go in is installed
    /// again; nil with no plan, or while a step is out (then after its answer).
    public mutating func follow() -> SteeringStep? {
        guard inFlight == nil else {
            followWaiting = true
            return nil
        }
        guard let plan else { return nil }
        return handOut(installed ? .sync(plan, read: tablesToRead(plan)) : .install(install(plan)), follows: true)
    }

    /// The step `id` ended with `outcome`: what the engine hears (nil: not the step out) and the next step, if
    /// something waited.
    public mutating func answered(_ id: UInt64, _ outcome: SteeringOutcome) -> (heard: Heard?, next: SteeringStep?) {
        guard let step = inFlight, step.id == id else { return (nil, nil) }
        inFlight = nil
        record(step.action, outcome)
        let heard: Heard
        if step.follows {
            heard = .change(followed(outcome.error))
        } else {
            installed = plan != nil && outcome.error == nil
            lastError = outcome.error
            heard = .answer(outcome.error)
        }
        if let waiting = waitingPlan {
            waitingPlan = nil
            return (heard, apply(waiting))
        }
        guard followWaiting else { return (heard, nil) }
        followWaiting = false
        return (heard, follow())
    }

    private mutating func followed(_ error: EdgeError?) -> SteeringChange {
        installed = error == nil
        guard error != lastError else { return .unchanged }
        lastError = error
        return error.map(SteeringChange.failed) ?? .recovered
    }

    /// What the kernel holds after `action` went as far as `outcome` says.
    private mutating func record(_ action: SteeringStep.Action, _ outcome: SteeringOutcome) {
        switch action {
        case let .install(i):
            if outcome.mapsMade {
                mapsMade = true
                written = Marks()
            }
            if outcome.cgroupsWritten { written.cgroups = i.plan.cgroupMarks }
            if outcome.uidsWritten { written.uids = i.plan.uidMarks }
            if outcome.attached { attached = true }
            if outcome.synced { ownTables = (ownTables ?? []).union(i.plan.allowances.map(\.table)) }
        case let .sync(plan, _):
            if outcome.synced { ownTables = (ownTables ?? []).union(plan.allowances.map(\.table)) }
        case .remove:
            // What the read found is dealt with: later reads look at every table until a plan's sync went through.
            if outcome.synced { ownTables = nil }
        }
    }

    private mutating func handOut(_ action: SteeringStep.Action, follows: Bool) -> SteeringStep {
        lastID += 1
        let step = SteeringStep(id: lastID, action: action, follows: follows)
        inFlight = step
        return step
    }

    /// What installing `plan` writes: maps made anew hold nothing, so they are told every mark.
    private func install(_ plan: SteeringPlan) -> SteeringInstall {
        let held = mapsMade ? written : Marks()
        return SteeringInstall(plan: plan, read: tablesToRead(plan), makeMaps: !mapsMade,
                               cgroups: MapChanges(from: held.cgroups, to: plan.cgroupMarks),
                               uids: MapChanges(from: held.uids, to: plan.uidMarks), attach: !attached)
    }

    /// The routing tables a sync for `plan` reads (nil: every table): every one the first time and for a removal (to
    /// find what an earlier run left); after that only steering's own (those its plans used, and those its rules
    /// name), so that a kernel change costs the same whatever other tables hold.
    func tablesToRead(_ plan: SteeringPlan) -> Set<UInt32>? {
        ownTables.map { $0.union(plan.allowances.map(\.table)) }
    }
}
