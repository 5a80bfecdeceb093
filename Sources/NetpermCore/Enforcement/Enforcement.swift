// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// Whether an app's permissions are in force in the kernel, and if not, why not. Per app (the policy's
/// `[App]`), not per process: a process of the app that the kernel cannot tell apart escapes (docs/ENFORCEMENT.md).
public enum Enforcement: Equatable, Sendable {
    case enforced
    case notEnforced(Why)

    public enum Why: String, Sendable {
        /// `Mode=off`.
        case modeOff = "mode-off"
        /// Mode=block, but the rules are not loaded yet.
        case starting
        /// The last attempt to load the rules failed (STATUS says why).
        case rulesFailed = "rules-failed"
        /// No `[App]` covers it: processes only `[Defaults]` covers are never matched in the kernel.
        case notInPolicy = "not-in-policy"
        /// Only `Executable=`: the kernel has no match for an executable.
        case executableOnly = "executable-only"
        /// `Unit=` or `UserUnit=` (and no `User=`), but no cgroup of a matching unit (nor a `netpermctl run` scope
        /// of the app) exists now.
        case cgroupAbsent = "cgroup-absent"
        /// Its uids and unit cgroups all belong to apps defined before it (the first matching `[App]` wins).
        case shadowed
        /// Said only to a process asking about its own app from a unit's cgroup (QUERY): that cgroup is not in the
        /// rules in force, though the app may be through others. Just made (a `netpermctl run` scope: the rules
        /// follow within milliseconds, and `run` waits for them).
        case cgroupPending = "cgroup-pending"
        /// Said only to a process asking about its own app from a unit's cgroup that the rules do not follow: deeper
        /// than the levels they look up, or inside another unit's cgroup (`UnitCgroups.isFollowed`). It never will
        /// be in them, so it is not pending.
        case cgroupUnfollowed = "cgroup-unfollowed"
    }

    public var isEnforced: Bool { self == .enforced }

    public func write(to s: inout JSONWriter) {
        switch self {
        case .enforced:
            s.field("enforced", true)
        case let .notEnforced(why):
            s.field("enforced", false)
            s.field("enforced_why", why.rawValue)
        }
    }
}

/// Where the last ruleset stands in the kernel, for STATUS.
public enum EnforcementState: Equatable, Sendable {
    case off
    /// Rules built and handed to the kernel; no answer yet.
    case applying
    case enforcing
    /// The kernel refused the rules (or libnftables failed): why, and how many attempts were made.
    case failed(EdgeError, attempts: Int)

    /// Every state's name, for a gauge per state.
    public static let names = [EnforcementState.off, .applying, .enforcing, .failed(EdgeError(.loadRules, ""), attempts: 0)].map(\.name)

    public var name: String {
        switch self {
        case .off: return "off"
        case .applying: return "applying"
        case .enforcing: return "enforcing"
        case .failed: return "failed"
        }
    }
}
