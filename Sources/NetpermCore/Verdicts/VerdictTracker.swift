// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// An app's verdict for everyone's processes (`uid` nil), or for one uid's (a user's own app, with the user's own
/// decisions and agent).
public struct TrackedApp: Hashable, Sendable {
    public var id: String
    public var uid: UInt32?
    public init(_ id: String, uid: UInt32? = nil) { self.id = id; self.uid = uid }
}

/// What the tracker keys its verdicts by: an app id for everyone's (most of them, 10,000 in a large policy: a
/// plain String keeps them as cheap as before there were users' own), or a `TrackedApp` for one uid's.
protocol TrackerKey: Hashable, Sendable {
    var appID: String { get }
    var uidView: UInt32? { get }
}

extension String: TrackerKey {
    var appID: String { self }
    var uidView: UInt32? { nil }
}

extension TrackedApp: TrackerKey {
    var appID: String { id }
    var uidView: UInt32? { uid }
}

/// The verdicts of every app someone may hear about (the policy's apps and the subscribers' and waiters' own, for
/// everyone and per uid), and the events when they change. Verdicts depend only on the permission set, so they are
/// computed once per distinct set (at most 3^5), not once per app: a 10,000-app policy costs the same per link
/// change.
public struct VerdictTracker: Sendable {
    /// Apps of one kind of key, and the sets of permissions their verdicts come from.
    struct Store<Key: TrackerKey>: Sendable {
        var matches: [Key: AppMatch] = [:]
        var order: [Key] = []
        var verdicts: [Key: Verdict] = [:]
        var appsBySet: [EffectivePermissions: [Key]] = [:]

        mutating func add(_ match: AppMatch, as key: Key, templates: inout [EffectivePermissions: Verdict],
                          state: DaemonState) {
            guard matches[key] == nil else { return }
            let perms = state.effectivePermissions(for: match, uid: key.uidView)
            matches[key] = match
            order.append(key)
            file(key, match, under: perms, templates: &templates, state: state)
        }

        /// `key` filed under `perms`, its verdict made from that set's template (made once per set).
        private mutating func file(_ key: Key, _ match: AppMatch, under perms: EffectivePermissions,
                                   templates: inout [EffectivePermissions: Verdict], state: DaemonState) {
            let template = templates[perms]
                ?? Verdict.compute(app: "", matchedBy: .name, effective: perms, network: state.network, ready: state.ready)
            templates[perms] = template
            appsBySet[perms, default: []].append(key)
            verdicts[key] = template.renamed(match.id, match.matchedBy, uid: key.uidView)
        }

        /// Returns the permission set no app of this store has any more, if it was the last.
        mutating func remove(_ key: Key, state: DaemonState) -> EffectivePermissions? {
            guard let m = matches[key] else { return nil }
            let perms = state.effectivePermissions(for: m, uid: key.uidView)
            matches[key] = nil
            verdicts[key] = nil
            order.removeAll { $0 == key }
            appsBySet[perms]?.removeAll { $0 == key }
            guard appsBySet[perms]?.isEmpty == true else { return nil }
            appsBySet[perms] = nil
            return perms
        }

        /// The verdicts of the apps of `perms`, now `new`; their events.
        mutating func renew(_ perms: EffectivePermissions, _ new: Verdict) -> [Event] {
            (appsBySet[perms] ?? []).map { key in
                let v = new.renamed(key.appID, matches[key]?.matchedBy ?? .name, uid: key.uidView)
                verdicts[key] = v
                return .app(v)
            }
        }

        /// The verdicts of the tracked `keys` made again from their permissions now (as `add` makes them); the
        /// permission sets no app of this store has any more.
        mutating func update(_ keys: [Key], templates: inout [EffectivePermissions: Verdict], state: DaemonState)
            -> [EffectivePermissions] {
            var emptied: [EffectivePermissions] = []
            for key in keys {
                guard let match = matches[key] else { continue }
                let perms = state.effectivePermissions(for: match, uid: key.uidView)
                // The set it was filed under (one pass over the sets, at most 3^5, and their keys).
                let was = appsBySet.first { $0.value.contains(key) }?.key
                guard perms != was else { continue }
                if let was {
                    appsBySet[was]?.removeAll { $0 == key }
                    if appsBySet[was]?.isEmpty == true {
                        appsBySet[was] = nil
                        emptied.append(was)
                    }
                }
                file(key, match, under: perms, templates: &templates, state: state)
            }
            return emptied
        }

        func changed(since old: [Key: Verdict]) -> [Event] {
            order.compactMap { key in
                guard let v = verdicts[key], let o = old[key], !o.sameState(as: v) else { return nil }
                return .app(v)
            }
        }
    }

    /// Readable in the module: the engine reads a QUERY's verdict through them (`Engine.verdict(for:uid:)`), as a
    /// method called on the tracker a class holds runs on a copy of the whole tracker.
    private(set) var everyone = Store<String>()
    private(set) var own = Store<TrackedApp>()
    private var templates: [EffectivePermissions: Verdict] = [:]
    /// Counts the calls that may change it: a copy is this tracker while the count is the same
    /// (ReloadPreparation.swift).
    public private(set) var changes = 0

    public init() {}

    public func verdict(_ app: String, uid: UInt32? = nil) -> Verdict? {
        guard let uid else { return everyone.verdicts[app] }
        return own.verdicts[TrackedApp(app, uid: uid)]
    }

    /// Everyone's verdicts, in the order tracked.
    public var all: [Verdict] { everyone.order.compactMap { everyone.verdicts[$0] } }

    /// Rebuilds the set of apps after a policy load, keeping extra ones (derived apps, and apps seen as one uid
    /// sees them); returns app events.
    public mutating func reset(state: DaemonState, extra: [(AppMatch, UInt32?)]) -> [Event] {
        changes += 1
        let old = (everyone.verdicts, own.verdicts)
        everyone = Store()
        own = Store()
        templates = [:]
        for app in state.config.apps {
            everyone.add(AppMatch(id: app.id, matchedBy: .name, app: app), as: app.id, templates: &templates, state: state)
        }
        for (m, uid) in extra { track(m, uid: uid, state: state) }
        return everyone.changed(since: old.0) + own.changed(since: old.1)
    }

    /// Makes again the verdicts of `apps` alone (for everyone and for each uid tracked), after their decisions
    /// changed and nothing else did; returns their events, as `reset` would (in the order tracked, everyone's first).
    public mutating func update(_ apps: Set<String>, state: DaemonState) -> [Event] {
        guard !apps.isEmpty else { return [] }
        changes += 1
        let keys = (everyone.order.filter { apps.contains($0) }, own.order.filter { apps.contains($0.id) })
        // Their verdicts before, not the dictionaries: a copy held while they change is 10,001 verdicts copied.
        let old = (keys.0.map { everyone.verdicts[$0] }, keys.1.map { own.verdicts[$0] })
        let emptied = everyone.update(keys.0, templates: &templates, state: state)
            + own.update(keys.1, templates: &templates, state: state)
        for perms in emptied where everyone.appsBySet[perms] == nil && own.appsBySet[perms] == nil { templates[perms] = nil }
        let now = keys.0.map { everyone.verdicts[$0] } + keys.1.map { own.verdicts[$0] }
        return zip(now, old.0 + old.1).compactMap { v, o in
            guard let v, let o, !o.sameState(as: v) else { return nil }
            return .app(v)
        }
    }

    /// Starts tracking one app (a subscriber's or waiter's own); no event.
    public mutating func track(_ match: AppMatch, uid: UInt32? = nil, state: DaemonState) {
        changes += 1
        if let uid {
            own.add(match, as: TrackedApp(match.id, uid: uid), templates: &templates, state: state)
        } else {
            everyone.add(match, as: match.id, templates: &templates, state: state)
        }
    }

    /// Stops tracking an app nobody listens to any more (never a policy app's verdict for everyone: those are
    /// always tracked).
    public mutating func untrack(_ id: String, uid: UInt32? = nil, state: DaemonState) {
        changes += 1
        let emptied: EffectivePermissions?
        if let uid {
            emptied = own.remove(TrackedApp(id, uid: uid), state: state)
        } else {
            guard state.config.app(named: id) == nil else { return }
            emptied = everyone.remove(id, state: state)
        }
        if let perms = emptied, everyone.appsBySet[perms] == nil, own.appsBySet[perms] == nil { templates[perms] = nil }
    }

    /// Recomputes after the network changed; events for the apps whose verdict changed.
    public mutating func refresh(state: DaemonState) -> [Event] {
        changes += 1
        var events: [Event] = []
        for perms in Set(everyone.appsBySet.keys).union(own.appsBySet.keys) {
            guard let old = templates[perms] else { continue }
            let new = Verdict.compute(app: "", matchedBy: .name, effective: perms, network: state.network,
                                      ready: state.ready)
            guard !old.sameState(as: new) else { continue }
            templates[perms] = new
            events += everyone.renew(perms, new)
            events += own.renew(perms, new)
        }
        return events
    }
}

extension Verdict {
    public func renamed(_ id: String, _ by: MatchedBy, uid: UInt32? = nil) -> Verdict {
        var v = self
        v.app = id
        v.matchedBy = by
        v.uid = uid
        return v
    }

    /// Equal in what an app event reports: available, reason, via, kinds (and permissions).
    func sameState(as other: Verdict) -> Bool {
        available == other.available && reason == other.reason && permissions == other.permissions
            && sources == other.sources && Link.sameReference(via, other.via) && Link.sameReference(bindTo, other.bindTo)
            && AddressFamily.allCases.allSatisfy { Route.sameReport(egress[$0], other.egress[$0]) }
            && kinds == other.kinds
    }
}

extension Link {
    /// Equal in what a verdict says of a link (`writeReference`).
    static func sameReference(_ a: Link?, _ b: Link?) -> Bool {
        a?.index == b?.index && a?.name == b?.name && a?.kind == b?.kind && a?.metered == b?.metered
            && a?.over == b?.over
    }
}

extension Verdict.Route {
    /// Equal in what a verdict's `egress` says.
    static func sameReport(_ a: Verdict.Route?, _ b: Verdict.Route?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case let (.link(x, ax)?, .link(y, ay)?): return ax == ay && x.usable == y.usable && Link.sameReference(x, y)
        case let (.blocked(x)?, .blocked(y)?): return x == y
        case (.link?, _), (.blocked?, _), (nil, _): return false
        }
    }
}
