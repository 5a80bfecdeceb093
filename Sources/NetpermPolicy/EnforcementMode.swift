// SPDX-License-Identifier: LGPL-2.1-or-later
/// `[Enforcement] Mode=`: whether the kernel is made to follow the verdicts (docs/ENFORCEMENT.md).
public enum EnforcementMode: String, Sendable, CaseIterable {
    /// Advice only: nothing is loaded into the kernel (and a table left by an earlier run is removed).
    case off
    /// Traffic of an app out of a link of a kind it may not use (or not yet: `ask`) is rejected in the kernel.
    case block
    /// As block, and an app kept off some links has its sockets routed out of the links it may use, with their
    /// source addresses, or fail at once when none is left (SteeringPlan).
    case steer
}
