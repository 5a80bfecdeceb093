/// Events out to subscribers, and prompts to agents.
extension Engine {
    /// Each event's members are written once; every subscriber that wants it gets its own head before them.
    func push(_ events: [Event]) {
        let subscribers = orderedSessions { $0.subscription != nil }
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
            for kind in v.unaskedKinds { logUnasked(app: v.app, kind: kind, blocked: false) }
            return
        }
        for p in state.prompts.raise(for: v, identity: identity, network: state.network) { sendPrompt(p) }
    }

    /// Once per app and kind until an agent comes, and for at most `unaskedLogLimit` of them.
    func logUnasked(app: String, kind: PolicyDimension, blocked: Bool) {
        guard unaskedLogged.count <= Self.unaskedLogLimit,
              unaskedLogged.insert("\(app) \(kind.rawValue)").inserted else { return }
        if unaskedLogged.count > Self.unaskedLogLimit {
            log(.notice, "more apps asked with no agent to prompt; not logging each until an agent comes")
            return
        }
        log(.notice, "\(app) may not use \(kind.rawValue), which its policy sets to ask: "
            + (blocked ? "its traffic was rejected and " : "") + "no agent is listening "
            + "to ask the user (run 'netpermctl agent', or 'netpermctl decide \(app) \(kind.rawValue) allow')")
    }

    func sendPrompt(_ p: Prompt) {
        log(.info, "\(p.app) wants to use \(p.kind.rawValue) via \(p.link)\(p.over.map { " over " + $0 } ?? "")"
            + (p.blocked ? " (its traffic was rejected)" : "") + ": prompt \(p.id) sent to \(state.agents) agent(s)")
        pendingEvents.append(.prompt(p))
        _ = armTimer(.promptExpiry(promptID: p.id), microseconds: UInt64(state.config.promptTimeoutSec) * 1_000_000)
    }

    /// The kernel rejected a packet of an app whose kind is pending (Mode=block logs them, at most 5
    /// a second per app and kind): the prompt is raised as if the app had asked. Nothing when the kind is no
    /// longer pending (decided, or the policy changed since the rules were loaded), a prompt is open, or one for
    /// it expired less than `blockedQuietSec` ago: a packet never raises more than one prompt.
    func blocked(app id: String, kind: PolicyDimension) {
        guard let app = state.config.app(named: id),
              state.decisions.apply(to: state.config.permissions(for: app), app: id).permissions[kind] == .ask
        else {
            log(.debug, "enforcement: a rejected packet of \(id) (\(kind.rawValue)), which is not pending")
            return
        }
        guard state.agents > 0 else { return logUnasked(app: id, kind: kind, blocked: true) }
        let key = "\(id) \(kind.rawValue)"
        guard !quietBlocked.contains(key),
              let p = state.prompts.raise(app: id, kind: kind, identity: nil, network: state.network, blocked: true)
        else { return }
        sendPrompt(p)
    }
}

extension Event {
    /// App events in the order of their apps' ids (what one change's app events are sorted by).
    static func byApp(_ a: Event, _ b: Event) -> Bool {
        guard case let .app(x) = a, case let .app(y) = b else { return false }
        return x.app < y.app
    }
}
