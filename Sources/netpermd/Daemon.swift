import NetpermControl
import NetpermCore
import NetpermIO
import NetpermSystemd

/// The daemon's mutable state and the glue between the edges and the pure core.
final class Daemon {
    /// Every mutation of the state, whatever its field, makes cached replies stale.
    private(set) var state = DaemonState() { didSet { stateVersion &+= 1 } }
    private var stateVersion = 0
    /// Where cacheable replies are encoded before they are copied out.
    private let replyScratch = ByteBuffer(capacity: 4096)
    let configPath: String
    let configRequired: Bool
    let sysfs: Sysfs
    let accounts = SystemAccounts()
    /// The last picture from netlink, kept so a policy reload can reclassify without a dump.
    private var kernel = KernelSnapshot()
    /// sysfs is read once per link (and again on rename), not on every netlink message.
    private var sysfsCache: [Int32: (name: String, facts: SysfsFacts)] = [:]
    private var sessions: [ObjectIdentifier: Session] = [:]
    /// Every app someone may hear about, with its last verdict.
    private var tracker = VerdictTracker()
    private var subscribers: [ObjectIdentifier: Session] = [:]
    private var waiters: [ObjectIdentifier: Session] = [:]
    let loop: EventLoop
    let decisionStore: DecisionStore
    private var promptTimers: [Int: TimerSource] = [:]
    /// AdminGroup='s gid under one policy generation, looked up when a non-root peer first needs it.
    private var resolvedAdminGID: (generation: Int, gid: UInt32?)?

    /// A connection's peer, identified once at accept; its app match is redone when the policy changes.
    final class Session {
        let client: ClientConnection
        let identity: PeerIdentity
        var caller: Caller
        var subscription: Subscription?
        /// `own`: the app waits for itself, so it is "asking" and may raise prompts.
        var waiting: (match: AppMatch, timer: TimerSource?, own: Bool)?
        /// The last plain reply: clients that poll (QUERY in a loop) get the same bytes while nothing changed.
        var cache: (line: [UInt8], version: Int, reply: [UInt8])?
        init(client: ClientConnection, identity: PeerIdentity, caller: Caller) {
            self.client = client; self.identity = identity; self.caller = caller
        }
    }

    init(loop: EventLoop, configPath: String, configRequired: Bool, sysfs: Sysfs, stateDir: String) {
        self.loop = loop
        decisionStore = DecisionStore(stateDir: stateDir)
        state.decisions = decisionStore.load()
        self.configPath = configPath
        self.configRequired = configRequired
        self.sysfs = sysfs
    }

    var summary: String {
        let net = state.network
        let via = net.primary.map { "via \($0.name) (\($0.kind.rawValue))" } ?? "no network"
        return "\(net.links.count) links, \(via), \(state.config.apps.count) apps, policy gen \(state.policyGeneration)"
    }

    /// The STATUS= line last sent to the service manager.
    private var lastStatus = ""

    func markReady() {
        guard !state.ready else { return }
        state.ready = true
        emit(tracker.refresh(state: state))
        lastStatus = summary
        Notify.ready(status: lastStatus)
        Log.notice("ready: \(summary)")
    }

    /// SIGHUP, RELOAD and inotify all come here, so the service manager sees RELOADING=1 ... READY=1 each time.
    @discardableResult
    func reload() -> String? {
        Notify.reloading()
        let error = loadPolicy()
        lastStatus = summary
        Notify.send("READY=1\nSTATUS=\(lastStatus)")
        return error
    }

    // MARK: - Policy

    /// Parses every file; only if all is valid is the new policy swapped in. Returns the error otherwise.
    @discardableResult
    func loadPolicy() -> String? {
        let config: Config
        do {
            let files = try ConfigFiles.read(configPath, required: configRequired)
            config = try Config.parse(files: files, accounts: accounts)
        } catch {
            let message = "\(error)"
            if state.policyGeneration > 0 {
                Log.err("policy reload failed, keeping generation \(state.policyGeneration): \(message)")
            }
            state.policyError = message
            emit([.policy(generation: state.policyGeneration, apps: state.config.apps.count, error: message)])
            return message
        }
        state.config = config
        state.policyGeneration += 1
        state.policyError = nil
        // A --once decision holds until the policy changes.
        state.decisions.dropOnce()
        Log.info("policy generation \(state.policyGeneration): \(config.apps.count) apps")
        for session in sessions.values {
            session.caller = Caller(identity: session.identity, config: config, adminGID: adminGID)
            session.subscription?.privileged = session.caller.privileged
            session.subscription?.appID = session.caller.match.id
            if let w = session.waiting, w.match.matchedBy != .name { session.waiting?.match = session.caller.match }
        }
        var events: [Event] = [.policy(generation: state.policyGeneration, apps: config.apps.count, error: nil)]
        events += recomputeNetwork(emitting: false)
        events += tracker.reset(state: state, extra: extraMatches())
        emit(events)
        return nil
    }

    /// Apps outside the policy that someone listens to or waits for.
    private func extraMatches() -> [AppMatch] {
        subscribers.values.map(\.caller.match) + waiters.values.compactMap { $0.waiting?.match }
    }

    // MARK: - Links

    func kernelChanged(_ snapshot: KernelSnapshot) {
        kernel = snapshot
        emit(recomputeNetwork(emitting: true))
    }

    /// Rebuilds the picture from the last kernel snapshot; returns link events, and app events when asked.
    private func recomputeNetwork(emitting apps: Bool) -> [Event] {
        var seen: Set<Int32> = []
        let overrides = state.config.interfaces
        let network = NetworkState(snapshot: kernel) { facts in
            seen.insert(facts.index)
            return Classifier.classify(facts, sysfs: sysfsFacts(facts), overrides: overrides)
        }
        if sysfsCache.count != seen.count { sysfsCache = sysfsCache.filter { seen.contains($0.key) } }
        let old = state.network
        guard setNetwork(network) else { return [] }
        return Event.linkChanges(from: old, to: network) + (apps ? tracker.refresh(state: state) : [])
    }

    private func sysfsFacts(_ link: LinkFacts) -> SysfsFacts {
        if let cached = sysfsCache[link.index], cached.name == link.name { return cached.facts }
        let facts = sysfs.facts(forInterface: link.name)
        sysfsCache[link.index] = (link.name, facts)
        return facts
    }

    /// The one setter for the network picture; logs what changed, old -> new. False when nothing did.
    private func setNetwork(_ new: NetworkState) -> Bool {
        let old = state.network
        guard old != new else { return false }
        let oldByIndex = Dictionary(old.links.map { ($0.index, $0) }, uniquingKeysWith: { a, _ in a })
        let newIndexes = Set(new.links.map(\.index))
        for l in new.links {
            guard let o = oldByIndex[l.index] else {
                Log.info("\(l.name): appeared, kind \(l.kind.rawValue) (\(l.classifiedBy))\(l.usable ? ", usable" : "")")
                continue
            }
            if o.usable != l.usable {
                Log.info("\(l.name): usable \(o.usable) -> \(l.usable) (admin \(l.adminUp ? "up" : "down"), "
                    + "carrier \(l.carrier ? "on" : "off"), default route \(l.metric != nil ? "yes" : "no"))")
            } else if o.kind != l.kind {
                Log.info("\(l.name): kind \(o.kind.rawValue) -> \(l.kind.rawValue) (\(l.classifiedBy))")
            } else if o != l {
                Log.debug("\(l.name): changed (operstate \(o.operstate) -> \(l.operstate))")
            }
        }
        for o in old.links where !newIndexes.contains(o.index) {
            Log.info("\(o.name): removed")
        }
        if old.primary?.index != new.primary?.index || old.available != new.available {
            Log.notice("network: \(new.primary.map { "via \($0.name) (\($0.kind.rawValue))" } ?? "unavailable")")
        }
        state.network = new
        return true
    }

    // MARK: - Events and waiters

    /// Sends each event to the subscribers that want it (encoded once per event), then answers waiters.
    private func emit(_ events: [Event]) {
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
            for case let .app(v) in events where v.reason == .awaitingDecision {
                if let s = waiters.values.first(where: { $0.waiting?.own == true && $0.waiting?.match.id == v.app }) {
                    raisePrompts(v, identity: s.identity)
                }
            }
        }
        if state.ready && !events.isEmpty {
            let s = summary
            if s != lastStatus { lastStatus = s; Notify.status(s) }
        }
    }

    private func answerWaiters() {
        for session in Array(waiters.values) {
            guard let w = session.waiting, let v = tracker.verdict(w.match.id), v.available else { continue }
            finishWait(session, Processor.waitDone(v.renamed(w.match.id, w.match.matchedBy)))
        }
    }

    private func finishWait(_ session: Session, _ reply: JSON) {
        session.waiting?.timer?.cancel()
        let app = session.waiting?.match.id
        session.waiting = nil
        waiters[ObjectIdentifier(session.client)] = nil
        if let app { untrackIfUnwanted([app]) }
        session.client.reply(reply)
    }

    /// An app outside the policy is tracked only while someone listens to it or waits for it.
    private func untrackIfUnwanted(_ apps: [String]) {
        let stillWanted = Set(extraMatches().map(\.id))
        for app in apps where !stillWanted.contains(app) { tracker.untrack(app, state: state) }
    }

    // MARK: - Prompts and decisions

    private var agentCount: Int {
        subscribers.values.filter { $0.caller.privileged && $0.subscription?.topics.contains(.prompts) == true }.count
    }

    /// One prompt per app and kind; with no agent it expires at once (nothing is stored either way).
    private func raisePrompts(_ v: Verdict, identity: PeerIdentity?) {
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
    private func decide(app: String, kind: LinkKind, _ p: Permission, once: Bool) -> JSON {
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

    private func forget(app: String, kind: LinkKind?) -> JSON {
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

    func stopping() {
        for session in subscribers.values {
            guard var sub = session.subscription else { continue }
            session.client.push(sub.line(event: "stopping", tail: "}\n"))
            session.subscription = sub
        }
    }

    // MARK: - Clients

    private func adminGID() -> UInt32? {
        if let r = resolvedAdminGID, r.generation == state.policyGeneration { return r.gid }
        let gid = accounts.gid(forGroup: state.config.adminGroup)
        if gid == nil {
            Log.info("group '\(state.config.adminGroup)' does not exist; only root may ask about other apps")
        }
        resolvedAdminGID = (state.policyGeneration, gid)
        return gid
    }

    func connected(_ client: ClientConnection) {
        let identity = Peer.identify(fd: client.fd)
            ?? PeerIdentity(pid: 0, uid: UInt32.max, gids: [], executable: nil, unit: nil,
                            problem: "SO_PEERCRED failed")
        if let p = identity.problem { Log.debug("peer pid \(identity.pid): \(p)") }
        sessions[ObjectIdentifier(client)] = Session(client: client, identity: identity,
                                                     caller: Caller(identity: identity, config: state.config,
                                                                    adminGID: adminGID))
    }

    func disconnected(_ client: ClientConnection) {
        let id = ObjectIdentifier(client)
        guard let session = sessions.removeValue(forKey: id) else { return }
        session.waiting?.timer?.cancel()
        let listened = [subscribers.removeValue(forKey: id)?.caller.match.id,
                        waiters.removeValue(forKey: id)?.waiting?.match.id].compactMap { $0 }
        untrackIfUnwanted(listened)
    }

    func handle(_ client: ClientConnection, _ frame: LineFramer.Frame) -> Response? {
        let id = ObjectIdentifier(client)
        guard let session = sessions[id] else { return nil }
        if case let .line(bytes) = frame, let c = session.cache, c.version == stateVersion, c.line == bytes {
            return Response(encoded: c.reply)
        }
        guard var response = Processor.handle(frame, state: state, caller: session.caller) else { return nil }
        switch response.action {
        case nil:
            if response.isPlainReply, case let .line(bytes) = frame {
                let reply = response.encodedLine(scratch: replyScratch)
                session.cache = (bytes, stateVersion, reply)
                return Response(encoded: reply)
            }
            return response
        case .reload?:
            let error = reload()
            return Processor.reloadReply(state: state, error: error)
        case let .subscribe(topics)?:
            tracker.track(session.caller.match, state: state)
            var sub = Subscription(topics: topics, privileged: session.caller.privileged, appID: session.caller.match.id)
            response.trailer = sub.snapshot(state: state, verdicts: tracker.all)
            session.subscription = sub
            subscribers[id] = session
            client.keepAfterEOF = true
            return response
        case let .ask(v)?:
            raisePrompts(v, identity: session.identity)
            response.action = nil
            return response
        case let .decide(app, kind, p, once)?:
            return Response(decide(app: app, kind: kind, p, once: once))
        case let .forget(app, kind)?:
            return Response(forget(app: app, kind: kind))
        case let .wait(match, timeout, own)?:
            tracker.track(match, state: state)
            var timer: TimerSource?
            if let timeout {
                timer = try? loop.addTimer(afterMicroseconds: timeout) { [unowned self, unowned session] in
                    guard let w = session.waiting else { return }
                    let v = self.state.verdict(for: w.match)
                    self.finishWait(session, Processor.waitTimeout(v))
                }
            }
            session.waiting = (match, timer, own)
            waiters[id] = session
            if own, let v = tracker.verdict(match.id), v.reason == .awaitingDecision {
                raisePrompts(v.renamed(match.id, match.matchedBy), identity: session.identity)
            }
            return .held
        }
    }
}
