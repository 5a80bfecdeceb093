import NetpermControl
import NetpermCore
import NetpermSystemd

/// Events out to subscribers, and the replies of WAIT.
extension Daemon {
    /// Sends each event to the subscribers that want it (encoded once per event), then answers waiters.
    func emit(_ events: [Event]) {
        if !subscribers.isEmpty {
            let subs = Array(subscribers.values)
            for event in events {
                let tail = event.encodedTailBytes()
                for session in subs where !session.client.isClosed && session.subscription?.wants(event) == true {
                    // The subscriber's own `{"event":...,"seq":N`, then the tail encoded once for everyone.
                    guard let head = session.subscription?.line(event: event.name, tail: "") else { continue }
                    session.client.push(head: head, tail: tail)
                }
            }
        }
        if !waiters.isEmpty {
            answerWaiters()
            // An app waiting for itself keeps asking: a verdict that now awaits a decision raises prompts.
            for case let .app(v) in events where v.wantsAsking {
                if let s = waiters.values.first(where: { $0.waiting?.own == true && $0.waiting?.match.id == v.app }) {
                    raisePrompts(v, identity: s.identity)
                }
            }
        }
        if state.ready && !events.isEmpty {
            let facts = summaryFacts
            if facts != lastStatus { lastStatus = facts; Notify.status(summary) }
        }
    }

    private func answerWaiters() {
        for session in Array(waiters.values) {
            guard let w = session.waiting, let v = tracker.verdict(w.match.id), v.available else { continue }
            finishWait(session, Processor.waitDone(v.renamed(w.match.id, w.match.matchedBy)))
        }
    }

    func finishWait(_ session: Session, _ reply: JSON) {
        session.waiting?.timer?.cancel()
        let app = session.waiting?.match.id
        session.waiting = nil
        waiters[ObjectIdentifier(session.client)] = nil
        if let app { untrackIfUnwanted([app]) }
        session.client.reply(reply)
    }

    /// An app outside the policy is tracked only while someone listens to it or waits for it.
    func untrackIfUnwanted(_ apps: [String]) {
        let stillWanted = Set(extraMatches().map(\.id))
        for app in apps where !stillWanted.contains(app) { tracker.untrack(app, state: state) }
    }

    func stopping() {
        for session in subscribers.values {
            guard var sub = session.subscription else { continue }
            session.client.push(sub.line(event: "stopping", tail: "}\n"))
            session.subscription = sub
        }
    }
}
