// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// Desktop apps (docs/APPS.md, "Desktop apps"): the apps users' managers run under their application IDs, and those
/// installed, named by their `.desktop` files. An app of these no `[App]` names is one of `state.config`'s apps by
/// itself while it runs (`Config.addingDesktopApps`), so that the rules, prompts, decisions and usage treat it as any
/// other; installed but not running, it is listed (APPS) but costs the rules nothing.
struct DesktopBook {
    /// The application IDs of the desktop units that exist (UnitCgroups), whether or not an `[App]` names them.
    var running: Set<String> = []
    /// Their uids, by ID: a user's own APPS lists the apps they run.
    var runningUIDs: [String: Set<UInt32>] = [:]
    var catalog = DesktopCatalog()
    /// The IDs each uid has installed (`catalog.installed`): what makes a unit of an ID that is not reverse-DNS an app.
    var installed = InstalledDesktopApps()
    /// Uids told to run more desktop apps than one user may have (`Engine.maxOwnApps`).
    var crowded: Set<UInt32> = []
}

extension Engine {
    /// The unit cgroups changed: the desktop apps running may have.
    func desktopUnitsChanged(_ cgroups: UnitCgroups, installedChanged: Bool = false) {
        var uids: [String: Set<UInt32>] = [:]
        var perUID: [UInt32: Set<String>] = [:]
        for c in cgroups.units where c.user {
            guard let uid = Ruleset.UnitOwner.userUID(path: c.path),
                  let id = DesktopAppID.from(unit: c.unit, slice: c.slice, uid: uid, installed: appBooks.desktop.installed)
            else { continue }
            // A unit a run scope or `UserUnit=` names is that app's (AppResolver's order), no desktop app of its own.
            switch state.config.resolver.unitMatch(unit: c.unit, slice: c.slice, user: true, uid: uid)?.kind {
            case .runScope?, .unit?: continue
            case .desktop?, nil: break
            }
            // One user naming units after ever new IDs makes apps for everyone's rules: at most `maxOwnApps` each.
            guard perUID[uid, default: []].count < Self.maxOwnApps || perUID[uid]!.contains(id) else {
                if appBooks.desktop.crowded.insert(uid).inserted {
                    log(.warning, "desktop apps: uid \(uid) runs more than \(Self.maxOwnApps) desktop apps; the rest are "
                        + "judged by their uid until some stop", uid: uid)
                }
                continue
            }
            perUID[uid, default: []].insert(id)
            uids[id, default: []].insert(uid)
        }
        appBooks.desktop.crowded.formIntersection(perUID.filter { $0.value.count >= Self.maxOwnApps }.keys)
        appBooks.desktop.runningUIDs = uids
        let running = Set(uids.keys)
        guard running != appBooks.desktop.running || installedChanged else { return }
        appBooks.desktop.running = running
        setApps(AppsInputs(policy: state.config.policyOnly, running: running, installed: appBooks.desktop.installed,
                           config: state.config, tags: appBooks.tags))
    }

    /// New desktop files were read (`Input.desktopCatalog`).
    func desktopCatalogRead(_ catalog: DesktopCatalog) {
        guard catalog != appBooks.desktop.catalog else { return }
        log(.info, "desktop files: \(catalog.system.count) apps for everyone, "
            + "\(catalog.users.values.reduce(0) { $0 + $1.count }) of \(catalog.users.count) users' own")
        appBooks.desktop.catalog = catalog
        execIndexFollows(catalog)
        // Names are looked up as verdicts go out; what listens hears them with its app's next change.
        invalidateReplies()
        // Which units of IDs that are not reverse-DNS are apps follows what is installed, for each uid.
        let installed = catalog.installed
        guard installed != appBooks.desktop.installed else { return }
        appBooks.desktop.installed = installed
        desktopUnitsChanged(enforcement.cgroups, installedChanged: true)
        rematchCallers()
    }

    /// The one setter of the apps judged: the policy's, with the desktop apps running that no `[App]` names.
    /// What they may do is `[Defaults]`': every verdict and the rules are made again.
    func setApps(_ inputs: AppsInputs) {
        let new = prepared(\.apps, for: inputs) { $0.adopt() }
        guard new.appsChanged else {
            setConfig(new.config)
            return
        }
        let old = Set(state.config.apps.lazy.filter(\.discovered).map(\.id))
        let now = Set(new.config.apps.lazy.filter(\.discovered).map(\.id))
        if old != now {
            log(.info, "desktop apps: " + [("running now", now.subtracting(old)), ("gone", old.subtracting(now))]
                .filter { !$0.1.isEmpty }
                .map { "\($0.0) \($0.1.sorted().prefix(10).joined(separator: ", "))\($0.1.count > 10 ? ", ..." : "")" }
                .joined(separator: "; "))
        }
        setConfig(new.config)
        if new.tagsChanged {
            appBooks.tags = new.tags
            out.append(.saveTags(new.tags))
        }
        markPermissionsChanged()
        appsChanged()
    }

    /// The verdict with its app's name and icon, as its uid (nil: everyone) sees them.
    /// An app no section or unit names (`matched_by: default`) has an id made of its executable's file name: a
    /// terminal's `/usr/bin/vlc` is `vlc`, which is no desktop file's word about it.
    func named(_ v: inout Verdict) {
        guard v.matchedBy != .defaults, let e = desktopEntry(of: v.app, uid: v.uid) else { return }
        v.face = AppFace(e)
    }

    /// What the desktop file of app `id` says, as `uid` (nil: everyone) sees it: the file of its own ID for a
    /// desktop app, of an `[App]`'s first `DesktopId=` (or its own id) otherwise.
    func desktopEntry(of id: String, uid: UInt32?) -> DesktopEntry? {
        // The `[App]`'s field read in place: `policyApp(named:)` copied the whole section to read it.
        let own = state.config.appIndex[id].flatMap { state.config.apps[$0].desktopIDs.first }
        return appBooks.desktop.catalog.entry(own ?? id, uid: uid)
    }

    /// One entry of APPS: the app, as whose uid it is judged, and whether a desktop file of it is installed.
    struct ListedApp {
        var match: AppMatch
        var uid: UInt32?
        var installed: Bool
    }

    /// What APPS lists: for root and `AdminGroup=` members, every app of the policy, the desktop apps running and
    /// those installed for everyone, as everyone has them; for a user, as their uid has them, the apps they run
    /// (desktop apps, and the policy's apps of their units and uid) and the desktop apps installed for everyone
    /// and for them. The policy's in its order, then the desktop apps by their ids.
    func appsListed(for caller: Caller) -> [ListedApp] {
        // Menus' apps (not deleted, TryExec's program there, not NoDisplay=), a user's own file first for them.
        let installed = appBooks.desktop.catalog.listed(uid: caller.privileged ? nil : caller.identity.uid)
        var listed: [ListedApp] = []
        var seen: Set<String> = []
        func add(_ app: AppPolicy, uid: UInt32?) {
            guard seen.insert(app.id).inserted else { return }
            let matchedBy: MatchedBy = app.discovered ? .desktop : .name
            listed.append(ListedApp(match: AppMatch(id: app.id, matchedBy: matchedBy, app: app), uid: uid,
                                    installed: app.desktopIDs.contains { installed.contains($0) }))
        }
        if caller.privileged {
            for app in state.config.apps { add(app, uid: nil) }
        } else {
            let uid = caller.identity.uid
            for app in state.config.apps where app.uids.contains(uid)
                || app.desktopIDs.contains(where: { appBooks.desktop.runningUIDs[$0]?.contains(uid) == true }) {
                add(app, uid: uid)
            }
            for c in enforcement.cgroups.units where c.user && Ruleset.UnitOwner.userUID(path: c.path) == uid {
                // Its app as the rules have it (AppResolver): a run scope's, a `UserUnit=` app's or a desktop app's.
                if let i = Ruleset.owner(of: c, state.config.resolver) { add(state.config.apps[i], uid: uid) }
            }
        }
        for id in installed.sorted() {
            add(state.config.app(desktopID: id) ?? AppPolicy(discovered: id), uid: caller.privileged ? nil : caller.identity.uid)
        }
        return listed
    }

    /// The name and icon of app `id` as `uid` sees them, written beside its id.
    func writeName(of id: String, uid: UInt32?, to w: inout JSONWriter) {
        guard let e = desktopEntry(of: id, uid: uid) else { return }
        w.field("name", e.name)
        if !e.localizedNames.isEmpty { w.field("names", map: e.localizedNames) }
        w.field("icon", e.icon)
    }
}
