// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// What usage counts connections by, taken from enforcement: the apps, their units' cgroups and their tags (the
/// rules' own, so that a connection is counted as the app the rules hold it to). Usage reads enforcement only
/// through these, as the rules read usage only through the budgets used up (`EnforcedPermissions.exhausted`).
struct TaggingInputs: Equatable, Sendable {
    var apps: [AppPolicy]
    var cgroups: UnitCgroups
    var tags: TagTable
    var installed = InstalledDesktopApps()

    func tagging() -> UsageTagging {
        let tags = tags.tags(of: apps.map(\.id))
        let tagging = Ruleset.tagging(apps: apps, cgroups: cgroups, tags: tags, installed: installed)
        return UsageTagging(tags: tags, owners: Dictionary(tags.map { ($1, $0) }, uniquingKeysWith: { a, _ in a }),
                            tagging: tagging,
                            unitOwners: Dictionary(tagging.userUnits.map { ($0.id, $0.owner) }, uniquingKeysWith: { a, _ in a }))
    }
}

/// Each app's tag, each tag's app, and what tags connections (`Ruleset.tagging`); and whose own app each user's
/// unit's cgroup is, by its id.
struct UsageTagging: Sendable {
    var tags: [String: UInt32]
    var owners: [UInt32: String]
    var tagging: Ruleset.Tagging
    var unitOwners: [UInt64: UserApp] = [:]
}
