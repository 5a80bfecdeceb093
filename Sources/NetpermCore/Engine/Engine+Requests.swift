/// Requests: each verb's checks, its change of state, and its reply.
extension Engine {
    func request(_ bytes: [UInt8], from session: Session) {
        // A repeated request while nothing changed gets the same bytes again.
        if let c = session.cache, c.version == version, c.line == bytes {
            let range = out.write { $0.append(c.reply) }
            out.append(.reply(session.id, range))
            return
        }
        switch RequestParser.parse(bytes) {
        case nil: return
        case let .failure(e)?: replyError(session.id, e)
        case let .success(r)?:
            if let range = perform(r, from: session) {
                session.cache = (bytes, version, Array(out[range]))
            }
        }
    }

    /// Carries out one request. Returns the reply's range when it depends only on the request, the caller and the
    /// state (then the same request in the same state may be answered from the cache).
    func perform(_ r: Request, from session: Session) -> Range<Int>? {
        let id = session.id
        let caller = session.caller
        guard r.args.count <= r.verb.maxArgs else {
            return replyError(id, ProtocolError(.badArguments, "usage: \(r.verb.usage)"))
        }
        if r.verb.isPrivileged && !caller.privileged {
            return replyError(id, ProtocolError(.permissionDenied, "\(r.verb.rawValue.uppercased()) needs root or "
                + "membership of group \(ConfigError.quote(state.config.adminGroup))"))
        }
        switch r.verb {
        case .ping:
            return reply(id) { $0.field("ok", true); $0.field("pong", true) }
        case .help:
            return reply(id) { w in
                w.field("ok", true)
                w.objects("verbs", Verb.allCases) { $0.field("verb", $1.usage); $0.field("summary", $1.summary) }
            }
        case .status:
            return reply(id) { writeStatus(to: &$0) }
        case .links:
            return reply(id) { w in
                w.field("ok", true)
                w.objects("links", state.network.links) { $1.write(to: &$0) }
            }
        case .query:
            let match: AppMatch
            switch resolveApp(r.args.first, caller: caller) {
            case let .failure(e): return replyError(id, e)
            case let .success(m): match = m
            }
            let own = caller.owns(match)
            var v = verdict(for: match)
            if own { v.enforcement = ownEnforcement(v.enforcement, caller) }
            let range = reply(id) { w in
                w.field("ok", true)
                v.write(to: &w)
                if own { w.object("identity") { caller.identity.write(to: &$0) } }
            }
            if own && v.wantsAsking {
                raisePrompts(v, identity: caller.identity)
                return nil
            }
            return range
        case .wait:
            wait(r.args, session: session)
            return nil
        case .subscribe:
            subscribe(r.args, session: session)
            return nil
        case .apps:
            return reply(id) { w in
                w.field("ok", true)
                w.objects("apps", state.config.apps) { verdict(for: AppMatch(id: $1.id, matchedBy: .name, app: $1)).write(to: &$0) }
            }
        case .reload:
            out.append(.hold(id))
            requestReload(by: id)
            return nil
        case .prompts:
            return reply(id) { w in
                w.field("ok", true)
                w.objects("prompts", state.prompts.open) { $1.write(to: &$0) }
            }
        case .decide, .forget:
            if storing != nil {
                // A decision is being written: this one waits its turn, so that it starts from that one's result.
                out.append(.hold(id))
                waitingForStore.append((id, r))
                return nil
            }
            decideOrForget(r, session: session)
            return nil
        case .metrics:
            // Never from the cache: counters move without the state changing.
            reply(id) { writeMetrics(to: &$0) }
            return nil
        case .usage:
            usageRequest(r.args, session: session)
            return nil
        case .resetUsage:
            resetUsageRequest(r.args, session: session)
            return nil
        case .quit:
            reply(id) { $0.field("ok", true); $0.field("bye", true) }
            out.append(.close(id))
            return nil
        }
    }

    /// Writes `{members}\n` as a reply to `id`; returns its range.
    @discardableResult
    func reply(_ id: ConnectionID, _ members: (inout JSONWriter) -> Void) -> Range<Int> {
        let range = out.write { b in
            var w = JSONWriter(b)
            members(&w)
            w.close()
            b.append(0x0A)
        }
        out.append(.reply(id, range))
        return range
    }

    @discardableResult
    func replyError(_ id: ConnectionID, _ e: ProtocolError) -> Range<Int> {
        reply(id) { e.write(to: &$0) }
    }

    private func writeStatus(to w: inout JSONWriter) {
        let net = state.network
        let primary = net.primary
        w.field("ok", true)
        w.field("version", DaemonState.version)
        w.field("ready", state.ready)
        w.field("agents", state.agents)
        w.field("links", net.links.count)
        w.field("available", net.available)
        w.field("primary", primary?.name)
        w.field("primary_kind", primary?.kind.rawValue)
        w.field("primary_over", primary?.over)
        w.object("egress") { e in
            for family in AddressFamily.allCases {
                e.object(family.key, net.egress[family]) { w, egress in
                    switch egress {
                    case let .link(index):
                        if let l = net.link(index: index) {
                            l.writeReference(to: &w)
                            w.field("usable", l.usable)
                        } else {
                            w.field("index", Int(index))
                        }
                    case let .blocked(b):
                        w.field("blocked", b.rawValue)
                    }
                }
            }
        }
        w.object("policy") {
            writePolicy(to: &$0)
            writeWarnings(to: &$0)
        }
        w.object("enforcement") { writeEnforcement(to: &$0) }
        w.object("usage") { writeUsageStatus(to: &$0) }
    }

    func writePolicy(to w: inout JSONWriter) {
        w.field("generation", state.policyGeneration)
        w.field("apps", state.config.apps.count)
        w.field("error", state.policyError)
    }

    /// The policy in force's warnings, as `netpermctl check` finds them: how many, and each (up to the parser's
    /// limit). STATUS's `policy` and RELOAD's reply; events leave them out, they change only with a generation.
    func writeWarnings(to w: inout JSONWriter) {
        w.field("warnings", state.policyWarningCount)
        w.objects("findings", state.policyWarnings) { $1.write(to: &$0) }
    }

    /// The app a request names: the caller's own, or (privileged callers only) one from the policy.
    func resolveApp(_ name: String?, caller: Caller) -> Result<AppMatch, ProtocolError> {
        guard let name, name != caller.match.id else { return .success(caller.match) }
        guard caller.privileged else {
            return .failure(ProtocolError(.permissionDenied, "only root or members of group "
                + "\(ConfigError.quote(state.config.adminGroup)) may name another app; leave APP out to ask about yourself "
                + "(\(caller.match.id))"))
        }
        guard let app = state.config.app(named: name) else {
            return .failure(ProtocolError(.notFound, "no [App \(name)] in the policy"))
        }
        return .success(AppMatch(id: app.id, matchedBy: .name, app: app))
    }

    // MARK: - WAIT

    private func wait(_ arguments: [String], session: Session) {
        var args = arguments
        var timeout: UInt64?
        if let last = args.last, let first = last.unicodeScalars.first, !AppPolicy.isLetter(first) {
            guard let usec = Seconds.parseMicroseconds(last) else {
                replyError(session.id, ProtocolError(.badArguments, "bad time-out \(ConfigError.quote(last)): expected seconds, e.g. 30 or 0.5"))
                return
            }
            timeout = usec
            args.removeLast()
        }
        guard args.count <= 1 else {
            replyError(session.id, ProtocolError(.badArguments, "usage: \(Verb.wait.usage)"))
            return
        }
        // `WAIT 1 2`: two numbers, not an app and a time-out.
        if let name = args.first, let c = name.unicodeScalars.first, !AppPolicy.isLetter(c) {
            replyError(session.id, ProtocolError(.badArguments, "\(ConfigError.quote(name)) is not an app id (they start with a letter); "
                + "usage: \(Verb.wait.usage)"))
            return
        }
        let match: AppMatch
        switch resolveApp(args.first, caller: session.caller) {
        case let .failure(e): replyError(session.id, e); return
        case let .success(m): match = m
        }
        let v = verdict(for: match)
        if v.available {
            reply(session.id) { $0.field("ok", true); v.write(to: &$0) }
            return
        }
        let own = session.caller.owns(match)
        log(.debug, "pid \(session.identity.pid) waits for \(own ? "its own app " : "")\(match.id)"
            + (timeout.map { " (up to \($0 / 1000) ms)" } ?? ""))
        tracker.track(match, state: state)
        let timer = timeout.map { armTimer(.waitTimeout(session.id), microseconds: $0) }
        changeListening(session) { session.waiting = Waiting(match: match, timer: timer, own: own) }
        out.append(.hold(session.id))
        if own, v.wantsAsking { raisePrompts(v, identity: session.identity) }
    }

    /// Replies to a held WAIT: the verdict once available, the time-out error with the verdict that held, or why
    /// it cannot go on.
    func finishWait(_ session: Session, timedOut: Verdict? = nil, failed: ProtocolError? = nil) {
        guard let w = session.waiting else { return }
        if let t = w.timer { cancelTimer(t) }
        changeListening(session) { session.waiting = nil }
        untrackIfUnwanted([w.match.id])
        if let failed {
            replyError(session.id, failed)
        } else if let v = timedOut {
            reply(session.id) { out in
                ProtocolError(.timeout, "\(v.app) may not use the network yet: \(v.reason.rawValue)").write(to: &out)
                v.write(to: &out)
            }
        } else {
            let v = verdict(for: w.match)
            reply(session.id) { $0.field("ok", true); v.write(to: &$0) }
        }
        out.append(.resume(session.id))
    }

    func answerWaiters() {
        for session in orderedSessions(where: { $0.waiting != nil }) {
            guard let w = session.waiting, verdict(for: w.match).available else { continue }
            finishWait(session)
        }
    }

    // MARK: - SUBSCRIBE

    private func subscribe(_ args: [String], session: Session) {
        let topics: Set<Topic>
        switch Subscription.topics(from: args) {
        case let .failure(e): replyError(session.id, e); return
        case let .success(t): topics = t
        }
        let caller = session.caller
        if topics.contains(.prompts) && !caller.privileged {
            replyError(session.id, ProtocolError(.permissionDenied, "only root or members of group "
                + "\(ConfigError.quote(state.config.adminGroup)) may subscribe to prompts"))
            return
        }
        // SUBSCRIBE again replaces the topics; seq keeps counting the connection's events.
        var sub = Subscription(topics: topics, privileged: caller.privileged, appID: caller.match.id,
                               continuing: session.subscription)
        // Before any reply: a client whose input has already ended must not be closed once they are sent.
        out.append(.keepOpenAfterInputEnds(session.id))
        // A first agent changes verdicts: the other subscribers hear it as events, this one in its snapshot.
        let others = state.agents - (session.isAgent ? 1 : 0)
        setAgents(others + (sub.isAgent ? 1 : 0))
        settle()
        // The events settle() just sent went to the old subscription and were counted there: go on from them.
        sub = Subscription(topics: topics, privileged: caller.privileged, appID: caller.match.id,
                           continuing: session.subscription)
        tracker.track(caller.match, state: state)
        reply(session.id) { w in
            w.field("ok", true)
            w.field("subscribed", strings: Topic.allCases.filter(topics.contains).lazy.map(\.rawValue))
            w.field("app", caller.match.id)
            w.field("privileged", caller.privileged)
        }
        let range = out.write { b in
            sub.writeHead(.snapshot, into: b)
            var w = JSONWriter(continuing: b)
            writeState(for: sub, to: &w)
            w.close()
            b.append(0x0A)
        }
        out.append(.reply(session.id, range))
        changeListening(session) { session.subscription = sub }
    }

    /// What a snapshot and a resync carry: the state of each subscribed topic, as far as the subscriber may see.
    func writeState(for sub: Subscription, to w: inout JSONWriter) {
        if sub.topics.contains(.links) { w.objects("links", state.network.links) { $1.write(to: &$0) } }
        if sub.topics.contains(.apps) || sub.topics.contains(.own) {
            w.objects("apps", tracker.all.filter { sub.hears(app: $0.app) }) {
                withEnforcement($1, .name).write(to: &$0, matchedBy: false)
            }
        }
        if sub.topics.contains(.prompts) && sub.privileged { w.objects("prompts", state.prompts.open) { $1.write(to: &$0) } }
        if sub.topics.contains(.policy) { w.object("policy") { writePolicy(to: &$0) } }
    }

    /// The whole state again, after the subscriber's events were lost: sent as an event (it counts in `seq`, and
    /// a subscriber that falls behind again loses it like any other).
    func resync(_ session: Session, _ why: ResyncReason, dropped: Int?) {
        guard session.subscription != nil else { return }
        let range = out.write { b in
            session.subscription!.writeHead(.resync, into: b)
            var w = JSONWriter(continuing: b)
            w.field("why", why.rawValue)
            if let dropped { w.field("dropped", dropped) }
            writeState(for: session.subscription!, to: &w)
            w.close()
            b.append(0x0A)
        }
        out.append(.event(session.id, head: range, tail: range.upperBound..<range.upperBound))
    }

    // MARK: - DECIDE and FORGET

    /// Lasting decisions are on disk before the reply says ok: the candidate is persisted, and the state changes
    /// only once the store reports success (`stored`).
    func decideOrForget(_ r: Request, session: Session) {
        var args = r.args
        switch r.verb {
        case .decide:
            let once = args.last == "--once"
            if once { args.removeLast() }
            guard args.count == 3 else { replyError(session.id, ProtocolError(.badArguments, "usage: \(r.verb.usage)")); return }
            guard AppPolicy.isValidID(args[0]) else {
                replyError(session.id, ProtocolError(.badArguments, "invalid app id \(ConfigError.quote(args[0]))"))
                return
            }
            guard let kind = Self.decidableKind(args[1]) else {
                replyError(session.id, ProtocolError(.badArguments, "bad kind \(ConfigError.quote(args[1])) (expected wifi, wwan, ethernet, other or metered)"))
                return
            }
            guard let p = Permission(rawValue: args[2].lowercased()), p != .ask else {
                replyError(session.id, ProtocolError(.badArguments, "bad decision \(ConfigError.quote(args[2])) (expected allow or deny)"))
                return
            }
            let app = args[0]
            commit({ $0.set(app, kind, p, once: once) }, persist: !once, for: session.id) { [unowned self] in
                log(.info, "decision: \(app) may \(p == .allow ? "use" : "not use") \(kind.rawValue)\(once ? " (once)" : "")")
                for prompt in state.prompts.close(app: app, kind: kind) {
                    for (t, purpose) in timers {
                        if case .promptExpiry(prompt.id) = purpose { cancelTimer(t) }
                    }
                    pendingEvents.append(.promptAnswered(prompt, p, once: once))
                }
            } reply: { [unowned self] in
                let match = state.config.app(named: app).map { AppMatch(id: app, matchedBy: .name, app: $0) }
                    ?? AppMatch(id: app, matchedBy: .name, app: nil)
                let v = verdict(for: match)
                let overridden = v.sources[kind] == nil && state.config.permissions(for: match.app)[kind] != .ask
                reply(session.id) { w in
                    w.field("ok", true)
                    w.object("decided") {
                        $0.field("app", app)
                        $0.field("kind", kind.rawValue)
                        $0.field("decision", p.rawValue)
                        $0.field("once", once)
                        $0.field("overridden_by_policy", overridden)
                    }
                    v.write(to: &w)
                }
            }
        case .forget:
            guard let app = args.first, AppPolicy.isValidID(app) else {
                replyError(session.id, ProtocolError(.badArguments, "usage: \(r.verb.usage)"))
                return
            }
            var kind: PolicyDimension?
            if args.count == 2 {
                guard let k = Self.decidableKind(args[1]) else {
                    replyError(session.id, ProtocolError(.badArguments, "bad kind \(ConfigError.quote(args[1])) (expected wifi, wwan, ethernet, other or metered)"))
                    return
                }
                kind = k
            }
            var probe = state.decisions
            let removed = probe.forget(app, kind: kind)
            commit({ $0.forget(app, kind: kind) }, persist: removed, for: session.id) { [unowned self] in
                if removed { log(.info, "forgot the decisions of \(app)\(kind.map { " for \($0.rawValue)" } ?? "")") }
            } reply: { [unowned self] in
                reply(session.id) { w in
                    w.field("ok", true)
                    w.field("forgotten", removed)
                    w.field("app", app)
                    w.field("kind", kind?.rawValue)
                }
            }
        case .ping, .help, .status, .links, .query, .apps, .reload, .subscribe, .wait, .prompts, .metrics, .usage,
             .resetUsage, .quit:
            preconditionFailure("\(r.verb) is not a decision")
        }
    }

    /// Applies `change` to the decisions now (`persist` false) or once the lasting ones are on disk, then runs
    /// `apply`, settles, and replies with `reply`; a failed write changes nothing and says why. The change is
    /// applied to the decisions as they are when it takes effect (a policy load meanwhile has dropped the --once
    /// ones, and they stay dropped).
    private func commit(_ change: @escaping (inout Decisions) -> Void, persist: Bool, for id: ConnectionID,
                        apply: @escaping () -> Void, reply: @escaping () -> Void) {
        guard persist else {
            takeEffect(change, apply)
            reply()
            return
        }
        out.append(.hold(id))
        var candidate = state.decisions
        change(&candidate)
        storing = PendingStore(requester: id, change: change, apply: apply, reply: reply)
        out.append(.persist(candidate))
    }

    private func takeEffect(_ change: (inout Decisions) -> Void, _ apply: () -> Void) {
        var d = state.decisions
        change(&d)
        setDecisions(d)
        apply()
        settle()
    }

    /// The decisions file was written (or not): the decision takes effect and is answered, or nothing changes.
    /// A requester that has left gets no reply, but its decision stands.
    func stored(error: String?) {
        guard let pending = storing else { return }
        storing = nil
        let requester = pending.requester
        if let error {
            log(.err, "cannot store the decisions: \(error)")
            if let requester { replyError(requester, ProtocolError(.internalError, "cannot store the decision: \(error)")) }
        } else {
            takeEffect(pending.change, pending.apply)
            if requester != nil { pending.reply() }
        }
        if let requester { out.append(.resume(requester)) }
        // Requests that came while the file was being written, in order; each starts from the last one's result,
        // and is checked as if it came now: a reload meanwhile may have taken its sender's privilege.
        while storing == nil, !waitingForStore.isEmpty {
            let (id, r) = waitingForStore.removeFirst()
            guard let session = sessions[id] else { continue }
            _ = perform(r, from: session)
            if storing?.requester != id { out.append(.resume(id)) }
        }
    }

    /// A kind of link other than loopback, or `metered`.
    static func decidableKind(_ s: String) -> PolicyDimension? { PolicyDimension(rawValue: s.lowercased()) }
}

extension Verb {
    /// How many words may follow the verb.
    var maxArgs: Int {
        switch self {
        case .query, .usage, .resetUsage: return 1
        case .wait, .forget: return 2
        case .decide: return 4
        case .subscribe: return Topic.allCases.count
        case .ping, .help, .status, .links, .apps, .reload, .prompts, .metrics, .quit: return 0
        }
    }

    /// Verbs only root, the daemon's own user and AdminGroup= members may use.
    var isPrivileged: Bool {
        switch self {
        case .apps, .reload, .prompts, .decide, .forget, .metrics, .resetUsage: return true
        case .ping, .help, .status, .links, .query, .subscribe, .wait, .usage, .quit: return false
        }
    }
}
