// SPDX-License-Identifier: LGPL-2.1-or-later
/// What the engine keeps to avoid making an answer again, and the version it is good for.
struct ReplyCaches {
    /// Bumped by every change of what replies say (`invalidate`): a cached reply is good while it has not moved.
    private(set) var version = 0
    /// Steered verdicts by what they depend on, for one version (Engine+Steering.swift).
    var steered: (version: Int, verdicts: [Verdict.SteeringKey: Verdict]) = (-1, [:])
    /// What STATUS= last said, compared as facts before it is formatted.
    var status: Engine.StatusSummary?

    mutating func invalidate() { version &+= 1 }
}
