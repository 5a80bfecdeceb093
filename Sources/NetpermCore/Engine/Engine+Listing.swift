// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// `SUBSCRIBE mine`: a subscriber follows every app `APPS` lists for it, as its uid has them, not only its own app
/// (what a person's settings window shows: their own decisions, others' answers, reloads, budgets). The list itself
/// moves with the policy, the desktop files and the units running; when it does, the subscriber gets a `resync`
/// (`listed`) with the whole list, since no app event says that an app left it.
extension Engine {
    /// The apps `APPS` lists for `caller`, and whose verdicts of them it hears (nil: everyone's, for the privileged).
    func listing(for caller: Caller) -> (apps: [AppMatch], uid: UInt32?) {
        let listed = appsListed(for: caller)
        return (listed.map(\.match), caller.privileged ? nil : caller.identity.uid)
    }

    /// A listed app as the policy in force has it: a list is made again only after the input is settled (`relist`),
    /// and a reload's verdicts must come from the new `[App]`, not the one the list was made with.
    func current(_ m: AppMatch) -> AppMatch {
        guard m.matchedBy == .name, let app = state.config.app(named: m.id) else { return m }
        return AppMatch(id: app.id, matchedBy: .name, app: app)
    }

    /// Sets a `mine` subscriber's list and tracks its apps' verdicts (those it no longer lists are untracked when no
    /// one else listens to them).
    func setListing(_ s: Session, _ apps: [AppMatch], uid: UInt32?) {
        let before = s.listened
        changeSession(s) {
            s.listedApps = apps
            s.subscription?.listed = Set(apps.lazy.map(\.id))
            s.subscription?.listedUID = uid
        }
        for m in apps { tracker.track(m, uid: uid, state: state) }
        untrackIfUnwanted(before)
    }

    /// After an input that may change what `APPS` lists: each `mine` subscriber whose list changed gets it again.
    func relist() {
        for s in orderedSessions(where: { $0.subscription?.topics.contains(.mine) == true }) {
            let (apps, uid) = listing(for: s.caller)
            guard apps != s.listedApps || uid != s.subscription?.listedUID else { continue }
            let sameIDs = apps.map(\.id) == s.listedApps.map(\.id) && uid == s.subscription?.listedUID
            setListing(s, apps, uid: uid)
            if !sameIDs { resync(s, .listed, dropped: nil) }
        }
    }

    /// The verdicts a snapshot or a resync carries under `apps`, `self` and `mine`: the listed apps' first (as
    /// `listedUID` has them), then the others the subscriber hears of.
    func writeApps(for sub: Subscription, listed: [AppMatch], _ caller: Caller, to w: inout JSONWriter) {
        let others = tracker.all.lazy.map { v in
            v.app == sub.appID ? sub.ownUID.flatMap { self.tracker.verdict(v.app, uid: $0) } ?? v : v
        }.filter { sub.hears($0) && !(sub.topics.contains(.mine) && sub.listed.contains($0.app)) }
        let mine = sub.topics.contains(.mine) ? listed.map { verdict(for: $0, uid: sub.listedUID) } : []
        w.objects("apps", mine + others.map { withEnforcement($0, .name) }) {
            forCaller($1, caller).write(to: &$0, matchedBy: false)
        }
    }
}

extension Input {
    /// Whether the input may change which apps `APPS` lists for someone: the policy, the units running, the
    /// desktop files.
    var mayChangeListing: Bool {
        switch self {
        case .policy, .cgroups, .unitsNamed, .unitsGone, .unitElementsLoaded, .desktopCatalog, .execFound, .scopeMade,
             .identityChanged:
            return true
        case .kernel, .reload, .started, .opened, .closed, .line, .lineTooLong, .timer, .stored, .stopping, .caughtUp,
             .execsCounted, .tablesLookedUp, .loadRan, .tablesChanged, .blocked, .exited, .steered, .usageRead, .usageSaved,
             .budgetReached, .routed, .reportSighted, .reportSaved:
            return false
        }
    }
}
