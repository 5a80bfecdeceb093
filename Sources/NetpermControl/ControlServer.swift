import NetpermIO

/// What the transport tells the one that processes requests. Frames are delivered one at a time, and the next
/// is taken only after `frame` returned and the client is not held, so replies stay in order.
public protocol ControlDelegate: AnyObject {
    /// A client connected (its descriptor, to ask the kernel who it is).
    func opened(_ id: UInt64, fd: Int32)
    func frame(_ id: UInt64, _ frame: LineFramer.Frame)
    func closed(_ id: UInt64)
    /// A subscriber that fell behind has read everything queued for it; `dropped` events were not sent.
    func caughtUp(_ id: UInt64, dropped: Int)
}

/// The control socket's transport: accepts clients, frames their lines, bounds each client's queues, and deals in
/// client ids and bytes only. Never blocks: a client that does not read stops being read from once its reply
/// queue is full, and nobody else waits for it.
public final class ControlServer {
    public struct Limits: Sendable {
        /// Stop reading a client's requests while this many reply bytes wait for it.
        public var maxQueuedBytes = 256 * 1024
        /// A subscriber with this many bytes unread loses the events it has not read, until it catches up.
        public var maxEventBytes = 1024 * 1024
        /// A subscriber that has not caught up this long after falling behind is disconnected (after a final
        /// overflow line).
        public var maxLagMicroseconds: UInt64 = 30_000_000
        public var maxLine = LineFramer.defaultMaxLine
        public init() {}
    }

    private let loop: EventLoop
    private let listenFD: Int32
    private var listenSource: IOSource?
    /// The clients' descriptors, served a batch per pass of the loop.
    private let clientGroup: IOGroup
    private var clients: [UInt64: ClientConnection] = [:]
    private var nextID: UInt64 = 1
    private var releaseTimer: TimerSource?
    /// Clients released from a hold, whose buffered requests wait for `serveReleased()`.
    private var released: [UInt64] = []
    let limits: Limits
    unowned let delegate: ControlDelegate
    /// One read buffer for all clients: the loop is single-threaded.
    var scratch = [UInt8](repeating: 0, count: 16384)

    public var clientCount: Int { clients.count }

    public init(loop: EventLoop, listenFD: Int32, limits: Limits = Limits(), delegate: ControlDelegate) throws(Errno) {
        self.loop = loop
        self.listenFD = listenFD
        self.limits = limits
        self.delegate = delegate
        clientGroup = try loop.makeIOGroup()
        try FD.setNonBlocking(listenFD)
        listenSource = try loop.addIO(fd: listenFD, events: IOEvents.readable) { [unowned self] _ in
            self.acceptAll()
        }
    }

    /// Stops accepting; existing clients are left to `closeAll`.
    public func stopListening() {
        listenSource?.cancel()
        listenSource = nil
    }

    public func closeAll() {
        for c in Array(clients.values) { c.close() }
    }

    // MARK: - What the processor decided

    /// Queues a reply (never dropped: the queue is bounded by not reading more requests).
    public func reply(_ id: UInt64, _ bytes: UnsafeRawBufferPointer) { clients[id]?.queue(bytes) }

    /// Queues an event line, `head` then `tail`; a subscriber too far behind is disconnected instead.
    public func event(_ id: UInt64, head: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer) {
        clients[id]?.push(head: head, tail: tail)
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

    // MARK: - Clients

    private func acceptAll() {
        while true {
            let fd: Int32
            do {
                guard let accepted = try UnixSocket.accept(listenFD) else { return }
                fd = accepted
            } catch {
                Log.warning("control socket: accept failed: \(error)")
                return
            }
            let id = nextID
            nextID += 1
            let client = ClientConnection(id: id, fd: fd, server: self)
            do {
                try client.start(in: clientGroup)
            } catch {
                Log.warning("control socket: cannot watch client: \(error)")
                FD.close(fd)
                continue
            }
            clients[id] = client
            delegate.opened(id, fd: fd)
        }
    }

    func caughtUp(_ client: ClientConnection, dropped: Int) { delegate.caughtUp(client.id, dropped: dropped) }

    func afterLagLimit(_ body: @escaping () -> Void) -> TimerSource? {
        try? loop.addTimer(afterMicroseconds: limits.maxLagMicroseconds, body)
    }

    func remove(_ client: ClientConnection) {
        guard clients.removeValue(forKey: client.id) != nil else { return }
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
