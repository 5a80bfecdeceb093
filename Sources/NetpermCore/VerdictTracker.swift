/// An app's verdict for everyone's processes (`uid` nil), or for one uid's (a user's own app, with the user's own
/// decisions and agent).
public struct TrackedApp: Hashable, Sendable {
    public var id: String
    public var uid: UInt32?
    public init(_ id: String, uid: UInt32? = nil) { self.id = id; self.uid = uid }
}

/// The verdicts of every app someone may hear about (the policy's apps and the subscribers' and waiters' own, for
/// everyone and per uid), and the events when they change. Verdicts depend only on the permission set, so they are
/// computed once per distinct set (at most 3^5), not once per app: a 10,000-app policy costs the same per link
/// change.
public struct VerdictTracker: Sendable {
    private var matches: [TrackedApp: AppMatch] = [:]
    private var order: [TrackedApp] = []
    private var verdicts: [TrackedApp: Verdict] = [:]
    private var appsBySet: [EffectivePermissions: [TrackedApp]] = [:]
    private var templates: [EffectivePermissions: Verdict] = [:]

    public init() {}

    public func verdict(_ app: String, uid: UInt32? = nil) -> Verdict? { verdicts[TrackedApp(app, uid: uid)] }
    /// Everyone's verdicts, in the order tracked.
    public var all: [Verdict] { order.compactMap { $0.uid == nil ? verdicts[$0] : nil } }

    /// Rebuilds the set of apps after a policy load, keeping extra ones (derived apps, and apps seen as one uid
    /// sees them); returns app events.
    public mutating func reset(state: DaemonState, extra: [(AppMatch, UInt32?)]) -> [Event] {
        let old = verdicts
        matches = [:]; order = []; verdicts = [:]; appsBySet = [:]; templates = [:]
        for app in state.config.apps { add(AppMatch(id: app.id, matchedBy: .name, app: app), uid: nil, state: state) }
        for (m, uid) in extra where matches[TrackedApp(m.id, uid: uid)] == nil { add(m, uid: uid, state: state) }
        return order.compactMap { key in
            guard let v = verdicts[key], let o = old[key], !o.sameState(as: v) else { return nil }
            return .app(v)
        }
    }

    /// Starts tracking one app (a subscriber's or waiter's own); no event.
    public mutating func track(_ match: AppMatch, uid: UInt32? = nil, state: DaemonState) {
        guard matches[TrackedApp(match.id, uid: uid)] == nil else { return }
        add(match, uid: uid, state: state)
    }

    /// Stops tracking an app nobody listens to any more (never a policy app's verdict for everyone: those are
    /// always tracked).
    public mutating func untrack(_ id: String, uid: UInt32? = nil, state: DaemonState) {
        let key = TrackedApp(id, uid: uid)
        guard let m = matches[key], uid != nil || state.config.app(named: id) == nil else { return }
        let perms = state.effectivePermissions(for: m, uid: uid)
        matches[key] = nil
        verdicts[key] = nil
        order.removeAll { $0 == key }
        appsBySet[perms]?.removeAll { $0 == key }
        if appsBySet[perms]?.isEmpty == true {
            appsBySet[perms] = nil
            templates[perms] = nil
        }
    }

    private mutating func add(_ match: AppMatch, uid: UInt32?, state: DaemonState) {
        let perms = state.effectivePermissions(for: match, uid: uid)
        let key = TrackedApp(match.id, uid: uid)
        matches[key] = match
        order.append(key)
        let template = templates[perms]
            ?? Verdict.compute(app: "", matchedBy: .name, effective: perms, network: state.network, ready: state.ready)
        templates[perms] = template
        appsBySet[perms, default: []].append(key)
        verdicts[key] = template.renamed(match.id, match.matchedBy, uid: uid)
    }

    /// Recomputes after the network changed; events for the apps whose verdict changed.
    public mutating func refresh(state: DaemonState) -> [Event] {
        var events: [Event] = []
        for (perms, apps) in appsBySet {
            guard let old = templates[perms] else { continue }
            let new = Verdict.compute(app: "", matchedBy: .name, effective: perms, network: state.network,
                                      ready: state.ready)
            guard !old.sameState(as: new) else { continue }
            templates[perms] = new
            for key in apps {
                let v = new.renamed(key.id, matches[key]?.matchedBy ?? .name, uid: key.uid)
                verdicts[key] = v
                events.append(.app(v))
            }
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
            && deniedKinds == other.deniedKinds && pendingKinds == other.pendingKinds
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
