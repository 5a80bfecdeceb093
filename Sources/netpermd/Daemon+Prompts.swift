import NetpermCore
import NetpermIO

/// Prompts to agents, and the decisions that answer them.
extension Daemon {
    private var agentCount: Int {
        subscribers.values.filter { $0.caller.privileged && $0.subscription?.topics.contains(.prompts) == true }.count
    }

    /// One prompt per app and kind; with no agent it expires at once (nothing is stored either way).
    func raisePrompts(_ v: Verdict, identity: PeerIdentity?) {
        let raised = state.prompts.raise(for: v, identity: identity, network: state.network)
        guard !raised.isEmpty else { return }
        let agents = agentCount
        for p in raised {
            if agents == 0 {
                state.prompts.close(id: p.id)
                Log.info("\(p.app) wants to use \(p.kind.rawValue) via \(p.link): no agent to ask")
                emit([.promptExpired(p)])
                continue
            }
            Log.info("\(p.app) wants to use \(p.kind.rawValue) via \(p.link): prompt \(p.id) sent to \(agents) agent(s)")
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
