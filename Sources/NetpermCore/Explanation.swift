// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// "Why not", in a person's words: the one table every face shows (the verdict's `message`; the GLib module's
/// `can_reach()` error, netpermctl's `why:`), so that they cannot disagree. Pure: the verdict in, a sentence out.
extension Verdict {
    /// nil when the app may use the network. Toward a REACH's destination, the link it would leave by is said too.
    public var message: String? {
        guard let m = reasonMessage else { return nil }
        guard let destination, reason != .routedElsewhere, reason != .starting,
              let link = AddressFamily.allCases.lazy.compactMap({ f -> Link? in
                  if case let .link(l, _)? = self.egress[f] { return l } else { return nil }
              }).first
        else { return m }
        return m + " (the kernel sends traffic for \(destination) by \(link.name))"
    }

    private var reasonMessage: String? {
        switch reason {
        case .ok: return nil
        case .noNetwork: return "\(shownName) cannot use the network: no link is usable"
        case .denied: return kindsMessage(deniedKinds)
        case .awaitingDecision:
            let kinds = pendingKinds.isEmpty ? "the network" : Self.list(pendingKinds.map(Self.text))
            return "\(shownName) may not use \(kinds) yet: waiting for your answer"
        case .routedElsewhere: return routedElsewhereMessage
        case .budgetExhausted:
            guard let b = budget else {
                return "\(shownName) may not use metered links: its metered budget for this period is used up"
            }
            // Used up is used up: the counters may stop short of the budget (the kernel refused the packet that
            // would have crossed it), and "used 3 KiB of 4 KiB" would read as room left.
            return "\(shownName) may not use metered links: it has used up its metered budget of \(ByteSize.text(b.limit)) "
                + "for this period" + (b.periodEnd.map { "; they open again on \($0)" } ?? "")
        case .starting: return "netpermd is still starting"
        }
    }

    /// The app as a person knows it: its desktop file's name, else its id.
    var shownName: String { name ?? app }

    /// "metered links" for `metered`, "roaming links" for `roaming`, the kind's name otherwise.
    static func text(_ d: PolicyDimension) -> String {
        switch d {
        case .metered: return "metered links"
        case .roaming: return "roaming links"
        case .wifi, .wwan, .ethernet, .other: return d.rawValue
        }
    }

    /// "a", "a or b", "a, b or c".
    static func list(_ items: [String]) -> String {
        guard items.count > 1 else { return items.first ?? "" }
        return items.dropLast().joined(separator: ", ") + " or " + items.last!
    }

    /// Why the app may not use `d`, from its effective permission and where that comes from.
    func whyNot(_ d: PolicyDimension) -> String {
        switch sources[d] ?? .policy {
        case .noAgent: return "its policy says ask and no agent is there to ask the user"
        case _ where permissions[d] == .ask: return "its policy says ask and the user has not decided"
        case .decision: return "a decision denies it"
        case .once: return "a decision denies it \(PromptChoice.onceUntil)"
        case .userDecision: return "its user's decision denies it"
        case .userOnce: return "its user's decision denies it \(PromptChoice.onceUntil)"
        case .budget: return "its metered budget for this period is used up"
        case .policy: return "its policy denies it"
        }
    }

    /// "maps may not use wwan: its policy denies it", or with several "... wifi (why) or wwan (why)".
    func kindsMessage(_ kinds: [PolicyDimension]) -> String {
        guard !kinds.isEmpty else { return "\(shownName) may not use the network: no usable link is one it may use" }
        if kinds.count == 1 { return "\(shownName) may not use \(Self.text(kinds[0])): \(whyNot(kinds[0]))" }
        return "\(shownName) may not use " + Self.list(kinds.map { "\(Self.text($0)) (\(whyNot($0)))" })
    }

    /// routed-elsewhere: what keeps the app off (a usable link it may not use, a blocking route, a link without
    /// carrier, no route), and the link it could bind to instead.
    var routedElsewhereMessage: String {
        let instead = bindTo.map { "; it may use \($0.name)" } ?? ""
        for family in AddressFamily.allCases {
            guard case let .link(l, allowed)? = egress[family], l.usable, !allowed, l.kind != .loopback else { continue }
            let d = permissions.blocking(l).first?.0 ?? .metered
            return "\(shownName) may not use \(Self.text(d)): \(whyNot(d)) (the kernel routes its traffic by \(l.name)\(instead))"
        }
        for family in AddressFamily.allCases {
            switch egress[family] {
            case let .blocked(b)?: return "the kernel routes \(shownName)'s traffic into a \(b.rawValue) route\(instead)"
            case let .link(l, _)?: return "the kernel routes \(shownName)'s traffic by \(l.name), which is not usable\(instead)"
            case nil: continue
            }
        }
        return "the kernel has no route for \(shownName)'s traffic\(instead)"
    }
}
