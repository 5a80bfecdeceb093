// SPDX-License-Identifier: LGPL-2.1-or-later
/// "Why not", in a person's words: the one table every face shows (the verdict's `message`; the GLib module's
/// `can_reach()` error, netpermctl's `why:`), so that they cannot disagree. Pure: a verdict's facts in (the engine's
/// `Verdict.message` gathers them), a sentence out. `app` is the app as a person knows it (its desktop name, else
/// its id).
public enum Explanation {
    /// A kind the app may not use: where its permission comes from, and whether that permission is `ask`.
    public struct KeptOff: Equatable, Sendable {
        public var dimension: PolicyDimension
        public var source: PermissionSource
        public var asks: Bool
        public init(_ dimension: PolicyDimension, source: PermissionSource, asks: Bool) {
            self.dimension = dimension; self.source = source; self.asks = asks
        }
    }

    /// What keeps a `routed-elsewhere` app off, as its sentence tells it.
    public enum Route: Equatable, Sendable {
        /// The kernel routes its traffic by this usable link, of a kind it may not use.
        case keptOff(link: String, KeptOff)
        /// Into a route that drops it.
        case blocked(RouteBlock)
        /// By this link, which is not usable.
        case unusable(link: String)
        /// No route at all.
        case none
    }

    public static let starting = "netpermd is still starting"

    public static func noNetwork(_ app: String) -> String { "\(app) cannot use the network: no link is usable" }

    /// "maps may not use wwan: its policy denies it", or with several "... wifi (why) or wwan (why)".
    public static func denied(_ app: String, _ kinds: [KeptOff]) -> String {
        guard !kinds.isEmpty else { return "\(app) may not use the network: no usable link is one it may use" }
        if kinds.count == 1 { return "\(app) may not use \(text(kinds[0].dimension)): \(whyNot(kinds[0]))" }
        return "\(app) may not use " + list(kinds.map { "\(text($0.dimension)) (\(whyNot($0)))" })
    }

    public static func awaitingDecision(_ app: String, pending: [PolicyDimension]) -> String {
        let kinds = pending.isEmpty ? "the network" : list(pending.map(text))
        return "\(app) may not use \(kinds) yet: waiting for your answer"
    }

    /// `limit`: the budget, when known; `periodEnd`: the day the next period starts.
    public static func budgetExhausted(_ app: String, limit: UInt64?, periodEnd: String?) -> String {
        guard let limit else { return "\(app) may not use metered links: its metered budget for this period is used up" }
        // Used up is used up: the counters may stop short of the budget (the kernel refused the packet that
        // would have crossed it), and "used 3 KiB of 4 KiB" would read as room left.
        return "\(app) may not use metered links: it has used up its metered budget of \(ByteSize.text(limit)) "
            + "for this period" + (periodEnd.map { "; they open again on \($0)" } ?? "")
    }

    /// routed-elsewhere: what keeps the app off, and the link it could bind to instead.
    public static func routedElsewhere(_ app: String, _ route: Route, bindTo: String?) -> String {
        let instead = bindTo.map { "; it may use \($0)" } ?? ""
        switch route {
        case let .keptOff(link, k):
            return "\(app) may not use \(text(k.dimension)): \(whyNot(k)) (the kernel routes its traffic by \(link)\(instead))"
        case let .blocked(b): return "the kernel routes \(app)'s traffic into \(b.withArticle) route\(instead)"
        case let .unusable(link): return "the kernel routes \(app)'s traffic by \(link), which is not usable\(instead)"
        case .none: return "the kernel has no route for \(app)'s traffic\(instead)"
        }
    }

    /// Said after the reason, toward a REACH's destination: the link it would leave by.
    public static func toward(_ destination: String, by link: String) -> String {
        " (the kernel sends traffic for \(destination) by \(link))"
    }

    /// "metered links" for `metered`, "roaming links" for `roaming`, the kind's name otherwise.
    public static func text(_ d: PolicyDimension) -> String {
        switch d {
        case .metered: return "metered links"
        case .roaming: return "roaming links"
        case .wifi, .wwan, .ethernet, .other: return d.rawValue
        }
    }

    /// "a", "a or b", "a, b or c".
    public static func list(_ items: [String]) -> String {
        guard items.count > 1 else { return items.first ?? "" }
        return items.dropLast().joined(separator: ", ") + " or " + items.last!
    }

    /// Why the app may not use a kind, from its effective permission and where that comes from.
    public static func whyNot(_ k: KeptOff) -> String {
        switch k.source {
        case .noAgent: return "its policy says ask and no agent is there to ask the user"
        case _ where k.asks: return "its policy says ask and the user has not decided"
        case .decision: return "a decision denies it"
        case .once: return "a decision denies it \(PromptChoice.onceUntil)"
        case .userDecision: return "its user's decision denies it"
        case .userOnce: return "its user's decision denies it \(PromptChoice.onceUntil)"
        case .budget: return "its metered budget for this period is used up"
        case .policy: return "its policy denies it"
        }
    }
}
