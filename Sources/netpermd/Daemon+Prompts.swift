import NetpermCore
import NetpermIO

/// Prompts to agents, and the decisions that answer them.
extension Daemon {
    /// Privileged subscribers of `prompts`, and `plus` when it is one (a subscriber being added).
    func agentCount(plus newcomer: Session? = nil) -> Int {
        var n = newcomer.map { isAgent($0) ? 1 : 0 } ?? 0
        for s in subscribers.values where isAgent(s) { n += 1 }
        return n
    }

    private func isAgent(_ s: Session) -> Bool {
        !s.client.isClosed && s.caller.privileged && s.subscription?.topics.contains(.prompts) == true
    }

    /// The one setter for the agent count outside a policy load. The first agent arriving or the last leaving
    /// changes every undecided `ask` (prompted, or denied for want of someone to ask): app events follow.
    func countAgents(plus newcomer: Session? = nil) {
        let old = state.agents, n = agentCount(plus: newcomer)
        guard n != old else { return }
        state.agents = n
        guard (old == 0) != (n == 0) else { return }
        Log.info(n > 0 ? "an agent listens for prompts: undecided 'ask' now prompts"
                       : "no agent listens for prompts: undecided 'ask' is denied until one does")
        if n > 0 { unaskedLogged = [] }
        emit(tracker.reset(state: state, extra: extraMatches()))
    }

    /// One prompt per app and kind, to the agents; with none, the app is denied those kinds and the log says
    /// so once per app and kind until an agent comes (a headless device must not fill its log).
    func raisePrompts(_ v: Verdict, identity: PeerIdentity?) {
        guard state.agents > 0 else {
            for kind in v.unaskedKinds where unaskedLogged.count <= Self.unaskedLogLimit {
                guard unaskedLogged.insert("\(v.app) \(kind.rawValue)").inserted else { continue }
                if unaskedLogged.count > Self.unaskedLogLimit {
                    Log.notice("more apps asked with no agent to prompt; not logging each until an agent comes")
                    break
                }
                Log.notice("\(v.app) may not use \(kind.rawValue), which its policy sets to ask: no agent is listening "
                    + "to ask the user (run 'netpermctl agent', or 'netpermctl decide \(v.app) \(kind.rawValue) allow')")
            }
            return
        }
        let raised = state.prompts.raise(for: v, identity: identity, network: state.network)
        for p in raised {
            Log.info("\(p.app) wants to use \(p.kind.rawValue) via \(p.link): prompt \(p.id) sent to \(state.agents) agent(s)")
            emit([.prompt(p)])
            promptTimers[p.id] = try? loop.addTimer(afterMicroseconds: UInt64(state.config.promptTimeoutSec) * 1_000_000) {
                [unowned self] in
                self.promptTimers[p.id] = nil
                guard let closed = self.state.prompts.close(id: p.id) else { return }
                Log.info("prompt \(p.id) for \(p.app) (\(p.kind.rawValue)) expired unanswered")
                self.emit([.promptExpired(closed)])
            }
        }
    }

    private func match(forApp id: String) -> AppMatch {
        if let app = state.config.app(named: id) { return AppMatch(id: id, matchedBy: .name, app: app) }
        return AppMatch(id: id, matchedBy: .name, app: nil)
    }

    /// Stores a decision (lasting ones on disk before the reply), closes the prompts it answers, and tells
    /// subscribers about the new verdicts.
    func decide(app: String, kind: LinkKind, _ p: Permission, once: Bool) -> JSON {
        let before = state.decisions
        state.decisions.set(app, kind, p, once: once)
        if !once {
            do { try decisionStore.save(state.decisions) } catch {
                state.decisions = before
                Log.err("cannot store the decision for \(app) (\(kind.rawValue)): \(error)")
                return ProtocolError(.internalError, "cannot store the decision: \(error)").reply
            }
        }
        Log.info("decision: \(app) may \(p == .allow ? "use" : "not use") \(kind.rawValue)\(once ? " (once)" : "")")
        var events: [Event] = state.prompts.close(app: app, kind: kind).map { prompt in
            promptTimers.removeValue(forKey: prompt.id)?.cancel()
            return .promptAnswered(prompt, p, once: once)
        }
        events += tracker.reset(state: state, extra: extraMatches())
        emit(events)
        return Processor.decideReply(app: app, kind: kind, p, once: once, state: state, match: match(forApp: app))
    }

    func forget(app: String, kind: LinkKind?) -> JSON {
        let before = state.decisions
        let removed = state.decisions.forget(app, kind: kind)
        if removed {
            do { try decisionStore.save(state.decisions) } catch {
                state.decisions = before
                return ProtocolError(.internalError, "cannot store the decisions: \(error)").reply
            }
            Log.info("forgot the decisions of \(app)\(kind.map { " for \($0.rawValue)" } ?? "")")
            emit(tracker.reset(state: state, extra: extraMatches()))
        }
        return .object([("ok", true), ("forgotten", .bool(removed)), ("app", .string(app)),
                       ("kind", kind.map { .string($0.rawValue) } ?? .null)])
    }
}
