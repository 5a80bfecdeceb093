import NetpermIO

/// One connected client: its input framer and its bounded reply queue, and who sent what it reads.
final class ClientConnection {
    let id: UInt64
    let fd: Int32
    /// Who connected (SO_PEERCRED): its uid is what the per-uid limit counts.
    let connector: Credentials
    private unowned let server: ControlServer
    /// Where each sender's bytes begin in the input stream (offsets as the framer counts them), oldest first;
    /// entries before the frame being delivered are dropped, so this holds one entry but for a shared socket.
    private var senders: [(from: Int, sender: Credentials)] = []
    private var source: IOSource?
    private var framer: LineFramer
    private var out: [UInt8] = []
    private var outStart = 0
    private var closingAfterFlush = false
    private var inputEOF = false
    /// A deferred reply is pending: later requests wait so replies stay in order.
    var held = false
    /// Set for subscribers: the end of their input does not end the stream of events.
    var keepAfterEOF = false
    private var interest: UInt32 = 0
    private(set) var isClosed = false
    /// Events dropped since the subscriber fell `maxEventBytes` behind; nil while it keeps up.
    private var dropped: Int?
    /// Closes a subscriber that has not caught up `maxLagMicroseconds` after falling behind.
    private var stallTimer: TimerSource?

    init(id: UInt64, fd: Int32, connector: Credentials, server: ControlServer) {
        self.id = id
        self.fd = fd
        self.connector = connector
        self.server = server
        framer = LineFramer(maxLine: server.limits.maxLine)
    }

    func start(in group: IOGroup) throws(Errno) {
        interest = IOEvents.readable
        source = try group.add(fd: fd, events: interest) { [unowned self] revents in
            self.ready(revents)
        }
    }

    var queuedBytes: Int { out.count - outStart }

    private func ready(_ revents: UInt32) {
        // HUP: the peer closed both directions; nothing more can be delivered, so clean up at once.
        if revents & (IOEvents.hangup | IOEvents.error) != 0 { close(); return }
        if revents & IOEvents.writable != 0 { flush() }
        if !isClosed && revents & IOEvents.readable != 0 { readSome() }
        if !isClosed { serve(); updateInterest() }
    }

    /// Takes the requests buffered while held.
    func resume() {
        guard !isClosed else { return }
        serve()
        if !isClosed { updateInterest() }
    }

    func queue(_ bytes: UnsafeRawBufferPointer) {
        guard !isClosed else { return }
        let wasEmpty = queuedBytes == 0
        out.append(contentsOf: bytes)
        if wasEmpty { flushAndWatch() }
    }

    /// An event line. Never blocks: a subscriber that has fallen `maxEventBytes` behind loses the events it has
    /// not read (never a reply), and the events after them, until it has read its queue empty; then the
    /// processor is told (`caughtUp`), and sends the whole state again. One that has not caught up within
    /// `maxLagMicroseconds` has stopped reading: it gets a last overflow line (best effort) and is closed.
    func push(head: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer) {
        guard !isClosed else { return }
        if let d = dropped {
            dropped = d + 1
            return
        }
        if queuedBytes > server.limits.maxEventBytes {
            let lost = dropUnsentEvents() + 1
            dropped = lost
            Log.warning("subscriber fd \(fd) fell more than \(server.limits.maxEventBytes) bytes behind: dropped "
                + "\(lost) events; it gets the whole state again once it has caught up")
            stallTimer = server.afterLagLimit { [weak self] in self?.stalled() }
            return
        }
        let wasEmpty = queuedBytes == 0
        out.append(contentsOf: head)
        out.append(contentsOf: tail)
        if wasEmpty { flushAndWatch() }
    }

    /// Drops the unsent event lines, keeping the line already begun (part of it went out) and every reply.
    /// Returns how many events were dropped. Event lines are told apart by their start, `{"event":`.
    private func dropUnsentEvents() -> Int {
        guard let firstEnd = out[outStart...].firstIndex(of: 0x0A) else { return 0 }
        let eventStart = Array("{\"event\":".utf8)
        var kept = Array(out[..<(firstEnd + 1)])
        var count = 0
        var start = firstEnd + 1
        while start < out.count {
            let end = out[start...].firstIndex(of: 0x0A).map { $0 + 1 } ?? out.count
            if out[start..<end].starts(with: eventStart) {
                count += 1
            } else {
                kept.append(contentsOf: out[start..<end])
            }
            start = end
        }
        out = kept
        return count
    }

    /// Still behind when its time ran out: it is not reading.
    private func stalled() {
        stallTimer = nil
        guard !isClosed, dropped != nil else { return }
        Log.warning("subscriber fd \(fd) has not caught up \(server.limits.maxLagMicroseconds / 1_000_000) s after "
            + "falling behind: disconnecting it")
        out.append(contentsOf: "{\"event\":\"overflow\"}\n".utf8)
        flush()
        close()
    }

    private func flushAndWatch() {
        flush()
        if !isClosed { updateInterest() }
    }

    func closeAfterFlush() {
        closingAfterFlush = true
    }

    private func readSome() {
        // Read only while the framer holds less than a line: the rest stays in the kernel's buffer.
        guard !inputEOF, framer.buffered <= server.limits.maxLine, queuedBytes < server.limits.maxQueuedBytes else {
            return
        }
        let r: FD.Read
        do {
            r = try server.scratch.withUnsafeMutableBytes { (b) -> Result<FD.Read, Errno> in
                let r = Result { () throws(Errno) in try UnixSocket.receive(fd, into: b) }
                if case let .success((.bytes(n), sender)) = r {
                    // The kernel attaches credentials to every message once SO_PASSCRED is on; none means
                    // nobody can say who sent them.
                    let who = sender ?? .unknown
                    if senders.last?.sender != who { senders.append((framer.received, who)) }
                    framer.append(UnsafeRawBufferPointer(rebasing: b[0..<n]))
                }
                return r.map(\.read)
            }.get()
        } catch {
            close()
            return
        }
        switch r {
        case .bytes, .wouldBlock:
            break
        case .end:
            inputEOF = true
            // A last request without its newline still counts (`printf PING | socat ...`).
            if framer.buffered > 0 { framer.append([0x0A]) }
        }
    }

    /// Hands the buffered requests over and sends, until they run out or the client's socket is full. A queue that
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
        while !isClosed && !held && !closingAfterFlush && queuedBytes < server.limits.maxQueuedBytes,
              let frame = framer.next() {
            server.delegate.frame(id, frame, sender: sender(of: framer.frameStart))
        }
    }

    /// Who sent the byte at `offset`: the process that began a line is the one it is answered for (a trusted
    /// program that merely ends someone else's line with a newline lends it nothing).
    private func sender(of offset: Int) -> Credentials {
        while senders.count > 1 && senders[1].from <= offset { senders.removeFirst() }
        return senders.first?.sender ?? .unknown
    }

    private func flush() {
        while queuedBytes > 0 {
            let sent: Int?
            do { sent = try FD.send(fd, out, from: outStart) } catch {
                close()   // EPIPE/ECONNRESET: the client is gone.
                return
            }
            guard let n = sent else { break }
            outStart += n
        }
        if outStart == out.count {
            out.removeAll(keepingCapacity: out.capacity <= 65536)
            outStart = 0
            if let d = dropped, !isClosed {
                dropped = nil
                stallTimer?.cancel()
                stallTimer = nil
                server.caughtUp(self, dropped: d)
            }
        } else if outStart > 65536 {
            out.removeSubrange(0..<outStart)
            outStart = 0
        }
    }

    private func updateInterest() {
        // A client that half-closed after a WAIT or SUBSCRIBE still gets its reply and events.
        if queuedBytes == 0 && !held && (closingAfterFlush || (inputEOF && framer.buffered == 0 && !keepAfterEOF)) {
            close()
            return
        }
        var events: UInt32 = 0
        let canTakeMore = queuedBytes < server.limits.maxQueuedBytes && !closingAfterFlush && !held
        if canTakeMore && !inputEOF && framer.buffered <= server.limits.maxLine { events |= IOEvents.readable }
        if queuedBytes > 0 { events |= IOEvents.writable }
        if events != interest {
            interest = events
            source?.setEvents(events)
        }
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        stallTimer?.cancel()
        stallTimer = nil
        source?.cancel()
        source = nil
        FD.close(fd)
        server.remove(self)
    }
}
