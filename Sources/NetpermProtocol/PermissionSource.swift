// SPDX-License-Identifier: LGPL-2.1-or-later
/// Where an app's permission for one kind comes from.
public enum PermissionSource: String, Sendable {
    /// The policy file ([App] or [Defaults]).
    case policy
    /// A decision stored on disk (`DECIDE`).
    case decision
    /// A decision that holds until the daemon restarts or the policy changes (`DECIDE ... --once`).
    case once
    /// A decision this uid made for its own processes (`[Defaults] UserDecisions=yes`), stored on disk.
    case userDecision = "user-decision"
    /// The same, until the daemon restarts or the policy changes.
    case userOnce = "user-once"
    /// The policy says `ask`, nothing was decided, and no agent is listening to ask the user: a deny, as
    /// polkit denies when no authentication agent is registered.
    case noAgent = "no-agent"
    /// `MeteredBudget=` is used up for this period: metered links are denied until the next period or a reset
    /// (`metered` only; docs/USAGE.md).
    case budget

    /// `rawValue` as a literal, written without escaping (every reply has five).
    public var literal: StaticString {
        switch self {
        case .policy: "policy"
        case .decision: "decision"
        case .once: "once"
        case .userDecision: "user-decision"
        case .userOnce: "user-once"
        case .noAgent: "no-agent"
        case .budget: "budget"
        }
    }
}
