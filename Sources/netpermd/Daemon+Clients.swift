import NetpermControl
import NetpermCore
import NetpermIO

/// Connections: who the peer is, and each request through the pure processor to a reply or an action.
extension Daemon {
    func adminGID() -> UInt32? {
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
        let caller = Caller(identity: identity, config: state.config, daemonUID: daemonUID, adminGID: adminGID)
        sessions[ObjectIdentifier(client)] = Session(client: client, identity: identity, caller: caller)
    }

    func disconnected(_ client: ClientConnection) {
        let id = ObjectIdentifier(client)
        guard let session = sessions.removeValue(forKey: id) else { return }
        session.waiting?.timer?.cancel()
        let listened = [subscribers.removeValue(forKey: id)?.caller.match.id,
                        waiters.removeValue(forKey: id)?.waiting?.match.id].compactMap { $0 }
        untrackIfUnwanted(listened)
        countAgents()
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
            var sub = Subscription(topics: topics, privileged: session.caller.privileged, appID: session.caller.match.id)
            session.subscription = sub
            // A first agent changes verdicts: the other subscribers hear it as events, this one in its snapshot.
            countAgents(plus: session)
            tracker.track(session.caller.match, state: state)
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
            Log.debug("pid \(session.identity.pid) waits for \(own ? "its own app " : "")\(match.id)"
                + (timeout.map { " (up to \($0 / 1000) ms)" } ?? ""))
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
            if own, let v = tracker.verdict(match.id), v.wantsAsking {
                raisePrompts(v.renamed(match.id, match.matchedBy), identity: session.identity)
            }
            return .held
        }
    }
}
