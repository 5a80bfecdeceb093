// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// Requests, typed by the protocol module (`Request`): each verb's checks of the caller and the state, its change of
/// state, and its reply.
extension Engine {
    func request(_ bytes: [UInt8], from session: Session) {
        // A repeated request while nothing changed gets the same bytes again.
        if session.cache.answers(bytes, at: version) {
            let range = out.write { $0.append(session.cache.reply) }
            out.append(.reply(session.id, range))
            return
        }
        switch RequestParser.parse(bytes) {
        case nil: return
        case let .failure(e)?:
            // Words a verb does not take: one who may not use the verb is told that first.
            let range = replyError(session.id, e.verb.flatMap { accessDenied($0, session.caller) } ?? e.error)
            session.cache.keep(bytes, at: version, reply: out[range])
        case let .success(r)?:
            if let range = perform(r, from: session) {
                session.cache.keep(bytes, at: version, reply: out[range])
            }
        }
    }

    /// Carries out one request. Returns the reply's range when it depends only on the request, the caller and the
    /// state (then the same request in the same state may be answered from the cache).
    func perform(_ r: Request, from session: Session) -> Range<Int>? {
        let id = session.id
        let caller = session.caller
        if let denied = accessDenied(r.verb, caller) { return replyError(id, denied) }
        switch r {
        case .ping:
            return reply(id) { $0.field("ok", true); $0.field("pong", true) }
        case .help:
            return replyHelp(id)
        case .status:
            return reply(id) { writeStatus(to: &$0, caller: caller) }
        case .links:
            return replyLinks(id)
        case let .query(app):
            return query(app, session: session)
        case let .reach(address, text, timeout):
            reach(address, text: text, wait: timeout, session: session)
            return nil
        case let .wait(app, timeout):
            wait(app, timeout: timeout, session: session)
            return nil
        case let .subscribe(topics):
            subscribe(topics, session: session)
            return nil
        case .apps:
            return apps(session)
        case .reload:
            out.append(.hold(id))
            requestReload(by: id)
            return nil
        case .prompts:
            return replyPrompts(id, caller)
        case .decisions:
            return replyDecisions(id, caller)
        case .decide, .forget, .answer:
            decideInTurn(r, session: session)
            return nil
        case .metrics:
            // Never from the cache: counters move without the state changing.
            reply(id) { writeMetrics(to: &$0) }
            return nil
        case let .usage(app):
            usageRequest(app, session: session)
            return nil
        case let .resetUsage(app):
            resetUsageRequest(app, session: session)
            return nil
        case let .scope(scope, failed):
            scopeAnswer(scope, failed: failed, session: session)
            return nil
        case let .owns(name, pid):
            ownsName(name, pid: pid, session: session)
            return nil
        case let .report(app):
            // Never from the cache: the report moves with every connection, not with the state's version.
            reportRequest(app, session: session)
            return nil
        case let .resetReport(app):
            resetReportRequest(app, session: session)
            return nil
        case let .keepReport(on):
            keepReportRequest(on, session: session)
            return nil
        case .quit:
            reply(id) { $0.field("ok", true); $0.field("bye", true) }
            out.append(.close(id))
            return nil
        }
    }

    private func replyHelp(_ id: ConnectionID) -> Range<Int>? {
        reply(id) { w in
            w.field("ok", true)
            w.objects("verbs", Verb.allCases) { $0.field("verb", $1.usage); $0.field("summary", $1.summary) }
        }
    }

    private func replyLinks(_ id: ConnectionID) -> Range<Int>? {
        reply(id) { w in
            w.field("ok", true)
            w.objects("links", state.network.links) { $1.write(to: &$0) }
        }
    }

    private func replyPrompts(_ id: ConnectionID, _ caller: Caller) -> Range<Int>? {
        reply(id) { w in
            w.field("ok", true)
            w.objects("prompts", state.prompts.open.filter { caller.mayAnswer($0) }) { $1.write(to: &$0) }
        }
    }

    private func replyDecisions(_ id: ConnectionID, _ caller: Caller) -> Range<Int>? {
        reply(id) { w in
            w.field("ok", true)
            w.objects("decisions", state.decisions.entries(onlyUID: caller.privileged ? nil : caller.ownUID)) {
                $1.write(to: &$0)
            }
        }
    }

    /// DECIDE, FORGET, ANSWER: now, or after the decision being written.
    private func decideInTurn(_ r: Request, session: Session) {
        if answering.commits.writing {
            // A decision is being written: this one waits its turn, so that it starts from that one's result.
            out.append(.hold(session.id))
            answering.commits.enqueue(session.id, r)
            return
        }
        decideOrForget(r, session: session)
    }

    /// Why the caller may not use `verb`; nil when it may.
    func accessDenied(_ verb: Verb, _ caller: Caller) -> ProtocolError? {
        switch verb.access {
        case .anyone: return nil
        case .privileged, .ownUID:
            guard !caller.privileged, verb.access == .privileged || caller.ownUID == nil else { return nil }
            return ProtocolError(.permissionDenied, "\(verb.rawValue.uppercased()) needs root or "
                + "membership of group \(ConfigError.quote(state.config.adminGroup))"
                + (verb.access == .ownUID ? " ([Defaults] UserDecisions=no: users do not decide for their own apps)" : ""))
        }
    }

    /// QUERY [APP]: the verdict of the caller's own app (with its identity, and a prompt raised when it wants
    /// asking), or of the app named; the reply's range when it may be cached.
    private func query(_ named: String?, session: Session) -> Range<Int>? {
        let id = session.id, caller = session.caller
        let match: AppMatch
        switch resolveApp(named, caller: caller) {
        case let .failure(e): return replyError(id, e)
        case let .success(m): match = m
        }
        let own = caller.owns(match)
        var v = verdict(for: match, uid: own ? caller.ownUID : nil)
        fitForCaller(&v, caller)
        if own { v.enforcement = ownEnforcement(v.enforcement, caller) }
        let range = reply(id) { w in
            w.field("ok", true)
            v.write(to: &w)
            if caller.privileged { writeUserDecisions(of: match.id, to: &w) }
            if own { w.object("identity") { caller.identity.write(to: &$0) } }
        }
        if own && v.wantsAsking {
            raisePrompts(v, identity: caller.identity)
            return nil
        }
        return range
    }

    /// APPS: every app the caller may see, with its verdict as the caller's processes have it.
    private func apps(_ session: Session) -> Range<Int>? {
        let caller = session.caller
        let listed = appsListed(for: caller)
        return reply(session.id) { w in
            w.field("ok", true)
            w.objects("apps", listed) { w, e in
                forCaller(verdict(for: e.match, uid: e.uid), caller).write(to: &w)
                if e.installed { w.field("installed", true) }
                if caller.privileged { writeUserDecisions(of: e.match.id, to: &w) }
            }
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

    private func writeStatus(to w: inout JSONWriter, caller: Caller) {
        let privileged = caller.privileged
        let net = state.network
        let primary = net.primary
        w.field("ok", true)
        w.field("version", DaemonState.version)
        w.field("ready", state.ready)
        w.field("agents", state.agents)
        // Other users' agents say who runs a desktop session: a user is told only of their own.
        w.field("user_agents", privileged ? state.userAgents.values.reduce(0, +) : state.userAgents[caller.identity.uid] ?? 0)
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
        w.object("usage") { writeUsageStatus(to: &$0, privileged: privileged) }
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
        guard let app = policyApp(named: name) else {
            // A desktop app whether or not it runs now: the one its ID names.
            if state.config.desktopApps, state.config.isDesktopID(name, uid: nil) {
                return .success(AppMatch(id: name, matchedBy: .desktop, app: AppPolicy(discovered: name)))
            }
            return .failure(ProtocolError(.notFound, "no [App \(name)] in the policy"))
        }
        return .success(AppMatch(id: app.id, matchedBy: app.discovered ? .desktop : .name, app: app))
    }

    // MARK: - WAIT

    /// WAIT [APP] [SECONDS]: the verdict at once when available, else held until it is or `timeout` (microseconds)
    /// passes.
    private func wait(_ app: String?, timeout: UInt64?, session: Session) {
        let match: AppMatch
        switch resolveApp(app, caller: session.caller) {
        case let .failure(e): replyError(session.id, e); return
        case let .success(m): match = m
        }
        let own = session.caller.owns(match)
        let uid = own ? session.caller.ownUID : nil
        let v = forCaller(verdict(for: match, uid: uid), session.caller)
        if v.available {
            reply(session.id) { $0.field("ok", true); v.write(to: &$0) }
            return
        }
        log(.debug, "pid \(session.identity.pid) waits for \(own ? "its own app " : "")\(match.id)"
            + (timeout.map { " (up to \($0 / 1000) ms)" } ?? ""))
        trackOwn(match, uid: uid)
        let timer = timeout.map { armTimer(.waitTimeout(session.id), microseconds: $0) }
        changeSession(session) { session.waiting = Waiting(match: match, timer: timer, own: own, uid: uid) }
        out.append(.hold(session.id))
        if own, v.wantsAsking { raisePrompts(v, identity: session.identity) }
    }

    /// Replies to a held WAIT: the verdict once available, the time-out error with the verdict that held, or why
    /// it cannot go on.
    func finishWait(_ session: Session, timedOut: Verdict? = nil, failed: ProtocolError? = nil) {
        guard let w = session.waiting else { return }
        if let t = w.timer { cancelTimer(t) }
        changeSession(session) { session.waiting = nil }
        untrackIfUnwanted([TrackedApp(w.match.id)] + (w.uid.map { [TrackedApp(w.match.id, uid: $0)] } ?? []))
        if let failed {
            replyError(session.id, failed)
        } else if let v = timedOut {
            reply(session.id) { out in
                ProtocolError(.timeout, v.message ?? "\(v.app) may not use the network yet").write(to: &out)
                v.write(to: &out, message: false)
            }
        } else {
            let v = verdict(for: w.match, uid: w.uid)
            reply(session.id) { $0.field("ok", true); v.write(to: &$0) }
        }
        out.append(.resume(session.id))
    }

    func answerWaiters() {
        for session in orderedSessions(where: { $0.waiting != nil }) {
            guard let w = session.waiting, verdict(for: w.match, uid: w.uid).available else { continue }
            finishWait(session)
        }
    }

    // MARK: - SUBSCRIBE

    private func subscribe(_ topics: Set<Topic>, session: Session) {
        let caller = session.caller
        if topics.contains(.prompts) && !caller.privileged && caller.ownUID == nil {
            replyError(session.id, ProtocolError(.permissionDenied, "only root or members of group "
                + "\(ConfigError.quote(state.config.adminGroup)) may subscribe to prompts ([Defaults] UserDecisions=no: "
                + "users do not answer for their own apps)"))
            return
        }
        // SUBSCRIBE again replaces the topics; seq keeps counting the connection's events.
        // The bus face's own subscriber listens only, to signal what it hears; a caller's subscription over the bus is
        // an agent as a socket subscriber is (docs/DBUS.md): it answers with Answer.
        let observer = session.identity.via == .busSignals
        var sub = Subscription(topics: topics, privileged: caller.privileged, appID: caller.match.id,
                               ownUID: caller.ownUID, observer: observer, continuing: session.subscription)
        // Before any reply: a client whose input has already ended must not be closed once they are sent.
        out.append(.keepOpenAfterInputEnds(session.id))
        // A first agent changes verdicts: the other subscribers hear it as events, this one in its snapshot.
        var agents = countAgents()
        if session.isAgent { Self.count(session.subscription!, into: &agents, by: -1) }
        if sub.isAgent { Self.count(sub, into: &agents, by: 1) }
        setAgents(agents)
        settle()
        // The events settle() just sent went to the old subscription and were counted there: go on from them.
        sub = Subscription(topics: topics, privileged: caller.privileged, appID: caller.match.id,
                           ownUID: caller.ownUID, observer: observer, continuing: session.subscription)
        trackOwn(caller.match, uid: caller.ownUID)
        let listing: (apps: [AppMatch], uid: UInt32?) = topics.contains(.mine) ? self.listing(for: caller) : ([], nil)
        sub.listed = Set(listing.apps.lazy.map(\.id))
        sub.listedUID = listing.uid
        reply(session.id) { w in
            w.field("ok", true)
            w.field("subscribed", strings: Topic.allCases.filter(topics.contains).lazy.map(\.rawValue))
            w.field("app", caller.match.id)
            w.field("privileged", caller.privileged)
            if let ns = settings.netns { w.field("netns", String(ns)) }
        }
        let range = out.write { b in
            sub.writeHead(.snapshot, into: b)
            var w = JSONWriter(continuing: b)
            writeState(for: sub, caller, listed: listing.apps, to: &w)
            w.close()
            b.append(0x0A)
        }
        out.append(.reply(session.id, range))
        changeSession(session) { session.subscription = sub }
        setListing(session, listing.apps, uid: listing.uid)
    }

    /// What a snapshot and a resync carry: the state of each subscribed topic, as far as the subscriber may see.
    func writeState(for sub: Subscription, _ caller: Caller, listed: [AppMatch], to w: inout JSONWriter) {
        if sub.topics.contains(.links) { w.objects("links", state.network.links) { $1.write(to: &$0) } }
        if sub.topics.contains(.apps) || sub.topics.contains(.own) || sub.topics.contains(.mine) {
            // Its own app as its uid has it, where it decides for its own uid; under `mine`, its listed apps.
            writeApps(for: sub, listed: listed, caller, to: &w)
        }
        if sub.isAgent { w.objects("prompts", state.prompts.open.filter(sub.mayAnswer)) { $1.write(to: &$0) } }
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
            writeState(for: session.subscription!, session.caller, listed: session.listedApps, to: &w)
            w.close()
            b.append(0x0A)
        }
        out.append(.event(session.id, head: range, tail: range.upperBound..<range.upperBound))
    }

    // MARK: - DECIDE and FORGET

    /// Lasting decisions are on disk before the reply says ok: the candidate is persisted, and the state changes
    /// only once the store reports success (`stored`). A privileged caller decides for everyone; any other (with
    /// `[Defaults] UserDecisions=yes`, checked in `perform`) for its own uid's processes only.
    /// DECIDE, ANSWER and FORGET: a decision of the caller's scope (everyone's when privileged, else its own uid's),
    /// committed (stored, then in effect) before the reply.
    func decideOrForget(_ r: Request, session: Session) {
        let scope = session.caller.privileged ? nil : session.caller.ownUID
        switch r {
        case let .decide(app, kind, p, once): decide(app, kind, p, once: once, session: session, scope: scope)
        case let .answer(id, .choice(choice, everyone)):
            answer(id, choice, everyone: everyone, session: session, scope: scope)
        case let .answer(id, .dismiss): dismiss(id, session: session)
        case let .forget(app, kind): forget(app, kind: kind, session: session, scope: scope)
        case .ping, .help, .status, .links, .query, .reach, .apps, .reload, .subscribe, .wait, .prompts, .decisions,
             .metrics, .usage, .resetUsage, .scope, .owns, .report, .resetReport, .keepReport, .quit:
            preconditionFailure("\(r.verb) is not a decision")
        }
    }

    /// DECIDE APP KIND allow|deny [--once].
    private func decide(_ app: String, _ kind: PolicyDimension, _ p: Permission, once: Bool, session: Session,
                        scope: UInt32?) {
        guard withinOwnLimit(app, scope: scope, session: session) else { return }
        commit({ $0.set(app, kind, p, once: once, uid: scope) }, persist: !once, for: session.id) { [unowned self] in
            log(.info, "decision: \(app) may \(p == .allow ? "use" : "not use") \(kind.rawValue)\(once ? " (once)" : "")"
                + (scope.map { " (uid \($0)'s own processes)" } ?? ""), app: app, uid: scope)
            closeAnswered(app: app, kinds: [kind], scope: scope, p, once: once)
        } reply: { [unowned self] in
            let v = verdict(for: namedMatch(app), uid: scope)
            let overridden = v.sources[kind] == nil && state.config.permissions(for: namedMatch(app).app)[kind] != .ask
            reply(session.id) { w in
                w.field("ok", true)
                w.object("decided") {
                    $0.field("app", app)
                    $0.field("kind", kind.rawValue)
                    $0.field("decision", p.rawValue)
                    $0.field("once", once)
                    $0.field("overridden_by_policy", overridden)
                    $0.field("for_uid", scope.map { Int($0) })
                }
                v.write(to: &w)
            }
        }
    }

    /// ANSWER ID allow|deny|once [--everyone], or ANSWER ID dismiss.
    private func answer(_ id: Int, _ choice: PromptChoice, everyone: Bool, session: Session, scope: UInt32?) {
        // A prompt that has closed (or another uid's, which this caller never saw) is answered alike: too late.
        guard let prompt = state.prompts.find(id: id), session.caller.mayAnswer(prompt) else {
            replyError(session.id, ProtocolError(.notFound, "prompt \(id) is not open: it expired, was answered or "
                + "withdrawn (or is not yours to answer); nothing was stored"))
            return
        }
        guard !everyone || session.caller.privileged else {
            replyError(session.id, ProtocolError(.permissionDenied, "only root or members of group "
                + "\(ConfigError.quote(state.config.adminGroup)) answer for everyone; a user answers for their own processes"))
            return
        }
        // A user's own process asked (the prompt is its uid's): an admin's answer is for that uid, unless they
        // answer for everyone. Their one click must not open an app for every user on one user's word.
        let scope = session.caller.privileged ? (everyone ? nil : prompt.scope) : scope
        guard withinOwnLimit(prompt.app, scope: scope, session: session) else { return }
        let (p, once) = choice.decision
        // Taken: its expiry must not overtake the answer while it is written (a failed write arms it again).
        for (t, purpose) in timers.purposes {
            if case .promptExpiry(id) = purpose { cancelTimer(t) }
        }
        commit({ d in for k in prompt.kinds { d.set(prompt.app, k, p, once: once, uid: scope) } }, persist: !once,
               for: session.id) { [unowned self] in
            log(.info, "prompt \(id) answered \(choice.rawValue): \(prompt.app) may \(p == .allow ? "use" : "not use") "
                + prompt.kinds.map(\.rawValue).joined(separator: " and ") + (once ? " (once)" : "")
                + (scope.map { " (uid \($0)'s own processes)" } ?? ""), app: prompt.app, uid: scope ?? prompt.uid)
            closeAnswered(app: prompt.app, kinds: prompt.kinds, scope: scope, p, once: once)
        } reply: { [unowned self] in
            let v = verdict(for: namedMatch(prompt.app), uid: scope)
            reply(session.id) { w in
                w.field("ok", true)
                w.object("answered") {
                    $0.field("id", id)
                    $0.field("app", prompt.app)
                    $0.field("kinds", strings: prompt.kinds.lazy.map(\.rawValue))
                    $0.field("choice", choice.rawValue)
                    $0.field("decision", p.rawValue)
                    $0.field("once", once)
                    $0.field("for_uid", scope.map { Int($0) })
                }
                v.write(to: &w)
            }
        } failed: { [unowned self] in
            if let open = state.prompts.find(id: id) {
                _ = armTimer(.promptExpiry(promptID: id), microseconds: UInt64(open.timeoutSec) * 1_000_000)
            }
        }
    }

    /// FORGET APP [KIND].
    private func forget(_ app: String, kind: PolicyDimension?, session: Session, scope: UInt32?) {
        var probe = state.decisions
        let removed = probe.forget(app, kind: kind, uid: scope)
        commit({ $0.forget(app, kind: kind, uid: scope) }, persist: removed, for: session.id) { [unowned self] in
            if removed {
                log(.info, "forgot the decisions of \(app)\(kind.map { " for \($0.rawValue)" } ?? "")"
                    + (scope.map { " made by uid \($0)" } ?? ""), app: app, uid: scope)
            }
        } reply: { [unowned self] in
            reply(session.id) { w in
                w.field("ok", true)
                w.field("forgotten", removed)
                w.field("app", app)
                w.field("kind", kind?.rawValue)
                w.field("for_uid", scope.map { Int($0) })
            }
        }
    }

    /// `ANSWER ID dismiss`: the person closed the question without answering (a notification dismissed). It closes
    /// now, stores nothing, and the app's rejected packets raise it again only after the quiet minute, as after an
    /// expiry; the app asking raises it at once. A prompt left open after its notification went would ask nobody.
    private func dismiss(_ id: Int, session: Session) {
        guard let prompt = state.prompts.find(id: id), session.caller.mayAnswer(prompt) else {
            replyError(session.id, ProtocolError(.notFound, "prompt \(id) is not open: it expired, was answered or "
                + "withdrawn (or is not yours to answer)"))
            return
        }
        closeUnanswered(id, event: .promptWithdrawn(prompt, why: .dismissed))
        log(.info, "prompt \(id) for \(prompt.app) (\(prompt.kinds.map(\.rawValue).joined(separator: ", "))) dismissed unanswered", app: prompt.app, uid: prompt.uid)
        reply(session.id) { w in
            w.field("ok", true)
            w.object("dismissed") { prompt.writeHead(to: &$0) }
        }
    }

    /// A user's own decisions are bounded (any local user may make them, and each is kept, on disk or in memory):
    /// at most `maxOwnApps` apps per uid; a decision for an app already decided is always taken.
    private func withinOwnLimit(_ app: String, scope: UInt32?, session: Session) -> Bool {
        guard let uid = scope, !state.decisions.hasOwn(app, uid: uid),
              state.decisions.ownApps(uid: uid) >= Self.maxOwnApps else { return true }
        replyError(session.id, ProtocolError(.tooManyDecisions, "uid \(uid) has decided for \(Self.maxOwnApps) apps, the most "
            + "one user may; forget some first (netpermctl decisions lists them)"))
        return false
    }

    /// An app by its id, in the policy or derived.
    func namedMatch(_ app: String) -> AppMatch {
        state.config.app(named: app).map { AppMatch(id: app, matchedBy: .name, app: $0) }
            ?? AppMatch(id: app, matchedBy: .name, app: nil)
    }

    /// The decisions each uid made for its own processes, for a privileged caller (`QUERY APP`, `APPS`); nothing
    /// when there are none, or users do not decide (`UserDecisions=no`).
    func writeUserDecisions(of app: String, to w: inout JSONWriter) {
        // Read field by field first: most replies have no user's decision, and `users(of:)`, called on the decisions
        // the engine holds, ran on a copy of them and built a set and an array to find none (~450 instructions).
        guard state.config.userDecisions, !state.decisions.userLasting.isEmpty || !state.decisions.userOnce.isEmpty
        else { return }
        let own = state.decisions.users(of: app)
        if !own.isEmpty { w.objects("user_decisions", own) { $1.write(to: &$0) } }
    }

    /// Applies `change` to the decisions now (`persist` false) or once the lasting ones are on disk, then runs
    /// `apply`, settles, and replies with `reply`; a failed write changes nothing, says why, and runs `failed`. The
    /// change is applied to the decisions as they are when it takes effect (a policy load meanwhile has dropped the
    /// --once ones, and they stay dropped).
    private func commit(_ change: @escaping (inout Decisions) -> Void, persist: Bool, for id: ConnectionID,
                        apply: @escaping () -> Void, reply: @escaping () -> Void, failed: @escaping () -> Void = {}) {
        guard persist else {
            takeEffect(change, apply)
            answerOnceInForce(id, resume: false, reply)
            return
        }
        out.append(.hold(id))
        var candidate = state.decisions
        change(&candidate)
        answering.commits.begin(PendingStore(requester: id, change: change, apply: apply, reply: reply, failed: failed)) { log(.debug, $0) }
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
    func stored(error: EdgeError?) {
        guard let pending = answering.commits.finish(log: { log(.debug, $0) }) else { return }
        let requester = pending.requester
        if let error {
            log(.err, "cannot store the decisions: \(error)")
            pending.failed()
            if let requester { replyError(requester, ProtocolError(.internalError, "cannot store the decision: \(error)")) }
            if let requester { out.append(.resume(requester)) }
        } else {
            takeEffect(pending.change, pending.apply)
            if let requester { answerOnceInForce(requester, resume: true, pending.reply) }
        }
        // Requests that came while the file was being written, in order; each starts from the last one's result,
        // and is checked as if it came now: a reload meanwhile may have taken its sender's privilege.
        while let (id, r) = answering.commits.next() {
            guard let session = clients.sessions[id] else { continue }
            _ = perform(r, from: session)
            if answering.commits.phase != .writing(requester: id), !heldForRules(id) { out.append(.resume(id)) }
        }
    }
}

extension Verb {
    enum Access { case anyone, privileged, ownUID }

    /// Who may use the verb: anyone; only root, the daemon's own user and AdminGroup= members; or those, and any
    /// user for their own uid's processes (`[Defaults] UserDecisions=yes`).
    var access: Access {
        switch self {
        case .reload, .metrics, .resetUsage: return .privileged
        case .prompts, .answer, .decide, .forget, .decisions: return .ownUID
        // SCOPE: only the subscriber the scope was asked of can answer it (Engine+Exec.swift).
        case .ping, .help, .status, .links, .query, .reach, .subscribe, .wait, .usage, .apps, .scope, .owns, .quit:
            return .anyone
        // Each caller's own apps' entries, every app's for the privileged: checked by the engine per entry.
        case .report, .resetReport, .keepReport: return .anyone
        }
    }
}
