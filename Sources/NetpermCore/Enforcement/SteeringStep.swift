// SPDX-License-Identifier: LGPL-2.1-or-later
/// One `Effect.steer`: exactly what the Steerer writes to the kernel and which routing tables it reads, decided by
/// the engine's steering machine (`SteeringUpkeep`). The Steerer answers with `Input.steered(id:_:)`.
public struct SteeringStep: Equatable, Sendable {
    /// What the answer names, so the engine matches it to this step.
    public var id: UInt64
    public var action: Action
    /// The step follows a change of the kernel's picture (not a new plan): the engine hears only a changed outcome.
    public var follows: Bool

    public enum Action: Equatable, Sendable {
        /// Tables and rules (additions only), then the maps, the program if not attached, then the tables again
        /// (leftovers deleted too).
        case install(SteeringInstall)
        /// Only the tables synced with the main table (the plan is installed).
        case sync(SteeringPlan, read: Set<UInt32>?)
        /// Everything of steering's removed: program first (no new socket is marked), then rules, then tables
        /// (every table read, to find what an earlier run left).
        case remove
    }

    /// The plan the step puts in the kernel (nil: removal).
    public var plan: SteeringPlan? {
        switch action {
        case let .install(i): return i.plan
        case let .sync(plan, _): return plan
        case .remove: return nil
        }
    }
}

/// What installing a plan writes: the routing tables its syncs read (nil: every one), whether the maps are made
/// anew (then they hold nothing, and the changes are all of the plan's marks), what each map is told, in key order,
/// and whether the program is attached.
public struct SteeringInstall: Equatable, Sendable {
    public var plan: SteeringPlan
    public var read: Set<UInt32>?
    public var makeMaps: Bool
    public var cgroups: SteeringUpkeep.MapChanges<UInt64>
    public var uids: SteeringUpkeep.MapChanges<UInt32>
    public var attach: Bool
}

/// What came of a `SteeringStep`, as far as it went: what the kernel now holds, and the error that stopped it.
public struct SteeringOutcome: Equatable, Sendable {
    public var error: EdgeError?
    /// Both maps were made anew (install).
    public var mapsMade = false
    /// The cgroups' map holds the plan's marks (install).
    public var cgroupsWritten = false
    /// The uids' map holds the plan's marks (install).
    public var uidsWritten = false
    /// The program was attached (install).
    public var attached = false
    /// The tables were synced with leftovers deleted (every action's last part).
    public var synced = false

    public init(error: EdgeError? = nil, mapsMade: Bool = false, cgroupsWritten: Bool = false, uidsWritten: Bool = false,
                attached: Bool = false, synced: Bool = false) {
        self.error = error; self.mapsMade = mapsMade; self.cgroupsWritten = cgroupsWritten
        self.uidsWritten = uidsWritten; self.attached = attached; self.synced = synced
    }

    /// Everything `action` asked for went through (what a fake kernel answers).
    public static func done(_ action: SteeringStep.Action) -> SteeringOutcome {
        switch action {
        case let .install(i):
            return SteeringOutcome(mapsMade: i.makeMaps, cgroupsWritten: true, uidsWritten: true, attached: i.attach,
                                   synced: true)
        case .sync, .remove:
            return SteeringOutcome(synced: true)
        }
    }
}
