// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// What the rules hold each app to: the policy, the decisions, the budgets used up.
struct EnforcedPermissions: Equatable, Sendable {
    var config: Config
    var decisions: Decisions
    var exhausted: Set<String>

    /// What the rules (and steering) hold an app to: the policy with decisions (an undecided `ask` stays `ask`,
    /// whether or not an agent listens). In Mode=steer, metered links are denied too while the app's budget is used
    /// up, so that its sockets are routed off them. In Mode=block the usage table's quotas alone refuse it there:
    /// the rules' denial would also drop the reset the kernel sends a peer whose connection the budget ended
    /// (docs/USAGE.md).
    func permissions(_ app: AppPolicy) -> PermissionSet {
        budgetDenied(decisions.apply(to: config.permissions(for: app), app: app.id).permissions, app)
    }

    /// A uid's own decisions for an app, for its sockets in the rules (nil: it has none, or users do not decide).
    func ownPermissions(_ app: AppPolicy, _ uid: UInt32) -> PermissionSet? {
        guard config.userDecisions, decisions.hasOwn(app.id, uid: uid) else { return nil }
        return budgetDenied(decisions.apply(to: config.permissions(for: app), app: app.id, uid: uid).permissions, app)
    }

    /// `p` with metered links denied in Mode=steer while the app's budget is used up.
    private func budgetDenied(_ p: PermissionSet, _ app: AppPolicy) -> PermissionSet {
        var p = p
        if config.enforcement == .steer, exhausted.contains(app.id), p.metered != .deny { p.metered = .deny }
        return p
    }

}

/// Everything the rules are made from: the permissions, the links, the units' cgroups, the apps' tags and the
/// units' maps looked up. `build` is a pure function of these values, so equal inputs make equal rules: what lets
/// a reload make them away from the loop (ReloadPreparation.swift).
struct RulesetInputs: Equatable, Sendable {
    var permissions: EnforcedPermissions
    var links: [Link]
    var cgroups: UnitCgroups
    var tags: TagTable
    var lookedUp: Set<String>

    func build() -> Ruleset {
        let apps = permissions.config.apps
        return Ruleset.build(apps: apps, permissions: permissions.permissions, ownPermissions: permissions.ownPermissions,
                             links: links, cgroups: cgroups, tags: tags.tags(of: apps.map(\.id)), lookedUp: lookedUp,
                             installed: permissions.config.installedDesktopApps)
    }
}

/// What the naming of units just made is made from (`naming`, as pure as `RulesetInputs.build`).
struct NamingInputs: Equatable, Sendable {
    var permissions: EnforcedPermissions
    var tags: TagTable

    /// How units just made are named under these permissions, before it is told the rules in force
    /// (`UnitNaming.with(inForce:generation:)`).
    func naming() -> UnitNaming {
        let apps = permissions.config.apps
        let decisions = permissions.decisions
        let tags = tags.tags(of: apps.map(\.id))
        var index: [String: Int] = [:]
        for (i, a) in apps.enumerated() where index[a.id] == nil { index[a.id] = i }
        var own: [Int: [UInt32: PermissionSet]] = [:]
        for uid in Set(decisions.userLasting.keys).union(decisions.userOnce.keys) {
            let decided = Set((decisions.userLasting[uid] ?? [:]).keys).union((decisions.userOnce[uid] ?? [:]).keys)
            for app in decided {
                guard let i = index[app], let p = permissions.ownPermissions(apps[i], uid) else { continue }
                own[i, default: [:]][uid] = p
            }
        }
        return UnitNaming(generation: 0, apps: apps, index: permissions.config.resolver,
                          permissions: apps.map(permissions.permissions), own: own, tags: apps.map { tags[$0.id] })
    }
}
