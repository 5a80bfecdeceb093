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
        return UsageTagging(tags: tags, owners: Dictionary(tags.map { ($1, $0) }, uniquingKeysWith: { a, _ in a }),
                            tagging: Ruleset.tagging(apps: apps, cgroups: cgroups, tags: tags, installed: installed))
    }
}

/// Each app's tag, each tag's app, and what tags connections (`Ruleset.tagging`).
struct UsageTagging: Sendable {
    var tags: [String: UInt32]
    var owners: [UInt32: String]
    var tagging: Ruleset.Tagging
}
