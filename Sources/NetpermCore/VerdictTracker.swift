/// The verdicts of every app someone may hear about (the policy's apps and the subscribers' and waiters' own),
/// and the events when they change. Verdicts depend only on the permission set, so they are computed once per
/// distinct set (at most 81), not once per app: a 10,000-app policy costs the same per link change.
public struct VerdictTracker: Sendable {
    private var matches: [String: AppMatch] = [:]
    private var order: [String] = []
    private var verdicts: [String: Verdict] = [:]
    private var appsBySet: [EffectivePermissions: [String]] = [:]
    private var templates: [EffectivePermissions: Verdict] = [:]

    public init() {}

    public func verdict(_ app: String) -> Verdict? { verdicts[app] }
    public var all: [Verdict] { order.compactMap { verdicts[$0] } }

    /// Rebuilds the set of apps after a policy load, keeping extra (derived) apps; returns app events.
    public mutating func reset(state: DaemonState, extra: [AppMatch]) -> [Event] {
        let old = verdicts
        matches = [:]; order = []; verdicts = [:]; appsBySet = [:]; templates = [:]
        for app in state.config.apps { add(AppMatch(id: app.id, matchedBy: .name, app: app), state: state) }
        for m in extra where matches[m.id] == nil { add(m, state: state) }
        return order.compactMap { id in
            guard let v = verdicts[id], let o = old[id], !o.sameState(as: v) else { return nil }
            return .app(v)
        }
    }

    /// Starts tracking one app (a subscriber's or waiter's own); no event.
    public mutating func track(_ match: AppMatch, state: DaemonState) {
        guard matches[match.id] == nil else { return }
        add(match, state: state)
    }

    /// Stops tracking an app nobody listens to any more (never a policy app: those are always tracked).
    public mutating func untrack(_ id: String, state: DaemonState) {
        guard let m = matches[id], state.config.app(named: id) == nil else { return }
        let perms = state.effectivePermissions(for: m)
        matches[id] = nil
        verdicts[id] = nil
        order.removeAll { $0 == id }
        appsBySet[perms]?.removeAll { $0 == id }
        if appsBySet[perms]?.isEmpty == true {
            appsBySet[perms] = nil
            templates[perms] = nil
        }
    }

    private mutating func add(_ match: AppMatch, state: DaemonState) {
        let perms = state.effectivePermissions(for: match)
        matches[match.id] = match
        order.append(match.id)
        let template = templates[perms]
            ?? Verdict.compute(app: "", matchedBy: .name, effective: perms, network: state.network, ready: state.ready)
        templates[perms] = template
        appsBySet[perms, default: []].append(match.id)
        verdicts[match.id] = template.renamed(match.id, match.matchedBy)
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
            for id in apps {
                let v = new.renamed(id, matches[id]?.matchedBy ?? .name)
                verdicts[id] = v
                events.append(.app(v))
            }
        }
        return events
    }
}

extension Verdict {
    public func renamed(_ id: String, _ by: MatchedBy) -> Verdict {
        var v = self
        v.app = id
        v.matchedBy = by
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
