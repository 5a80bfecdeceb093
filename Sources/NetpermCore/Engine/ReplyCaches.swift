// SPDX-License-Identifier: LGPL-2.1-or-later
/// What the engine keeps to avoid making an answer again, and the version it is good for.
struct ReplyCaches {
    /// Bumped by every change of what replies say (`invalidate`): a cached reply is good while it has not moved.
    private(set) var version = 0
    /// Steered verdicts by what they depend on, for one version (Engine+Steering.swift).
    private var steered: (version: Int, verdicts: [Verdict.SteeringKey: Verdict]) = (-1, [:])
    /// What STATUS= last said, compared as facts before it is formatted, and the `version` it was made at: the
    /// summary depends only on what moves `version`, so an input that moved nothing (a QUERY) does not make it
    /// again (it cost an uncached QUERY ~3,000 instructions).
    var status: (summary: Engine.StatusSummary, version: Int)?

    mutating func invalidate() { version &+= 1 }

    /// The steered verdict made for `key` at this version, if any (those of an older version are dropped).
    mutating func steeredVerdict(_ key: Verdict.SteeringKey) -> Verdict? {
        if steered.version != version { steered = (version, [:]) }
        return steered.verdicts[key]
    }

    mutating func keepSteered(_ v: Verdict, for key: Verdict.SteeringKey) { steered.verdicts[key] = v }

    /// Steering's plan changed or went, without a new version: no steered verdict holds.
    mutating func forgetSteered() { steered.verdicts = [:] }
}
