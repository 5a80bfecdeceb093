// SPDX-License-Identifier: LGPL-2.1-or-later

/// What moved the apps' permissions since the engine last settled: nothing, the decisions of some apps, or anything
/// (the policy, the agents, a budget). Decisions name their apps, so that only those apps' verdicts are made again.
enum PermissionChange: Equatable, Sendable {
    case none
    case apps(Set<String>)
    case all

    var any: Bool {
        switch self {
        case .none: return false
        case .apps, .all: return true
        }
    }

    /// `moved` apps' decisions changed too.
    mutating func add(_ moved: Set<String>) {
        switch self {
        case .none: self = .apps(moved)
        case let .apps(apps): self = .apps(apps.union(moved))
        case .all: break
        }
    }
}
