// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// The user managers the daemon has make scopes (ScopeMaker: apps found by what they run, docs/APPS.md): one
/// connection to each, kept open on the daemon's loop, and everything on it asynchronous (StartTransientUnit, then
/// its job's JobRemoved), so that no thread is started and nothing waits. A connection per scope cost the manager an
/// accept, an authentication and a teardown, each a wake-up of its own, and the daemon a thread and a hand-over back
/// to the loop (BENCHMARKS.md, figure 23). A manager sends every connection to its private socket the changes of
/// every unit: they are read and dropped as they come. A connection the manager closes (it stopped: the user logged
/// out) is dropped and made again by the next request; a request whose connection was lost before it was answered
/// is sent once more on a new one.
public final class UserManagerLinks {
    public typealias Done = (TransientScope.Failure?) -> Void

    /// A scope to make: `name` holding `pids`, in `slice` of the user's manager.
    public struct Scope: Sendable {
        public var name: String
        public var pids: [UInt32]
        public var description: String
        public var slice: String

        public init(name: String, pids: [UInt32], description: String, slice: String) {
            self.name = name
            self.pids = pids
            self.description = description
            self.slice = slice
        }
    }

    private let loop: SDEventLoop
    private let timeout: UInt64
    private var links: [UInt32: Link] = [:]
    /// Links lost, closed from the loop (never from inside their own dispatch).
    private var lost: [Link] = []
    private var closer: TimerSource?

    /// `timeoutMicroseconds`: how long a scope may take, from the request to its job's end.
    public init(loop: SDEventLoop, timeoutMicroseconds: UInt64 = 5_000_000) {
        self.loop = loop
        timeout = timeoutMicroseconds
    }

    deinit {
        closer?.cancel()
        for l in Array(links.values) + lost { l.close() }
    }

    /// Connections open now (for tests and the log).
    public var open: Int { links.count }

    /// Makes `scope` through user `uid`'s manager; `done` runs later on the loop, with nil once the scope's start
    /// job is done, else why not.
    public func start(_ scope: Scope, ofUser uid: UInt32, done: @escaping Done) {
        let request = Request(scope: scope, uid: uid, done: done)
        let seconds = Double(timeout) / 1_000_000
        // The timer holds the request (nothing else may: a request that failed at once is held by nothing else)
        // until it fires or `finish` drops it.
        request.timer = try? loop.addTimer(afterMicroseconds: timeout) { [weak self] in
            self?.finish(request, TransientScope.Failure(description: "\(scope.name) did not start within \(seconds) s "
                + "(\(request.link?.reached ?? "uid \(uid)'s manager"))"))
        }
        send(request)
    }

    private func send(_ request: Request) {
        let link: Link
        if let l = links[request.uid] {
            link = l
        } else {
            do { link = try Link(uid: request.uid, loop: loop, owner: self) } catch {
                return finishSoon(request, error)
            }
            links[request.uid] = link
            Log.debug("desktop apps: connected to uid \(request.uid)'s manager (\(link.reached))")
        }
        guard let failure = link.send(request) else { return }
        // Closed by the manager before its Disconnected was read: once more on a new connection.
        if sd_bus_is_open(link.bus) <= 0 && !request.retried {
            request.retried = true
            lose(link)
            return send(request)
        }
        finishSoon(request, failure)
    }

    /// The request's answer, once: its timer, its call and its place in the link forgotten.
    fileprivate func finish(_ request: Request, _ failure: TransientScope.Failure?) {
        guard let done = request.done else { return }
        request.done = nil
        request.timer?.cancel()
        request.timer = nil
        request.forget()
        done(failure)
    }

    /// A failure found while the request is being made: said from the loop, as every answer is.
    private func finishSoon(_ request: Request, _ failure: TransientScope.Failure) {
        request.timer?.cancel()
        request.timer = try? loop.addTimer(afterMicroseconds: 0) { [weak self] in
            self?.finish(request, failure)
        }
        if request.timer == nil { finish(request, failure) }
    }

    /// The link's connection is gone: its requests waiting for a job fail, and it is closed from the loop. A request
    /// not answered yet is sent again, once, on a new link.
    fileprivate func lose(_ link: Link) {
        guard !link.lost else { return }
        link.lost = true
        if links[link.uid] === link { links[link.uid] = nil }
        Log.debug("desktop apps: lost uid \(link.uid)'s manager (\(link.reached))")
        for r in Array(link.jobs.values) {
            finish(r, TransientScope.Failure(description: "lost \(link.reached) while \(r.scope.name) started"))
        }
        lost.append(link)
        if closer == nil {
            closer = try? loop.addTimer(afterMicroseconds: 0) { [weak self] in
                guard let self else { return }
                self.closer = nil
                let gone = self.lost
                self.lost = []
                for l in gone { l.close() }
            }
        }
    }

    /// StartTransientUnit answered (`m`), or failed.
    fileprivate func answered(_ request: Request, _ m: OpaquePointer?) {
        guard let link = request.link else { return }
        request.call.map { _ = sd_bus_slot_unref($0) }
        request.call = nil
        link.waiting[ObjectIdentifier(request)] = nil
        if link.waiting.isEmpty { link.early = [:] }
        if let m, let e = sd_bus_message_get_error(m), sd_bus_error_is_set(e) != 0 {
            if sd_bus_is_open(link.bus) <= 0 && !request.retried {
                request.retried = true
                request.link = nil
                lose(link)
                return send(request)
            }
            let why = e.pointee.message.map { String(cString: $0) } ?? "\(Errno(sd_bus_error_get_errno(e)))"
            return finish(request, TransientScope.Failure(description: "\(link.reached) refused to start "
                + "\(request.scope.name): \(why)"))
        }
        var job: UnsafePointer<CChar>?
        guard let m, sd_bus_message_read_basic(m, BusMessage.type("o"), &job) > 0, let job else {
            return finish(request, TransientScope.Failure(description: "\(link.reached) answered StartTransientUnit "
                + "without a job"))
        }
        let path = String(cString: job)
        request.manager = link.direct ? nil : sd_bus_message_get_sender(m).map { String(cString: $0) } ?? ""
        if let result = link.early[path]?.first(where: { request.manager == nil || $0.sender == request.manager }) {
            return finish(request, jobFailure(result.result, request, link))
        }
        link.jobs[path] = request
    }

    /// JobRemoved of `path` with `result`, from `sender` (nil on the private socket, where only the manager speaks).
    fileprivate func jobRemoved(_ link: Link, path: String, result: String, sender: String?) {
        guard let request = link.jobs[path] else {
            // Its reply not read yet (kept only while replies are awaited: every job of the manager comes here).
            if !link.waiting.isEmpty { link.early[path, default: []].append((result, sender)) }
            return
        }
        // On a bus any peer can send a JobRemoved straight to us: only the manager's counts.
        guard request.manager == nil || sender == request.manager else { return }
        finish(request, jobFailure(result, request, link))
    }

    private func jobFailure(_ result: String, _ request: Request, _ link: Link) -> TransientScope.Failure? {
        result == "done" ? nil : TransientScope.Failure(description: "\(request.scope.name) failed to start "
            + "(\(link.reached)): the job's result is \(result)")
    }
}

/// One scope asked for.
private final class Request {
    let scope: UserManagerLinks.Scope
    let uid: UInt32
    var done: UserManagerLinks.Done?
    var timer: TimerSource?
    /// Where it was sent, its call while unanswered, and the bus name of the manager that answered (nil on the
    /// private socket).
    weak var link: Link?
    var call: OpaquePointer?
    var manager: String?
    var retried = false

    init(scope: UserManagerLinks.Scope, uid: UInt32, done: @escaping UserManagerLinks.Done) {
        self.scope = scope
        self.uid = uid
        self.done = done
    }

    /// Out of its link, its call cancelled.
    func forget() {
        call.map { _ = sd_bus_slot_unref($0) }
        call = nil
        guard let link else { return }
        link.waiting[ObjectIdentifier(self)] = nil
        for (path, r) in link.jobs where r === self { link.jobs[path] = nil }
    }
}

/// One connection to a user's manager: its private socket (which takes root and the user only), else the user's
/// bus, attached to the daemon's loop.
private final class Link {
    let uid: UInt32
    let bus: OpaquePointer
    let reached: String
    /// The private socket: a direct connection, whose messages carry no sender.
    let direct: Bool
    weak var owner: UserManagerLinks?
    private var slots: [OpaquePointer] = []
    /// Requests sent and not answered; requests answered, by the job they wait for; JobRemoved heard while replies
    /// were awaited (a job may end before its reply is read).
    var waiting: [ObjectIdentifier: Request] = [:]
    var jobs: [String: Request] = [:]
    var early: [String: [(result: String, sender: String?)]] = [:]
    var lost = false

    init(uid: UInt32, loop: SDEventLoop, owner: UserManagerLinks) throws(TransientScope.Failure) {
        self.uid = uid
        self.owner = owner
        (bus, reached, direct) = try TransientScope.connect(ofUser: uid)
        var r = sd_bus_attach_event(bus, loop.event, 0)
        let me = Unmanaged.passUnretained(self).toOpaque()
        var slot: OpaquePointer?
        // Installed locally on the private socket; on a bus by AddMatch, asynchronously.
        if r >= 0 {
            r = sd_bus_match_signal_async(bus, &slot, direct ? nil : "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                          "org.freedesktop.systemd1.Manager", "JobRemoved", Self.onJobRemoved, nil, me)
        }
        if r >= 0, let s = slot { slots.append(s) }
        if r >= 0 {
            r = sd_bus_match_signal_async(bus, &slot, "org.freedesktop.DBus.Local", "/org/freedesktop/DBus/Local",
                                          "org.freedesktop.DBus.Local", "Disconnected", Self.onDisconnected, nil, me)
        }
        if r >= 0, let s = slot { slots.append(s) }
        // On a bus the manager sends job signals only to subscribers; on its private socket always.
        if r >= 0 && !direct { r = subscribe() }
        guard r >= 0 else {
            close()
            throw TransientScope.Failure(description: "cannot follow \(reached)'s jobs: \(Errno(-r))")
        }
    }

    func close() {
        for s in slots { _ = sd_bus_slot_unref(s) }
        slots = []
        for r in Array(waiting.values) + Array(jobs.values) { r.forget() }
        _ = sd_bus_flush_close_unref(bus)
    }

    /// Sends StartTransientUnit for `request`; a failure to send is returned.
    func send(_ request: Request) -> TransientScope.Failure? {
        var m: OpaquePointer?
        var r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                               "org.freedesktop.systemd1.Manager", "StartTransientUnit")
        defer { _ = sd_bus_message_unref(m) }
        let s = request.scope
        if r >= 0, let m {
            r = TransientScope.appendStartTransientUnit(m, name: s.name, pids: s.pids, description: s.description,
                                                        slice: s.slice)
        }
        var slot: OpaquePointer?
        // The request's own timer bounds it: sd-bus's time-out is only a backstop.
        if r >= 0, let m {
            r = sd_bus_call_async(bus, &slot, m, Self.onReply, Unmanaged.passUnretained(request).toOpaque(), 0)
        }
        guard r >= 0 else { return TransientScope.Failure(description: "cannot ask \(reached) for \(s.name): \(Errno(-r))") }
        request.link = self
        request.call = slot
        waiting[ObjectIdentifier(request)] = request
        return nil
    }

    private func subscribe() -> Int32 {
        var m: OpaquePointer?
        var r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                               "org.freedesktop.systemd1.Manager", "Subscribe")
        defer { _ = sd_bus_message_unref(m) }
        if r >= 0, let m { r = sd_bus_message_set_expect_reply(m, 0) }
        if r >= 0, let m { r = sd_bus_send(bus, m, nil) }
        return r
    }

    private static let onReply: sd_bus_message_handler_t = { m, userdata, _ in
        guard let userdata else { return 0 }
        let request = Unmanaged<Request>.fromOpaque(userdata).takeUnretainedValue()
        request.link?.owner?.answered(request, m)
        return 0
    }

    private static let onJobRemoved: sd_bus_message_handler_t = { m, userdata, _ in
        guard let m, let userdata else { return 0 }
        let link = Unmanaged<Link>.fromOpaque(userdata).takeUnretainedValue()
        var id: UInt32 = 0
        var path: UnsafePointer<CChar>?
        var unit: UnsafePointer<CChar>?
        var result: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(m, BusMessage.type("u"), &id) > 0,
              sd_bus_message_read_basic(m, BusMessage.type("o"), &path) > 0,
              sd_bus_message_read_basic(m, BusMessage.type("s"), &unit) > 0,
              sd_bus_message_read_basic(m, BusMessage.type("s"), &result) > 0,
              let path, let result else { return 0 }
        link.owner?.jobRemoved(link, path: String(cString: path), result: String(cString: result),
                               sender: sd_bus_message_get_sender(m).map { String(cString: $0) })
        return 0
    }

    private static let onDisconnected: sd_bus_message_handler_t = { m, userdata, _ in
        guard let m, let userdata, BusReply(m).sender == "org.freedesktop.DBus.Local" else { return 0 }
        let link = Unmanaged<Link>.fromOpaque(userdata).takeUnretainedValue()
        link.owner?.lose(link)
        return 0
    }
}
