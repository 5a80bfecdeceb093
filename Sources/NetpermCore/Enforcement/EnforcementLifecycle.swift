// SPDX-License-Identifier: LGPL-2.1-or-later
/// Where the daemon's rules stand in the kernel, as one value: what was handed over, whether the kernel took it,
/// and what comes next after a refusal. It changes only through `EnforcementLifecycle.set`, which logs old -> new
/// (as networkd's `link_set_state`); everything else reads it.
enum EnforcementPhase: Equatable, Sendable {
    /// Nothing of this run's is in the kernel: before the first build, or Mode=off once the table is removed (or
    /// its removal at start-up was handed over quietly: that one reports nothing back).
    case off
    /// Mode=off: the table's removal handed over, its answer awaited. `failures`: refused attempts before this one.
    case removing(failures: Int)
    /// Rules handed over while none of this run's are in force (the first load, a retry after a refusal): the
    /// answer awaited. `failures`: refused attempts before this one.
    case loading(failures: Int)
    /// The last rules handed over are in force.
    case enforcing
    /// The rules in force are being changed; they stay in force until the answer. `partial`: only what differs was
    /// handed over (`Ruleset.update(from:)`), so a refusal loads the whole table at once instead of failing.
    case changing(partial: Bool)
    /// A change of only what differs was refused (the kernel's table was not what it was made against): the whole
    /// table handed over at once. The transactions that went through reject what both sides reject.
    case repairing
    /// The kernel refused `failures` times in a row (a removal's, when `EnforcementBook.loaded` is the removal);
    /// `retry`: the timer of the next attempt, nil once given up until the next change.
    case failed(EdgeError, failures: Int, retry: TimerID?)

    /// What STATUS, METRICS and the verdicts say (docs/PROTOCOL.md): the rules in force are `enforcing` while they are
    /// being changed or repaired, a removal is `off`.
    var shown: EnforcementState {
        switch self {
        case .off, .removing: return .off
        case .loading: return .applying
        case .enforcing, .changing, .repairing: return .enforcing
        case let .failed(error, failures, _): return .failed(error, attempts: failures)
        }
    }

    /// Whether an answer of the kernel is awaited.
    var awaitsAnswer: Bool {
        switch self {
        case .removing, .loading, .changing, .repairing: return true
        case .off, .enforcing, .failed: return false
        }
    }

    var name: String {
        switch self {
        case .off: return "off"
        case let .removing(n): return "removing" + (n > 0 ? " (attempt \(n + 1))" : "")
        case let .loading(n): return "loading" + (n > 0 ? " (attempt \(n + 1))" : "")
        case .enforcing: return "enforcing"
        case let .changing(partial): return partial ? "changing (only what differs)" : "changing (the whole table)"
        case .repairing: return "repairing (the whole table)"
        case let .failed(_, n, retry): return "failed (\(n) attempt\(n == 1 ? "" : "s")" + (retry == nil ? ", given up)" : ")")
        }
    }
}

/// The lifecycle's one value and its one setter.
struct EnforcementLifecycle {
    private(set) var phase = EnforcementPhase.off

    /// Moves to `new`, logging old -> new through `log` (nothing when it does not change). The retry timer of a
    /// `failed` phase left for another is handed back to be cancelled, so no retry outlives its phase.
    mutating func set(_ new: EnforcementPhase, log: (String) -> Void) -> TimerID? {
        let old = phase
        guard old != new else { return nil }
        phase = new
        log("enforcement: \(old.name) -> \(new.name)")
        if case let .failed(_, _, retry?) = old { return retry }
        return nil
    }
}
