// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// "May this app use the network now, and if not, why" — the answer for one app.
public struct Verdict: Equatable, Sendable {
    public enum Reason: String, CaseIterable, Sendable {
        case ok
        case noNetwork = "no-network"
        case denied
        case awaitingDecision = "awaiting-decision"
        /// The kernel routes the app's traffic (a family of it) out of a link it may not use, or into nothing,
        /// while a link it may use is usable: it could bind to that one (`bindTo`).
        case routedElsewhere = "routed-elsewhere"
        /// Denied only on metered links, because its `MeteredBudget=` for this period is used up (docs/USAGE.md).
        case budgetExhausted = "budget-exhausted"
        case starting
    }

    /// What keeps the app off the usable links, in reporting order: computed together from the same links.
    public struct Kinds: Equatable, Sendable {
        /// Their kinds set to deny, and `metered` when a usable metered link is kept off by Metered=deny.
        public var denied: [PolicyDimension]
        /// What a decision could open: the `ask` dimensions (kinds, `metered`) of usable links nothing denies.
        public var pending: [PolicyDimension]
        public init(denied: [PolicyDimension] = [], pending: [PolicyDimension] = []) {
            self.denied = denied; self.pending = pending
        }
    }

    /// Where one family of the app's traffic would leave by now.
    public enum Route: Equatable, Sendable {
        /// Out of a link; `allowed`: of a kind the app may use.
        case link(Link, allowed: Bool)
        case blocked(RouteBlock)
    }

    public var app: String
    public var matchedBy: MatchedBy
    /// Effective permissions: the policy's, with decisions applied where it says `ask`.
    public var permissions: PermissionSet
    public var sources: PermissionSources
    public var available: Bool
    public var reason: Reason
    /// When available: the link its traffic leaves by (IPv4's, else IPv6's).
    public var via: Link?
    /// Per family, where the kernel sends the app's traffic now; no entry: no route.
    public var egress: PerFamily<Route>
    /// With `routed-elsewhere`: a usable link the app may use, to bind its sockets to (the lowest metric).
    public var bindTo: Link?
    /// The kinds that keep the app off usable links, and those a decision could open.
    public var kinds: Kinds
    /// Whether the kernel enforces the app's permissions (Mode=block); the engine fills it in per app.
    public var enforcement: Enforcement = .notEnforced(.modeOff)
    /// The app's metered budget, when it has one; the engine fills it in per app.
    public var budget: BudgetFact?
    /// Whose verdict it is: nil for everyone's processes, or one uid's, with its own decisions and agent (a
    /// user's own app, `[Defaults] UserDecisions=yes`). Not written: it says which subscribers get an event.
    public var uid: UInt32? = nil
    /// The address a REACH asked about: the message says which link it would leave by. Not written (the reply
    /// writes `destination` itself).
    public var destination: String? = nil
    /// The app's name, names and icon from its desktop file (DesktopEntry), as the verdict's uid sees them; the
    /// message names the app by its name.
    public var face = AppFace()

    /// Kinds denied only because no agent listens to ask the user (`no-agent`).
    public var unaskedKinds: [PolicyDimension] { kinds.denied.filter { sources[$0] == .noAgent } }

    /// Asking about itself, the app should make someone ask the user: an agent (prompts), or, with none, the
    /// log (that nobody can).
    public var wantsAsking: Bool { reason == .awaitingDecision || !unaskedKinds.isEmpty }

    /// Kinds in reporting order.
    static let reportedKinds: [PolicyDimension] = [.wifi, .wwan, .ethernet, .other, .metered, .roaming]

    public static func compute(app: String, matchedBy: MatchedBy, permissions: PermissionSet,
                               network: NetworkState, ready: Bool) -> Verdict {
        compute(app: app, matchedBy: matchedBy, effective: EffectivePermissions(permissions: permissions),
                network: network, ready: ready)
    }

    /// The verdict is true to the kernel's routing: available only when every family the kernel would route
    /// the app's traffic by leaves through a usable link of a kind it may use (an app allowed on Wi-Fi is not
    /// "ok" while its IPv6 would go out by cellular), and at least one does.
    public static func compute(app: String, matchedBy: MatchedBy, effective: EffectivePermissions,
                               network: NetworkState, ready: Bool) -> Verdict {
        let permissions = effective.permissions
        var v = Verdict(app: app, matchedBy: matchedBy, permissions: permissions, sources: effective.sources,
                        available: false, reason: .starting, via: nil, egress: [:], bindTo: nil, kinds: Kinds())
        guard ready else { return v }
        func allowed(_ l: Link) -> Bool { permissions.allows(l) }
        let usable = network.usableLinks
        var denied: Set<PolicyDimension> = [], pending: Set<PolicyDimension> = []
        var working: Link?, leaking = false
        for family in AddressFamily.allCases {
            switch network.egress[family] {
            case nil: break
            case let .blocked(b)?: v.egress[family] = .blocked(b)
            case let .link(index)?:
                guard let l = network.link(index: index) else { break }
                v.egress[family] = .link(l, allowed: allowed(l))
                // Traffic to a link without carrier goes nowhere: it neither works nor leaks.
                guard l.usable, l.kind != .loopback else { break }
                if allowed(l) { working = working ?? l } else { leaking = true }
            }
        }
        for link in usable {
            // Until a decision exists, `ask` is not allowed; a decision helps only on a link nothing denies
            // (a Wi-Fi set to ask on a hotspot kept off by Metered=deny is not worth asking about).
            let blocking = permissions.blocking(link)
            if blocking.contains(where: { $0.1 == .deny }) {
                for (d, p) in blocking where p == .deny { denied.insert(d) }
            } else {
                for (d, _) in blocking { pending.insert(d) }
            }
        }
        v.kinds.denied = reportedKinds.filter(denied.contains)
        v.kinds.pending = reportedKinds.filter(pending.contains)
        if let working, !leaking {
            v.available = true
            v.reason = .ok
            v.via = working
        } else if usable.isEmpty {
            v.reason = .noNetwork
        } else if let bind = network.best(of: usable.lazy.filter(allowed)) {
            v.reason = .routedElsewhere
            v.bindTo = bind
        } else {
            // Its budget alone is what a new period or a reset would open.
            let budget = effective.sources[.metered] == .budget && denied.contains(.metered)
            v.reason = !pending.isEmpty ? .awaitingDecision : budget ? .budgetExhausted : .denied
        }
        return v
    }

    /// The verdict's members, among a reply's own (QUERY, WAIT, APPS, DECIDE). `matchedBy: false` for app events,
    /// which describe the app rather than how one asker was recognised.
    /// `message: false` where the reply's own `message` says it (WAIT's time-out).
    public func write(to s: inout JSONWriter, matchedBy withMatchedBy: Bool = true, message withMessage: Bool = true) {
        s.field("app", app)
        face.write(to: &s)
        if withMatchedBy { s.field("matched_by", matchedBy.rawValue) }
        s.field("available", available)
        s.field("reason", reason.rawValue)
        if let l = via {
            s.object("via") { l.writeReference(to: &$0) }
        } else {
            s.field("via", nil as String?)
        }
        s.object("egress") {
            for family in AddressFamily.allCases {
                $0.object(family.key, egress[family]) { w, route in
                    switch route {
                    case let .link(l, allowed):
                        l.writeReference(to: &w)
                        w.field("usable", l.usable)
                        w.field("allowed", allowed)
                    case let .blocked(b):
                        w.field("blocked", b.rawValue)
                    }
                }
            }
        }
        s.object("bind_to", bindTo) { $1.writeReference(to: &$0) }
        s.field("denied_kinds", strings: kinds.denied.lazy.map(\.rawValue))
        s.field("pending_kinds", strings: kinds.pending.lazy.map(\.rawValue))
        s.object("permissions") {
            for k in PermissionSet.dimensions { $0.field(k.dimension.key, literal: permissions[k.dimension].literal) }
        }
        s.object("sources") {
            for k in PermissionSet.dimensions { $0.field(k.dimension.key, literal: (sources[k.dimension] ?? .policy).literal) }
        }
        enforcement.write(to: &s)
        if let budget { s.object("budget") { budget.write(to: &$0) } }
        if withMessage { s.field("message", message) }
    }
}

/// An app's `MeteredBudget=` as a verdict reports it: how much of it is used this period, and whether the kernel
/// holds the app to it.
public struct BudgetFact: Equatable, Sendable {
    public var limit: UInt64
    /// Bytes both ways over metered links this period, as last read from the kernel.
    public var used: UInt64
    public var exhausted: Bool
    /// The kernel refuses the app's metered traffic at the budget (Mode=block or steer, the counting rules in force,
    /// and the app has a uid or unit the rules tag); otherwise the budget is advice.
    public var enforced: Bool
    /// The current period: its first day, and the first day of the next.
    public var periodStart: CivilDate?
    public var periodEnd: CivilDate?
    /// `used` is written only to those who may see the app's usage (docs/USAGE.md, "Privacy").
    public var usedShown = true

    public init(limit: UInt64, used: UInt64, exhausted: Bool, enforced: Bool, periodStart: CivilDate?, periodEnd: CivilDate?) {
        self.limit = limit; self.used = used; self.exhausted = exhausted; self.enforced = enforced
        self.periodStart = periodStart; self.periodEnd = periodEnd
    }

    func write(to w: inout JSONWriter) {
        w.field("limit", limit)
        if usedShown { w.field("used", used) }
        w.field("exhausted", exhausted)
        w.field("enforced", enforced)
        w.field("period_start", periodStart?.description)
        w.field("period_end", periodEnd?.description)
    }
}
