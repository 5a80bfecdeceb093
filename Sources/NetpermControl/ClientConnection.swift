import Glibc
import NetpermCore
import NetpermIO

/// One connected client: its input framer, its bounded reply queue, and (later) who it is.
public final class ClientConnection {
    public let fd: Int32
    private unowned let server: ControlServer
    private var source: IOSource?
    private var framer: LineFramer
    private var out: [UInt8] = []
    private var outStart = 0
    private var closeAfterFlush = false
    private var inputEOF = false
    /// A deferred reply (WAIT) is pending: later requests wait so replies stay in order.
    private var held = false
    private var interest: UInt32 = 0
    public private(set) var isClosed = false

    init(fd: Int32, server: ControlServer) {
        self.fd = fd
        self.server = server
        framer = LineFramer(maxLine: server.limits.maxLine)
    }

    func start(in group: IOGroup) throws(Errno) {
        interest = IOEvents.readable
        source = try group.add(fd: fd, events: interest) { [unowned self] revents in
            self.ready(revents)
        }
    }

    public var queuedBytes: Int { out.count - outStart }

    private func ready(_ revents: UInt32) {
        // HUP: the peer closed both directions; nothing more can be delivered, so clean up at once.
        if revents & (IOEvents.hangup | IOEvents.error) != 0 { close(); return }
        if revents & IOEvents.writable != 0 { flush() }
        if !isClosed && revents & IOEvents.readable != 0 { readSome() }
        if !isClosed { serve(); updateInterest() }
    }

    /// Sends the deferred reply of a held request and takes the client's next requests.
    public func reply(_ json: JSON) {
        guard !isClosed, held else { return }
        held = false
        enqueue(json)
        serve()
        if !isClosed { updateInterest() }
    }

    /// Pushes an event line. A subscriber that has fallen `maxEventBytes` behind gets a last overflow line
    /// (best effort) and is disconnected; returns false then. Never blocks.
    @discardableResult
    public func push(_ line: String) -> Bool {
        push { $0.append(contentsOf: line.utf8) }
    }

    /// Pushes the event line `head` + `tail`: the subscriber's own start (`{"event":...,"seq":N`) and the rest,
    /// encoded once for every subscriber. Same limits as `push(_:)`.
    @discardableResult
    public func push(head: String, tail: [UInt8]) -> Bool {
        push {
            $0.append(contentsOf: head.utf8)
            $0.append(contentsOf: tail)
        }
    }

    private func push(_ append: (inout [UInt8]) -> Void) -> Bool {
        guard !isClosed else { return false }
        if queuedBytes > server.limits.maxEventBytes {
            Log.warning("subscriber fd \(fd) fell \(queuedBytes) bytes behind: disconnecting it")
            // The unsent backlog is lost anyway; drop it (keeping the line already begun) so the overflow line
            // has a chance to fit into the socket's buffer before the close.
            if let end = out[outStart...].firstIndex(of: 0x0A) { out.removeSubrange((end + 1)...) }
            out.append(contentsOf: "{\"event\":\"overflow\"}\n".utf8)
            flush()
            close()
            return false
        }
        let wasEmpty = queuedBytes == 0
        append(&out)
        if wasEmpty {
            flush()
            if !isClosed { updateInterest() }
        }
        return !isClosed
    }

    private func readSome() {
        // Read only while the framer holds less than a line: the rest stays in the kernel's buffer.
        guard !inputEOF, framer.buffered <= server.limits.maxLine, queuedBytes < server.limits.maxQueuedBytes else {
            return
        }
        let n: Int
        do {
            n = try server.scratch.withUnsafeMutableBytes { (b) -> Result<Int, Errno> in
                let r = Result { () throws(Errno) -> Int in try FD.read(fd, into: b) }
                if case let .success(n) = r { framer.append(UnsafeRawBufferPointer(rebasing: b[0..<n])) }
                return r
            }.get()
        } catch {
            if error == .again { return }
            close()
            return
        }
        if n == 0 {
            inputEOF = true
            // A last request without its newline still counts (`printf PING | socat ...`).
            if framer.buffered > 0 { framer.append([0x0A]) }
        }
    }

    /// Answers the buffered requests and sends, until they run out or the client's socket is full. A queue that
    /// filled up (so taking requests paused) and then went into the socket at once would otherwise leave requests
    /// in the framer with nothing to wake the connection: no bytes to write, and no reading while the framer holds
    /// more than a line. Pipelined floods stalled that way.
    private func serve() {
        while true {
            processFrames()
            let paused = queuedBytes >= server.limits.maxQueuedBytes
            flush()
            guard paused, !isClosed, queuedBytes < server.limits.maxQueuedBytes else { return }
        }
    }

    private func processFrames() {
        while !isClosed && !held && !closeAfterFlush && queuedBytes < server.limits.maxQueuedBytes,
              let frame = framer.next() {
            guard let response = server.handler(self, frame) else { continue }
            if response.hold { held = true; continue }
            if let bytes = response.encoded { out.append(contentsOf: bytes) } else { enqueue(response) }
            if let t = response.trailer { out.append(contentsOf: t.utf8) }
            if response.close { closeAfterFlush = true }
        }
    }

    /// Queues one JSON line. Replies are never dropped; the queue bound is enforced by not reading more input.
    public func enqueue(_ json: JSON) {
        enqueue(Response(json))
    }

    public func enqueue(_ response: Response) {
        let buffer = server.replyBuffer
        buffer.count = 0
        response.encode(into: buffer)
        out.append(contentsOf: UnsafeBufferPointer(start: buffer.base, count: buffer.count))
    }

    private func flush() {
        while queuedBytes > 0 {
            let n: Int
            do {
                n = try FD.send(fd, out, from: outStart)
            } catch {
                if error == .again { break }
                close()   // EPIPE/ECONNRESET: the client is gone.
                return
            }
            outStart += n
        }
        if outStart == out.count {
            out.removeAll(keepingCapacity: out.capacity <= 65536)
            outStart = 0
        } else if outStart > 65536 {
            out.removeSubrange(0..<outStart)
            outStart = 0
        }
    }

    private func updateInterest() {
        // A client that half-isClosed after a WAIT or SUBSCRIBE still gets its reply and events.
        if queuedBytes == 0 && !held && (closeAfterFlush || (inputEOF && framer.buffered == 0 && !keepAfterEOF)) {
            close()
            return
        }
        var events: UInt32 = 0
        let canTakeMore = queuedBytes < server.limits.maxQueuedBytes && !closeAfterFlush && !held
        if canTakeMore && !inputEOF && framer.buffered <= server.limits.maxLine { events |= IOEvents.readable }
        if queuedBytes > 0 { events |= IOEvents.writable }
        if events != interest {
            interest = events
            source?.setEvents(events)
        }
    }

    /// Set for subscribers: end of their input does not end the stream of events.
    public var keepAfterEOF = false

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        source?.cancel()
        source = nil
        FD.close(fd)
        server.remove(self)
    }
}
