import Glibc
import NetpermCore
import NetpermIO

/// The control socket's transport: accepts clients, frames lines, bounds each client's queues, and hands each
/// frame to `handler` (the pure processor, through the daemon). Never blocks: a client that does not read
/// stops being read from once its reply queue is full, and nobody else waits for it.
public final class ControlServer {
    public typealias Handler = (ClientConnection, LineFramer.Frame) -> Response?

    public struct Limits: Sendable {
        /// Stop reading a client's requests while this many reply bytes wait for it.
        public var maxQueuedBytes = 256 * 1024
        /// A subscriber with this many event bytes unread is disconnected (after a final overflow event).
        public var maxEventBytes = 1024 * 1024
        public var maxLine = LineFramer.defaultMaxLine
        public init() {}
    }

    private let loop: EventLoop
    private let listenFD: Int32
    private var listenSource: IOSource?
    /// The clients' descriptors, served a batch per pass of the loop.
    private let clientGroup: IOGroup
    private var clients: [ObjectIdentifier: ClientConnection] = [:]
    let limits: Limits
    let handler: Handler
    /// One read buffer for all clients: the loop is single-threaded.
    var scratch = [UInt8](repeating: 0, count: 16384)
    /// Where replies are encoded before they join a client's queue (one for all clients, like `scratch`).
    let replyBuffer = ByteBuffer(capacity: 4096)

    public var clientCount: Int { clients.count }
    /// Called once per accepted client, before its first request is read.
    public var onConnect: ((ClientConnection) -> Void)?
    public var onDisconnect: ((ClientConnection) -> Void)?

    public init(loop: EventLoop, listenFD: Int32, limits: Limits = Limits(), handler: @escaping Handler) throws(Errno) {
        self.loop = loop
        self.listenFD = listenFD
        self.limits = limits
        self.handler = handler
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

    private func acceptAll() {
        while true {
            let fd: Int32
            do {
                fd = try sys { accept(listenFD, nil, nil) }
                _ = try sys { fcntl(fd, F_SETFD, FD_CLOEXEC) }
                try FD.setNonBlocking(fd)
            } catch {
                if error != .again {
                    Log.warning("control socket: accept failed: \(error)")
                }
                return
            }
            let client = ClientConnection(fd: fd, server: self)
            do {
                try client.start(in: clientGroup)
                clients[ObjectIdentifier(client)] = client
                onConnect?(client)
            } catch {
                Log.warning("control socket: cannot watch client: \(error)")
                FD.close(fd)
            }
        }
    }

    func remove(_ client: ClientConnection) {
        guard clients.removeValue(forKey: ObjectIdentifier(client)) != nil else { return }
        onDisconnect?(client)
    }
}
