// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// REACH: may the app reach one destination now, judged by the link the kernel would send that destination's traffic
/// by (its route lookup, with the app's uid and Mode=steer mark), as the kernel's rules will judge the connection.
public struct RouteQuestion: Equatable, Sendable {
    public var destination: IPAddress
    /// The asking process's uid (`ip route get ... uid`): rules by uid route its traffic.
    public var uid: UInt32
    /// Mode=steer: its sockets' mark, which routes them by its table.
    public var mark: UInt32?

    public init(destination: IPAddress, uid: UInt32, mark: UInt32?) {
        self.destination = destination; self.uid = uid; self.mark = mark
    }
}

/// A held REACH: what it asked, the kernel's answer once it came, and how long it may wait for a person's answer.
struct Reaching {
    var destination: IPAddress
    var text: String
    /// SECONDS: hold the reply while the person is asked (nil: answer at once).
    var wait: UInt64?
    var timer: TimerID?
    /// The route lookup's answer: nil until it came; `.some(nil)`: no route.
    var route: Egress??
}

extension Verdict {
    /// The app's verdict (`self`: its permissions, sources, budget, enforcement) toward one destination whose traffic
    /// the kernel sends by `route` (nil: it has no route for it). Loopback is always reachable (the rules never see
    /// it); a link needs its administrative state and carrier (not a default route: a local subnet's host is
    /// reached without one). Not reachable: `denied` or `awaiting-decision` for the link's kind and metered setting,
    /// `budget-exhausted`, or `routed-elsewhere` (`egress` says where: a blocking route, a link without carrier, or
    /// no route at all).
    public func toward(_ family: AddressFamily, route: Egress?, network: NetworkState) -> Verdict {
        guard reason != .starting else { return self }
        var v = self
        v.destination = nil
        v.available = false
        v.via = nil
        v.bindTo = nil
        v.egress = [:]
        v.kinds.denied = []
        v.kinds.pending = []
        v.reason = .routedElsewhere
        switch route {
        case nil:
            break
        case let .blocked(b)?:
            v.egress[family] = .blocked(b)
        case let .link(index)?:
            guard let l = network.link(index: index) else { break }
            let loopback = l.kind == .loopback
            let allowed = loopback || permissions.allows(l)
            v.egress[family] = .link(l, allowed: allowed)
            guard loopback || (l.status.adminUp && l.status.carrier) else { break }
            if allowed {
                v.available = true
                v.reason = .ok
                v.via = l
                break
            }
            let blocking = permissions.blocking(l)
            let denied = blocking.filter { $0.1 != .ask }.map(\.0)
            if denied.isEmpty {
                v.kinds.pending = Self.reportedKinds.filter { d in blocking.contains { $0.0 == d } }
                v.reason = .awaitingDecision
            } else {
                v.kinds.denied = Self.reportedKinds.filter(denied.contains)
                v.reason = denied == [.metered] && sources[.metered] == .budget ? .budgetExhausted : .denied
            }
        }
        return v
    }
}
