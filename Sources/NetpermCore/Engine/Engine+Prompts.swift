// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// What prompting keeps beside the open prompts (`state.prompts`, a PromptBook: verdicts say `awaiting-decision`
/// from it): the processes watched for their exit, what was logged once, and the quiet after an expiry.
struct PromptDesk {
    /// The processes whose exit is watched (`Effect.watchExit`), with how many open prompts they ask in.
    var watchedAskers: [Int32: Int] = [:]
    /// "app kind" pairs already logged as asked with no agent; emptied when an agent comes.
    var unaskedLogged: Set<String> = []
    /// "app scope" pairs whose prompt expired unanswered a moment ago: the app's rejected packets do not raise it
    /// again until `Engine.blockedQuietSec` have passed (an app retrying in a loop must not prompt the user in a loop).
    var quietBlocked: Set<String> = []
    /// Scopes (a uid, -1 for everyone's) told to be full of prompts (PromptBook.perScope), until one is raised again.
    var full: Set<Int> = []
    /// "app kind" pairs told once that their incoming connections were refused without a prompt.
    var incomingLogged: Set<String> = []
    /// The most "app kind" pairs each of those logs remembers.
    static let logLimit = 256
}

/// Prompts (docs/PROTOCOL.md, "Prompts"): raised for an app waiting for itself or a packet the rules rejected, sent
/// to the agents that may answer, closed by an answer, an expiry or the exit of everyone who asked.
extension Engine {
    /// One prompt per app and scope (its pending kinds together), to the agents that may answer it; a process of
    /// the app asking while it is open joins its askers. With no agent for the scope, the app is denied those kinds
    /// and the log says so once per app and kind until an agent comes (a headless device must not fill its log).
    /// `link` and `destination`: what REACH asked about, which the prompt names.
    func raisePrompts(_ v: Verdict, identity: PeerIdentity?, link: Link? = nil, destination: String? = nil) {
        guard state.hasAgent(for: v.uid) else {
            for kind in v.unaskedKinds { logUnasked(app: v.app, kind: kind, blocked: false) }
            return
        }
        if let open = state.prompts.find(app: v.app, scope: v.uid) {
            if let pid = identity?.pid, changePrompts({ $0.join(id: open.id, asker: pid) }) { watchAsker(pid) }
            return
        }
        guard state.prompts.hasRoom(for: v.uid) else { return logFull(v.uid) }
        let (network, timeout) = (state.network, state.config.promptTimeoutSec)
        let userNamed = identity?.userUnit == true && (v.matchedBy == .unit || v.matchedBy == .desktop)
        guard let p = changePrompts({ $0.raise(for: v, scope: v.uid, uid: identity?.uid, identity: identity, network: network,
                                               timeoutSec: timeout, link: link, destination: destination, userNamed: userNamed) })
        else { return }
        for pid in p.askers { watchAsker(pid) }
        sendPrompt(p)
    }

    /// Once per app and kind until an agent comes, and for at most `unaskedLogLimit` of them.
    func logUnasked(app: String, kind: PolicyDimension, blocked: Bool) {
        guard answering.prompting.unaskedLogged.count <= PromptDesk.logLimit,
              answering.prompting.unaskedLogged.insert("\(app) \(kind.rawValue)").inserted else { return }
        if answering.prompting.unaskedLogged.count > PromptDesk.logLimit {
            log(.notice, "more apps asked with no agent to prompt; not logging each until an agent comes")
            return
        }
        log(.notice, "\(app) may not use \(kind.rawValue), which its policy sets to ask: "
            + (blocked ? "its traffic was rejected and " : "") + "no agent is listening "
            + "to ask the user (run 'netpermctl agent', or 'netpermctl decide \(app) \(kind.rawValue) allow')", app: app)
    }

    func sendPrompt(_ p: Prompt) {
        var p = p
        // A user's own desktop file names the prompts of that user's processes only: an answer for everyone is asked
        // by everyone's name for the app (a user must not title a question to the admin).
        if let e = desktopEntry(of: p.app, uid: p.scope) {
            p.face = AppFace(e)
            changePrompts { $0.name(id: p.id, p.face) }
        }
        answering.prompting.full.remove(p.scope.map(Int.init) ?? -1)
        let agents = clients.sessions.values.filter { $0.isAgent && $0.subscription!.mayAnswer(p) }.count
        log(.info, "\(p.app) wants to use \(p.kinds.map(\.rawValue).joined(separator: " and ")) via \(p.link.name)"
            + (p.link.over.map { " over " + $0 } ?? "") + (p.uid.map { " (uid \($0))" } ?? "")
            + (p.blocked ? " (its traffic was rejected)" : "") + ": prompt \(p.id) sent to \(agents) agent(s)", app: p.app, interface: p.link.name, uid: p.uid)
        work.events.append(.prompt(p))
        _ = armTimer(.promptExpiry(promptID: p.id), microseconds: UInt64(p.timeoutSec) * 1_000_000)
    }

    /// Whose decision a rejected packet of `uid`'s socket asks for: that uid's own when users decide for their
    /// apps (not root's nor the daemon's, which decide for everyone), else everyone's.
    func blockedScope(_ uid: UInt32?) -> UInt32? {
        guard state.config.userDecisions, let uid, uid != 0, uid != settings.daemonUID else { return nil }
        return uid
    }

    /// The kernel rejected a packet of an app whose kind is pending (Mode=block logs them, at most 5 a second per
    /// app and kind): the prompt is raised as if the app had asked, about every undecided `ask` that keeps it off
    /// the packet's link. Nothing when the kind is no longer pending for the socket's uid (decided, or the policy
    /// changed since the rules were loaded), a prompt is open (it is marked as raised by rejected traffic too), or
    /// one for it expired less than `blockedQuietSec` ago: a packet never raises more than one prompt.
    func blocked(app id: String, kind: PolicyDimension, uid: UInt32?, ifindex: Int32?, destination: String? = nil) {
        let scope = blockedScope(uid)
        guard let app = state.config.app(named: id) else {
            log(.debug, "enforcement: a rejected packet of \(id) (\(kind.rawValue)), which is not in the policy")
            return
        }
        let permissions = state.decisions.apply(to: state.config.permissions(for: app), app: id, uid: scope).permissions
        guard permissions[kind] == .ask else {
            log(.debug, "enforcement: a rejected packet of \(id) (\(kind.rawValue)), which is not pending")
            return
        }
        guard state.hasAgent(for: scope) else { return logUnasked(app: id, kind: kind, blocked: true) }
        if let open = state.prompts.find(app: id, scope: scope) {
            return changePrompts { $0.markBlocked(id: open.id, destination: destination) }
        }
        guard state.prompts.hasRoom(for: scope) else { return logFull(scope) }
        guard !answering.prompting.quietBlocked.contains(Self.quietKey(id, scope)),
              var p = raiseBlocked(app, kind: kind, ifindex: ifindex, permissions: permissions, scope: scope, uid: uid)
        else { return }
        if let destination {
            changePrompts { $0.markBlocked(id: p.id, destination: destination) }
            p.destination = destination
        }
        sendPrompt(p)
    }

    private func raiseBlocked(_ app: AppPolicy, kind: PolicyDimension, ifindex: Int32?, permissions: PermissionSet,
                              scope: UInt32?, uid: UInt32?) -> Prompt? {
        let (network, timeout) = (state.network, state.config.promptTimeoutSec)
        let link = ifindex.flatMap { network.link(index: $0) }
        let userNamed = Self.userNamed(app, uid: uid)
        return changePrompts { $0.raiseBlocked(app: app.id, kind: kind, link: link, permissions: permissions, scope: scope,
                                               uid: uid, network: network, timeoutSec: timeout, userNamed: userNamed) }
    }

    /// A rejected packet's app was named by its user (as far as the rules tell): the app has `UserUnit=` (or is a
    /// desktop app, named by its unit) and the
    /// socket's uid is no `User=` of it, so the packet came out of a unit of that user's own manager.
    static func userNamed(_ app: AppPolicy, uid: UInt32?) -> Bool {
        guard let uid, uid != 0, !app.userUnits.isEmpty || !app.desktopIDs.isEmpty else { return false }
        return !app.uids.contains(uid)
    }

    /// Once per scope while it is full: its next apps wait unasked until some of its prompts close.
    func logFull(_ scope: UInt32?) {
        guard answering.prompting.full.insert(scope.map(Int.init) ?? -1).inserted else { return }
        log(.notice, "\(PromptBook.perScope) prompts are open for " + (scope.map { "uid \($0)'s processes" } ?? "everyone")
            + ": more apps are asked once some of them are answered or expire")
    }

    /// A server's answer to a connection from elsewhere was refused (its SYN-ACK: a request socket, no uid). Nobody
    /// is asked: "Allow it to use cellular data?" would read as the app reaching out, and an admin's Allow would open
    /// the server on that link for everyone. Said once per app and kind.
    func refusedIncoming(app: String, kind: PolicyDimension) {
        guard answering.prompting.incomingLogged.count < PromptDesk.logLimit, answering.prompting.incomingLogged.insert("\(app) \(kind.rawValue)").inserted else { return }
        log(.notice, "\(app): a connection from elsewhere over \(kind.rawValue) was refused (its policy denies or asks "
            + "\(kind.rawValue)); incoming connections raise no prompt: 'netpermctl decide \(app) \(kind.rawValue) allow' opens it", app: app)
    }

    /// "app scope": what the quiet after an expiry is per.
    static func quietKey(_ app: String, _ scope: UInt32?) -> String { "\(app) \(scope.map { String($0) } ?? "*")" }

    // MARK: - The processes that asked

    func watchAsker(_ pid: Int32) {
        answering.prompting.watchedAskers[pid, default: 0] += 1
        if answering.prompting.watchedAskers[pid] == 1 { out.append(.watchExit(pid)) }
    }

    /// A prompt closed (answered, expired, withdrawn): its timer goes, and its askers are watched no more for it.
    func promptClosed(_ p: Prompt) {
        for (t, purpose) in timers.purposes {
            if case .promptExpiry(p.id) = purpose { cancelTimer(t) }
        }
        for pid in p.askers {
            guard let n = answering.prompting.watchedAskers[pid] else { continue }
            if n > 1 {
                answering.prompting.watchedAskers[pid] = n - 1
            } else {
                answering.prompting.watchedAskers[pid] = nil
                out.append(.unwatchExit(pid))
            }
        }
    }

    /// A process that asked has exited: a prompt nobody else asked (and no rejected packet raised) is withdrawn,
    /// so an agent stops showing a question whose asker has gone.
    func askerExited(_ pid: Int32) {
        guard answering.prompting.watchedAskers.removeValue(forKey: pid) != nil else { return }
        for p in changePrompts({ $0.askerExited(pid) }) {
            log(.info, "prompt \(p.id) for \(p.app) withdrawn: pid \(pid), which asked, has exited", app: p.app, uid: p.uid)
            promptClosed(p)
            work.events.append(.promptWithdrawn(p, why: .askerExited))
        }
    }

    /// A decision answers the app's open prompts about its kinds: for everyone (`scope` nil), every scope's;
    /// else that uid's own.
    func closeAnswered(app: String, kinds: [PolicyDimension], scope: UInt32?, _ p: Permission, once: Bool) {
        for prompt in changePrompts({ $0.close(app: app, kinds: kinds, scope: scope, everyone: scope == nil) }) {
            promptClosed(prompt)
            work.events.append(.promptAnswered(prompt, p, once: once, uid: scope))
        }
    }

    /// Its time-out fired unanswered.
    func promptExpired(_ promptID: Int) {
        guard let p = state.prompts.find(id: promptID) else { return }
        log(.info, "prompt \(p.id) for \(p.app) (\(p.kinds.map(\.rawValue).joined(separator: ", "))) expired unanswered", app: p.app, uid: p.uid)
        closeUnanswered(promptID, event: .promptExpired(p))
    }

    /// A prompt closes without an answer (expired, dismissed): nothing is stored, and the quiet minute starts. It
    /// runs from the last such close: a prompt raised by asking during the quiet and left unanswered starts it again.
    func closeUnanswered(_ promptID: Int, event: Event) {
        guard let p = changePrompts({ $0.close(id: promptID) }) else { return }
        promptClosed(p)
        work.events.append(event)
        let key = Self.quietKey(p.app, p.scope)
        if !answering.prompting.quietBlocked.insert(key).inserted,
           let old = timers.purposes.first(where: { if case .blockedQuiet(key) = $0.value { true } else { false } })?.key {
            cancelTimer(old)
        }
        _ = armTimer(.blockedQuiet(key), microseconds: Self.blockedQuietSec * 1_000_000)
    }
}
