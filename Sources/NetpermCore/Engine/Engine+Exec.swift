// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// Apps known by what they run (docs/APPS.md, "Apps known by what they run"): a process of a person's session with
/// no app unit of its own (dbus-daemon's activation, a desktop that makes no units, a terminal's command) that runs
/// an installed app's program is given a scope of its user's manager named for the app, as GNOME Shell gives the
/// apps it starts, so that the rules name it like every other desktop app. The edge hears of execs and says which
/// processes these are (`Input.execFound`); the engine asks for the scopes, a bounded number at a time.
struct ExecBook {
    /// What the edge looks for (`Effect.watchExecs`), from the desktop files.
    var index = ExecIndex()
    /// Scopes asked for and not answered yet, by uid, and in all; and their processes.
    var inFlight: [UInt32: Int] = [:]
    var pids: Set<Int32> = []
    var total = 0
    /// Apps whose scope failed: said once each at warning, then at debug.
    var failed: Set<String> = []
    /// Processes found while the bound was reached: left where they were (said once per burst).
    var crowded = false
    /// What the edge counted (METRICS), and the processes it found that the engine took (to ask a scope or not).
    var counted = ExecCounts()
    var found = 0
    /// Scopes answered: made, or not; and of those, how many a user's `netpermctl scopes` was asked for.
    var scopesMade = 0, scopesFailed = 0, scopesByUsers = 0
    /// Scopes asked of a user's `netpermctl scopes` (a `scope-wanted` event), by the id its `SCOPE` answer names.
    var asked: [Int: AskedScope] = [:]
    var nextAsked = 1
}

/// A scope a user's own `netpermctl scopes` was asked to make.
struct AskedScope {
    var request: ScopeRequest
    var connection: ConnectionID
    var timer: TimerID
}

extension Engine {
    /// Scopes asked for at once for one uid, and for everyone: a user starting processes in a loop makes requests
    /// of their own manager at this pace, never an unbounded queue.
    static let maxScopesPerUID = 4
    static let maxScopes = 16
    /// For the edge that makes them: as many threads as requests may be out.
    public static var maxScopesPublic: Int { maxScopes }

    /// The desktop files changed: the programs the edge looks for may have.
    func execIndexFollows(_ catalog: DesktopCatalog) {
        let index = ExecIndex(catalog: catalog)
        guard index != appBooks.execs.index else { return }
        appBooks.execs.index = index
        out.append(.watchExecs(index))
    }

    func execFound(_ found: ExecFound) {
        appBooks.execs.found += 1
        // DesktopApps=no: only DesktopId= names desktop apps.
        guard state.config.desktopApps || state.config.app(desktopID: found.app) != nil else { return }
        // An [App] that names the program by Executable= holds it already: the policy names it.
        if let exe = found.executable,
           state.config.match(PeerIdentity(pid: found.pid, uid: found.uid, gids: [], executable: exe, unit: nil))
            .matchedBy == .executable {
            return
        }
        // Found again (its name and its program, or two execs read together) while its scope is being made.
        guard !appBooks.execs.pids.contains(found.pid) else { return }
        guard appBooks.execs.total < Self.maxScopes, appBooks.execs.inFlight[found.uid, default: 0] < Self.maxScopesPerUID else {
            if !appBooks.execs.crowded {
                appBooks.execs.crowded = true
                log(.notice, "desktop apps: \(Self.maxScopes) scopes asked for (\(Self.maxScopesPerUID) a uid) and not "
                    + "made yet; pid \(found.pid) of uid \(found.uid) (\(found.app)) stays where it runs", uid: found.uid)
            }
            return
        }
        appBooks.execs.crowded = false
        let request = ScopeRequest(uid: found.uid, pid: found.pid, app: found.app)
        appBooks.execs.inFlight[found.uid, default: 0] += 1
        appBooks.execs.total += 1
        appBooks.execs.pids.insert(found.pid)
        log(.info, "desktop apps: pid \(found.pid) of uid \(found.uid) runs \(found.app) (\(found.place.shown)): "
            + "giving it \(request.unit)", uid: found.uid)
        askOrMakeScope(request)
    }

    /// How long a user's `netpermctl scopes` may take to answer: a start job of the user's manager, then the reply.
    static let scopeAnswerSec: UInt64 = 5

    /// The scope is made by the user's own `netpermctl scopes` where one subscribes (the first connected): a daemon
    /// without root cannot reach the user's manager, whose private socket takes only root and that user. Else the
    /// daemon asks the manager itself.
    private func askOrMakeScope(_ request: ScopeRequest) {
        guard let maker = orderedSessions(where: {
            $0.subscription?.topics.contains(.scopes) == true && $0.caller.identity.uid == request.uid
        }).first else {
            out.append(.makeScope(request))
            return
        }
        let id = appBooks.execs.nextAsked
        appBooks.execs.nextAsked += 1
        let timer = armTimer(.scopeTimeout(id), microseconds: Self.scopeAnswerSec * 1_000_000)
        appBooks.execs.asked[id] = AskedScope(request: request, connection: maker.id, timer: timer)
        let tail = out.write { b in
            var w = JSONWriter(continuing: b)
            w.field("id", id)
            w.field("pid", Int(request.pid))
            w.field("app", request.app)
            w.field("unit", request.unit)
            w.field("slice", "app.slice")
            w.close()
            b.append(0x0A)
        }
        let head = out.write { maker.subscription!.writeHead(.scopeWanted, into: $0) }
        out.append(.event(maker.id, head: head, tail: tail))
    }

    /// SCOPE ID made|failed [WHY]: only from the connection the scope was asked of.
    func scopeAnswer(_ id: Int, failed: String?, session: Session) {
        guard let asked = appBooks.execs.asked[id], asked.connection == session.id else {
            _ = replyError(session.id, ProtocolError(.notFound, "no scope \(id) was asked of this connection "
                + "(answered, timed out, or never)"))
            return
        }
        _ = reply(session.id) { $0.field("ok", true) }
        scopeAnswered(id, error: failed.map { EdgeError(.makeScope, "the user's netpermctl scopes: "
                                                    + ($0.isEmpty ? "failed" : SafeText.excerpt($0, maxBytes: 200))) })
    }

    /// A scope asked of a user's `netpermctl scopes` was made, or not (an answer, a time-out, the connection gone).
    func scopeAnswered(_ id: Int, error: EdgeError?) {
        guard let asked = appBooks.execs.asked.removeValue(forKey: id) else { return }
        cancelTimer(asked.timer)
        appBooks.execs.scopesByUsers += 1
        scopeMade(asked.request, error: error)
    }

    /// OWNS NAME PID from a user's `netpermctl scopes`: PID owns an installed app's name on that uid's session bus, so
    /// it is that app where it runs with no app unit of its own (checked at the edge: the process is that uid's, in a
    /// session place). A process of the uid could make its own scope of any name anyway: this only narrows.
    func ownsName(_ name: String, pid: Int32, session: Session) {
        let uid = session.caller.identity.uid
        guard let app = appBooks.execs.index.app(uid: uid, busName: name) else {
            _ = replyError(session.id, ProtocolError(.notFound, "\(SafeText.quote(name)) is no installed app's name "
                + "for uid \(uid)"))
            return
        }
        _ = reply(session.id) { $0.field("ok", true); $0.field("app", app) }
        out.append(.checkClaim(ProcessClaim(pid: pid, uid: uid, app: app)))
    }

    /// The connection of a `netpermctl scopes` closed: what it was asked and did not answer failed.
    func forgetScopesAsked(of connection: ConnectionID) {
        for id in appBooks.execs.asked.keys.sorted() where appBooks.execs.asked[id]?.connection == connection {
            scopeAnswered(id, error: EdgeError(.makeScope, "the user's netpermctl scopes went away before answering"))
        }
    }

    func scopeMade(_ request: ScopeRequest, error: EdgeError?) {
        appBooks.execs.total = max(0, appBooks.execs.total - 1)
        appBooks.execs.pids.remove(request.pid)
        let left = appBooks.execs.inFlight[request.uid, default: 1] - 1
        appBooks.execs.inFlight[request.uid] = left > 0 ? left : nil
        guard let error else {
            appBooks.execs.scopesMade += 1
            out.append(.scanCgroupsSoon)
            return
        }
        appBooks.execs.scopesFailed += 1
        let line = "desktop apps: no scope for pid \(request.pid) of uid \(request.uid) (\(request.app)): \(error)"
        if appBooks.execs.failed.insert(request.app).inserted {
            log(.warning, line + "; it is judged where it runs (further failures for this app at debug)", uid: request.uid)
        } else {
            log(.debug, line, uid: request.uid)
        }
    }
}

extension SessionPlace {
    /// For the log.
    var shown: String {
        switch self {
        case .dbusActivation: return "activated by dbus-daemon"
        case let .sessionUnit(u): return "in session.slice/\(u)"
        case let .loginSession(u): return "in \(u)"
        case let .terminal(u): return "a terminal's command in \(u)"
        }
    }
}
