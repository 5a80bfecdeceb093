// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// REACH ADDRESS [SECONDS]: the caller's own app toward one destination (GLib's can_reach). The kernel is asked where
/// that destination's traffic goes (`Effect.lookUpRoute`, answered by `Input.routed`); an app the link's setting
/// asks about raises the prompt, as its first connection would, and with SECONDS the reply waits for the answer.
extension Engine {
    /// `text`: the address as the client wrote it; `wait`: SECONDS, in microseconds.
    func reach(_ address: IPAddress, text: String, wait: UInt64?, session: Session) {
        let own = ownVerdict(session)
        guard state.ready else {
            reply(session.id) { w in w.field("ok", true); w.field("destination", text); own.write(to: &w) }
            return
        }
        changeSession(session) {
            session.reaching = Reaching(destination: address, text: text, wait: wait, timer: nil, route: nil)
        }
        out.append(.hold(session.id))
        out.append(.lookUpRoute(session.id, RouteQuestion(destination: address, uid: session.identity.uid, mark: steeringMark(own))))
    }

    /// The caller's own app as its uid's processes have it.
    private func ownVerdict(_ session: Session) -> Verdict {
        let caller = session.caller
        var v = forCaller(verdict(for: caller.match, uid: caller.ownUID), caller)
        v.enforcement = ownEnforcement(v.enforcement, caller)
        return v
    }

    /// The kernel answered where a REACH's destination goes (`error`: it could not be asked).
    func routed(_ id: ConnectionID, _ route: Egress?, error: EdgeError?) {
        guard let session = clients.sessions[id], var r = session.reaching, r.route == nil else { return }
        if let error {
            log(.warning, "REACH \(r.text): the route lookup failed: \(error)")
            changeSession(session) { session.reaching = nil }
            replyError(id, ProtocolError(.internalError, "cannot ask the kernel where \(r.text) is routed: \(error)"))
            out.append(.resume(id))
            return
        }
        r.route = .some(route)
        changeSession(session) { session.reaching = r }
        let v = reachVerdict(session, r)
        if v.wantsAsking, case let .link(l, _)? = v.egress[r.destination.family] {
            raisePrompts(v, identity: session.identity, link: l, destination: r.text)
        }
        if let wait = r.wait, isAsked(v) {
            session.reaching?.timer = armTimer(.reachTimeout(id), microseconds: wait)
            clients.reachesHeld += 1
            log(.debug, "pid \(session.identity.pid) waits for an answer to reach \(r.text) (up to \(wait / 1000) ms)")
        } else {
            finishReach(session)
        }
    }

    /// Awaiting a decision with a prompt open for it: a held REACH waits for its answer.
    private func isAsked(_ v: Verdict) -> Bool {
        v.reason == .awaitingDecision && state.prompts.find(app: v.app, scope: v.uid) != nil
    }

    private func reachVerdict(_ session: Session, _ r: Reaching) -> Verdict {
        var v = ownVerdict(session).toward(r.destination.family, route: r.route ?? nil, network: state.network)
        v.destination = r.text
        return v
    }

    /// Replies to a REACH whose route is known, with its verdict as it stands now.
    func finishReach(_ session: Session) {
        guard let r = session.reaching, r.route != nil else { return }
        if let t = r.timer {
            cancelTimer(t)
            clients.reachesHeld -= 1
        }
        changeSession(session) { session.reaching = nil }
        let v = reachVerdict(session, r)
        reply(session.id) { w in
            w.field("ok", true)
            w.field("destination", r.text)
            v.write(to: &w)
        }
        out.append(.resume(session.id))
    }

    /// Held REACHes whose prompt was answered, expired or withdrawn (or whose verdict no longer waits for one).
    func answerReachers() {
        // Every change settles here: with thousands of subscribers and no REACH held, no pass over them.
        guard clients.reachesHeld > 0 else { return }
        for session in orderedSessions(where: { $0.reaching?.timer != nil }) {
            guard let r = session.reaching, !isAsked(reachVerdict(session, r)) else { continue }
            finishReach(session)
        }
    }
}
