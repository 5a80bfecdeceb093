/// Events out to subscribers, and prompts to agents.
extension Engine {
    /// Each event's members are written once; every subscriber that wants it gets its own head before them.
    func push(_ events: [Event]) {
        let subscribers = sessions.values.filter { $0.subscription != nil }
        guard !subscribers.isEmpty else { return }
        for event in events {
            var tail: Range<Int>?
            for s in subscribers where s.subscription!.wants(event) {
                let shared = tail ?? out.write { b in
                    var w = JSONWriter(continuing: b)
                    event.writeMembers(to: &w)
                    w.close()
                    b.append(0x0A)
                }
                tail = shared
                let head = out.write { s.subscription!.writeHead(event.name, into: $0) }
                out.append(.event(s.id, head: head, tail: shared))
            }
        }
    }

    /// One prompt per app and kind, to the agents; with none, the app is denied those kinds and the log says so
    /// once per app and kind until an agent comes (a headless device must not fill its log).
    func raisePrompts(_ v: Verdict, identity: PeerIdentity?) {
        guard state.agents > 0 else {
            for kind in v.unaskedKinds where unaskedLogged.count <= Self.unaskedLogLimit {
                guard unaskedLogged.insert("\(v.app) \(kind.rawValue)").inserted else { continue }
                if unaskedLogged.count > Self.unaskedLogLimit {
                    log(.notice, "more apps asked with no agent to prompt; not logging each until an agent comes")
                    break
                }
                log(.notice, "\(v.app) may not use \(kind.rawValue), which its policy sets to ask: no agent is listening "
                    + "to ask the user (run 'netpermctl agent', or 'netpermctl decide \(v.app) \(kind.rawValue) allow')")
            }
            return
        }
        for p in state.prompts.raise(for: v, identity: identity, network: state.network) {
            log(.info, "\(p.app) wants to use \(p.kind.rawValue) via \(p.link)\(p.over.map { " over " + $0 } ?? ""): prompt \(p.id) sent to \(state.agents) agent(s)")
            pendingEvents.append(.prompt(p))
            _ = armTimer(.promptExpiry(promptID: p.id), microseconds: UInt64(state.config.promptTimeoutSec) * 1_000_000)
        }
    }
}
