/// "May this app use the network now, and if not, why" — the answer for one app.
public struct Verdict: Equatable, Sendable {
    public enum Reason: String, Sendable {
        case ok
        case noNetwork = "no-network"
        case denied
        case awaitingDecision = "awaiting-decision"
        case starting
    }

    public var app: String
    public var matchedBy: MatchedBy
    /// Effective permissions: the policy's, with decisions applied where it says `ask`.
    public var permissions: PermissionSet
    public var sources: [LinkKind: PermissionSource]
    public var available: Bool
    public var reason: Reason
    /// The best allowed link (lowest default-route metric) when available.
    public var via: Link?
    /// Kinds of usable links the app may not use.
    public var deniedKinds: [LinkKind]
    /// Kinds of usable links set to `ask` with no decision yet.
    public var pendingKinds: [LinkKind]

    /// Kinds denied only because no agent listens to ask the user (`no-agent`).
    public var unaskedKinds: [LinkKind] { deniedKinds.filter { sources[$0] == .noAgent } }

    /// Asking about itself, the app should make someone ask the user: an agent (prompts), or, with none, the
    /// log (that nobody can).
    public var wantsAsking: Bool { reason == .awaitingDecision || !unaskedKinds.isEmpty }

    /// Kinds in reporting order.
    static let reportedKinds: [LinkKind] = [.wifi, .wwan, .ethernet, .other]

    public static func compute(app: String, matchedBy: MatchedBy, permissions: PermissionSet,
                               network: NetworkState, ready: Bool) -> Verdict {
        compute(app: app, matchedBy: matchedBy, effective: EffectivePermissions(permissions: permissions),
                network: network, ready: ready)
    }

    public static func compute(app: String, matchedBy: MatchedBy, effective: EffectivePermissions,
                               network: NetworkState, ready: Bool) -> Verdict {
        let permissions = effective.permissions
        var v = Verdict(app: app, matchedBy: matchedBy, permissions: permissions, sources: effective.sources,
                        available: false, reason: .starting, via: nil, deniedKinds: [], pendingKinds: [])
        guard ready else { return v }
        let usable = network.usableLinks
        guard !usable.isEmpty else {
            v.reason = .noNetwork
            return v
        }
        var denied: Set<LinkKind> = [], pending: Set<LinkKind> = []
        for link in usable {
            switch permissions[link.kind] {
            case .allow: break
            case .deny: denied.insert(link.kind)
            // Until a decision exists, `ask` is not allowed.
            case .ask: pending.insert(link.kind)
            }
        }
        v.deniedKinds = reportedKinds.filter(denied.contains)
        v.pendingKinds = reportedKinds.filter(pending.contains)
        if let best = network.best(of: usable.lazy.filter { permissions[$0.kind] == .allow }) {
            v.available = true
            v.reason = .ok
            v.via = best
        } else {
            v.reason = pending.isEmpty ? .denied : .awaitingDecision
        }
        return v
    }

    /// The verdict's members, among a reply's own (QUERY, WAIT, APPS, DECIDE). `matchedBy: false` for app events,
    /// which describe the app rather than how one asker was recognised.
    public func write(to s: inout JSONWriter, matchedBy withMatchedBy: Bool = true) {
        s.field("app", app)
        if withMatchedBy { s.field("matched_by", matchedBy.rawValue) }
        s.field("available", available)
        s.field("reason", reason.rawValue)
        if let l = via {
            s.object("via") {
                $0.field("name", l.name)
                $0.field("kind", l.kind.rawValue)
                $0.field("metered", l.metered)
            }
        } else {
            s.field("via", nil as String?)
        }
        s.field("denied_kinds", strings: deniedKinds.lazy.map(\.rawValue))
        s.field("pending_kinds", strings: pendingKinds.lazy.map(\.rawValue))
        s.object("permissions") {
            for k in PermissionSet.keys { $0.field(k.kind.key, permissions[k.kind].rawValue) }
        }
        let effective = EffectivePermissions(permissions: permissions, sources: sources)
        s.object("sources") {
            for k in PermissionSet.keys { $0.field(k.kind.key, effective.source(k.kind).rawValue) }
        }
    }
}
