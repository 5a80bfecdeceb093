// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO

/// What the transport tells the one that processes requests. Frames are delivered one at a time, and the next
/// is taken only after `frame` returned and the client is not held, so replies stay in order.
public protocol ControlDelegate: AnyObject {
    /// A client connected: its descriptor, and who connected in the kernel's words (SO_PEERCRED). Nothing has
    /// been read from /proc: that waits until it sends something.
    func opened(_ id: UInt64, fd: Int32, connector: Credentials)
    /// A request line, and who sent it: the credentials the kernel attached to the bytes that began it.
    func frame(_ id: UInt64, _ frame: LineFramer.Frame, sender: Credentials)
    func closed(_ id: UInt64)
    /// A subscriber that fell behind has read everything queued for it; `dropped` events were not sent.
    func caughtUp(_ id: UInt64, dropped: Int)
    /// The one line a client refused for `refusal` gets before it is closed.
    func refusalLine(_ refusal: ControlServer.Refusal) -> [UInt8]
}

/// The control socket's transport: accepts clients, frames their lines, bounds each client's queues, and deals in
/// client ids and bytes only. Never blocks: a client that does not read stops being read from once its reply
/// queue is full, and nobody else waits for it. Bounds what clients can take: connections in total and per uid,
/// and the work one pass of the loop spends accepting.
public final class ControlServer {
    public struct Limits: Sendable {
        /// Stop reading a client's requests while this many reply bytes wait for it.
        public var maxQueuedBytes = 256 * 1024
        /// A subscriber with this many bytes unread loses the events it has not read, until it catches up.
        public var maxEventBytes = 1024 * 1024
        /// All queues together: past this, a client with replies queued takes no more requests, and a subscriber
        /// with anything queued loses its events as if it had fallen `maxEventBytes` behind. A client whose queue
        /// is empty (it reads) is always served. Event bodies shared by many queues count once.
        public var maxTotalQueuedBytes = 64 * 1024 * 1024
        /// A subscriber that has not caught up this long after falling behind is disconnected (after a final
        /// overflow line).
        public var maxLagMicroseconds: UInt64 = 30_000_000
        public var maxLine = LineFramer.defaultMaxLine
        /// Connections served at once, everyone's together; past it a client is refused.
        public var maxConnections = 16384
        /// Connections one uid may hold at once, except the uids in `unlimitedUIDs` (root, the daemon's own).
        public var maxConnectionsPerUID = 256
        public var unlimitedUIDs: Set<UInt32> = [0]
        /// Connections accepted per pass of the loop: the clients already connected are served between batches.
        public var acceptBatch = 64
        /// When accept fails for want of descriptors or memory, the socket is not watched for this long (doubling
        /// up to `maxAcceptPause` while it keeps failing), or until a client leaves.
        public var firstAcceptPause: UInt64 = 10_000
        public var maxAcceptPause: UInt64 = 1_000_000
        public init() {}
    }

    /// Why a connection was refused.
    public enum Refusal: Equatable, Sendable {
        /// `limit` connections are open.
        case total(limit: Int)
        /// `uid` holds `limit` connections.
        case perUID(uid: UInt32, limit: Int)
    }

    private let loop: EventLoop
    /// The listening socket: paused (out of descriptors) until `retry` fires or a client leaves, for `pause`,
    /// doubled at each failure in a row.
    private struct Listening {
        let fd: Int32
        /// Its watch on the loop.
        var source: IOSource?
        var retry: TimerSource?
        var paused = false
        var pause: UInt64
        var failures = 0
    }
    private var listening: Listening
    /// The clients' descriptors, served a batch per pass of the loop.
    /// Clients that have been answered once, served before anything else; and those that have not yet (a newcomer's
    /// first request reads its identity from /proc), a few at a time: a crowd connecting at once (1,500 in the abuse
    /// test) must not hold up an established client's request behind all of theirs (it waited 254 ms).
    let clientGroup: IOGroup
    private let newcomers: IOGroup
    static let newcomerBatch = 32
    private var clients: [UInt64: ClientConnection] = [:]
    /// Open connections by the uid that connected.
    private var perUID: [UInt32: Int] = [:]
    private var nextID: UInt64 = 1
    private var releaseTimer: TimerSource?
    /// Clients released from a hold, whose buffered requests wait for `serveReleased()`.
    private var released: [UInt64] = []
    /// Failed accepts, refused connections, and subscribers falling behind and disconnected: a crowd of them must
    /// not fill the journal.
    private struct Warnings {
        var accept = RateLimitedLog(intervalMicroseconds: 10_000_000)
        var refusal = RateLimitedLog(intervalMicroseconds: 10_000_000)
        var behind = RateLimitedLog(intervalMicroseconds: 10_000_000)
        var stall = RateLimitedLog(intervalMicroseconds: 10_000_000)
    }
    private var warnings = Warnings()

    /// What all queues hold: the connections' own bytes (replies, event heads) and the event bodies alive.
    final class Tally {
        var own = 0
        var shared = 0
    }
    let tally = Tally()
    /// Bytes queued for all clients together, each event body counted once however many queues hold it.
    public var queuedTotal: Int { tally.own + tally.shared }
    /// Where the small pieces at the head of a queue are gathered for one send.
    var gather = [UInt8](repeating: 0, count: 65536)
    let limits: Limits
    unowned let delegate: ControlDelegate
    /// One read buffer for all clients: the loop is single-threaded.
    var scratch = [UInt8](repeating: 0, count: 16384)

    public var clientCount: Int { clients.count }

    public init(loop: EventLoop, listenFD: Int32, limits: Limits = Limits(), delegate: ControlDelegate) throws(Errno) {
        self.loop = loop
        listening = Listening(fd: listenFD, pause: limits.firstAcceptPause)
        self.limits = limits
        self.delegate = delegate
        clientGroup = try loop.makeIOGroup(servedFirst: true, batch: 256)
        newcomers = try loop.makeIOGroup(servedFirst: false, batch: Self.newcomerBatch)
        try FD.setNonBlocking(listenFD)
        // Ours has it from before listen(); one passed by the service manager may not (PassCredentials=).
        try? UnixSocket.passCredentials(listenFD)
        listening.source = try loop.addIO(fd: listenFD, events: IOEvents.readable) { [unowned self] _ in
            self.acceptSome()
        }
        // The loop makes the descriptor behind its timers at the first one (sd-event: a timerfd per clock, kept
        // from then on). Make it now: the retry timer is needed exactly when no descriptor can be had.
        try loop.addTimer(afterMicroseconds: 3_600_000_000) {}.cancel()
    }

    /// Stops accepting; existing clients are left to `closeAll`.
    public func stopListening() {
        listening.source?.cancel()
        listening.source = nil
        listening.retry?.cancel()
        listening.retry = nil
    }

    public func closeAll() {
        for c in Array(clients.values) { c.close() }
    }

    // MARK: - What the processor decided

    /// Queues a reply (never dropped: the queue is bounded by not reading more requests).
    public func reply(_ id: UInt64, _ bytes: UnsafeRawBufferPointer) { clients[id]?.queue(bytes) }

    /// An event's body, to be queued for each subscriber that wants it (`event(_:head:body:)`), held once.
    public func body(_ tail: UnsafeRawBufferPointer) -> EventBody { EventBody(Array(tail), tally: tally) }

    /// Queues an event line, `head` (the subscriber's own) then `body` (shared); a subscriber too far behind loses
    /// it instead, and is closed if it does not catch up in time.
    public func event(_ id: UInt64, head: UnsafeRawBufferPointer, body: EventBody) {
        clients[id]?.push(head: head, body: body)
    }

    /// The same with a body of its own.
    public func event(_ id: UInt64, head: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer) {
        guard let c = clients[id] else { return }
        c.push(head: head, body: body(tail))
    }

    /// Takes no more of the client's requests until `resume`.
    public func hold(_ id: UInt64) { clients[id]?.held = true }

    /// Lets the client's requests flow again, at the next `serveReleased()`: not from inside the processing
    /// that released it.
    public func resume(_ id: UInt64) {
        guard let c = clients[id], c.held else { return }
        c.held = false
        released.append(id)
    }

    /// Serves the requests that clients released since the last call had buffered.
    public func serveReleased() {
        while !released.isEmpty {
            let ids = released
            released = []
            for id in ids { clients[id]?.resume() }
        }
    }

    /// Closes the client once what is queued has been sent.
    public func closeAfterFlush(_ id: UInt64) { clients[id]?.closeAfterFlush() }

    /// The end of the client's input does not end the connection (a subscriber).
    public func keepOpenAfterInputEnds(_ id: UInt64) { clients[id]?.keepAfterEOF = true }

    public func queuedBytes(_ id: UInt64) -> Int? { clients[id]?.queuedBytes }

    // MARK: - Accepting

    /// A batch of pending connections. The socket stays readable while more wait, so the loop comes back after
    /// serving what else is ready: a burst of thousands of connects never holds up the clients already there.
    private func acceptSome() {
        var accepted = 0
        while accepted < limits.acceptBatch {
            let fd: Int32
            do {
                guard let a = try UnixSocket.accept(listening.fd) else { return }
                fd = a
            } catch where error.code == ECONNABORTED {
                continue   // that client gave up while waiting; the next may not have
            } catch {
                acceptFailed(error)
                return
            }
            accepted += 1
            if listening.failures > 0 {
                Log.notice("control socket: accepting again after \(listening.failures) failed accept(s)")
                listening.failures = 0
                listening.pause = limits.firstAcceptPause
            }
            admit(fd)
        }
    }

    func caughtUp(_ client: ClientConnection, dropped: Int) { delegate.caughtUp(client.id, dropped: dropped) }

    func fellBehind(fd: Int32, dropped: Int) {
        warnings.behind.emit(4, "subscriber fd \(fd) fell more than \(limits.maxEventBytes) bytes behind (or all queues "
            + "hold \(queuedTotal >> 20) MiB): dropped \(dropped) events; it gets the whole state again once it has "
            + "caught up")
    }

    func stalled(fd: Int32) {
        warnings.stall.emit(4, "subscriber fd \(fd) has not caught up \(limits.maxLagMicroseconds / 1_000_000) s after "
            + "falling behind: disconnecting it")
    }

    func afterLagLimit(_ body: @escaping () -> Void) -> TimerSource? {
        try? loop.addTimer(afterMicroseconds: limits.maxLagMicroseconds, body)
    }

    /// Out of descriptors (EMFILE, ENFILE) or memory: the listening socket stays readable, and watching it would
    /// spin the loop on the same failure. Stop watching it for a while, and say so at a limited rate.
    private func acceptFailed(_ error: Errno) {
        listening.failures += 1
        warnings.accept.emit(4, "control socket: accept failed: \(error); pausing for \(listening.pause / 1000) ms "
            + "or until a client leaves (\(clients.count) connections open)")
        listening.paused = true
        listening.source?.setEvents(0)
        listening.retry?.cancel()
        do {
            listening.retry = try loop.addTimer(afterMicroseconds: listening.pause) { [unowned self] in
                self.listening.retry = nil
                self.resumeAccepting()
            }
        } catch {
            // Then only a client leaving resumes accepting: retrying at once would spin.
            Log.warning("control socket: cannot arm the retry timer: \(error)")
        }
        listening.pause = min(listening.pause * 2, limits.maxAcceptPause)
    }

    private func resumeAccepting() {
        guard listening.paused else { return }
        listening.paused = false
        listening.retry?.cancel()
        listening.retry = nil
        listening.source?.setEvents(IOEvents.readable)
    }

    /// Serves the connection, or refuses it past a limit.
    private func admit(_ fd: Int32) {
        // The client may be gone already (then there is no one to answer).
        guard let cred = try? UnixSocket.peerCredentials(fd) else {
            FD.close(fd)
            return
        }
        if clients.count >= limits.maxConnections {
            return refuse(fd, .total(limit: limits.maxConnections), uid: cred.uid)
        }
        let held = perUID[cred.uid, default: 0]
        if held >= limits.maxConnectionsPerUID && !limits.unlimitedUIDs.contains(cred.uid) {
            return refuse(fd, .perUID(uid: cred.uid, limit: limits.maxConnectionsPerUID), uid: cred.uid)
        }
        // Also on each accepted socket: since Linux 6.16 a socket takes the listener's flags at connect(), and
        // clients that connected before the daemon started (socket activation) would read no credentials at all.
        try? UnixSocket.passCredentials(fd)
        let id = nextID
        nextID += 1
        let client = ClientConnection(id: id, fd: fd, connector: cred, server: self)
        do {
            try client.start(in: newcomers)
        } catch {
            Log.warning("control socket: cannot watch client: \(error)")
            FD.close(fd)
            return
        }
        clients[id] = client
        perUID[cred.uid] = held + 1
        delegate.opened(id, fd: fd, connector: cred)
    }

    /// One line saying why, then the end of the stream.
    private func refuse(_ fd: Int32, _ refusal: Refusal, uid: UInt32) {
        warnings.refusal.emit(4, "control socket: refused a connection of uid \(uid) (too-many-connections): " + {
            switch refusal {
            case let .total(limit): return "\(limit) connections are open, the most allowed"
            case let .perUID(_, limit): return "it has \(limit) open, the most one uid may have"
            }
        }())
        // A new socket's send buffer is empty: one short line fits without blocking.
        _ = try? FD.send(fd, delegate.refusalLine(refusal))
        // Take what the client sent already: closing a Unix socket with unread bytes resets the connection,
        // and the client might then never read the line.
        for _ in 0..<4 {
            let r = scratch.withUnsafeMutableBytes { b in try? FD.read(fd, into: b) }
            guard case .bytes? = r else { break }
        }
        FD.close(fd)
    }

    func remove(_ client: ClientConnection) {
        guard clients.removeValue(forKey: client.id) != nil else { return }
        let uid = client.connector.uid
        if let n = perUID[uid] { perUID[uid] = n > 1 ? n - 1 : nil }
        // A descriptor came free: the next client need not wait for the retry.
        resumeAccepting()
        delegate.closed(client.id)
        releaseMemorySoon()
    }

    /// Once clients have left, their memory goes back to the kernel a second later (at most once a second):
    /// malloc keeps freed heap for reuse, and a crowd of clients or a flooder's queue would otherwise leave the
    /// daemon megabytes larger for good.
    private func releaseMemorySoon() {
        guard releaseTimer == nil else { return }
        releaseTimer = try? loop.addTimer(afterMicroseconds: 1_000_000) { [unowned self] in
            releaseTimer = nil
            Memory.release()
        }
    }
}
