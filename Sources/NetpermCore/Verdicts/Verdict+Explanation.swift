// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// A verdict's "why not": its facts handed to the one table of sentences (NetpermProtocol's `Explanation`).
extension Verdict {
    /// nil when the app may use the network. Toward a REACH's destination, the link it would leave by is said too.
    public var message: String? {
        guard let m = reasonMessage else { return nil }
        guard let destination, reason != .routedElsewhere, reason != .starting,
              let link = AddressFamily.allCases.lazy.compactMap({ f -> Link? in
                  if case let .link(l, _)? = self.egress[f] { return l } else { return nil }
              }).first
        else { return m }
        return m + Explanation.toward(destination, by: link.name)
    }

    private var reasonMessage: String? {
        switch reason {
        case .ok: return nil
        case .noNetwork: return Explanation.noNetwork(shownName)
        case .denied: return Explanation.denied(shownName, kinds.denied.map(keptOff))
        case .awaitingDecision: return Explanation.awaitingDecision(shownName, pending: kinds.pending)
        case .routedElsewhere: return Explanation.routedElsewhere(shownName, routedElsewhere, bindTo: bindTo?.name)
        case .budgetExhausted:
            return Explanation.budgetExhausted(shownName, limit: budget?.limit, periodEnd: budget?.periodEnd.map { "\($0)" })
        case .starting: return Explanation.starting
        }
    }

    /// The app as a person knows it: its desktop file's name, else its id.
    var shownName: String { face.name ?? app }

    /// Why the app may not use `d`: its effective permission and where that comes from.
    func keptOff(_ d: PolicyDimension) -> Explanation.KeptOff {
        Explanation.KeptOff(d, source: sources[d] ?? .policy, asks: permissions[d] == .ask)
    }

    /// routed-elsewhere: what keeps the app off (a usable link it may not use, a blocking route, a link without
    /// carrier, no route).
    var routedElsewhere: Explanation.Route {
        for family in AddressFamily.allCases {
            guard case let .link(l, allowed)? = egress[family], l.usable, !allowed, l.kind != .loopback else { continue }
            return .keptOff(link: l.name, keptOff(permissions.blocking(l).first?.0 ?? .metered))
        }
        for family in AddressFamily.allCases {
            switch egress[family] {
            case let .blocked(b)?: return .blocked(b)
            case let .link(l, _)?: return .unusable(link: l.name)
            case nil: continue
            }
        }
        return .none
    }
}
