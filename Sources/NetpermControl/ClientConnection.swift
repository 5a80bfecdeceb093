// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermIO

/// One connected client: its input framer and its bounded reply queue, and who sent what it reads.
final class ClientConnection {
    let id: UInt64
    let fd: Int32
    /// Who connected (SO_PEERCRED): its uid is what the per-uid limit counts.
    let connector: Credentials
    private unowned let server: ControlServer
    private var input: Input
    private var source: IOSource?
    /// Its first request was answered (it is served with the established clients).
    private var established = false
    private var out = OutQueue()
    private var phase = Phase.open
    /// A deferred reply is pending: later requests wait so replies stay in order.
    var held = false
    /// Set for subscribers: the end of their input does not end the stream of events.
    var keepAfterEOF = false
    private var interest: UInt32 = 0
    private var lag = Lag()
    private var pacing = Pacing()

    var queuedBytes: Int { out.queuedBytes }
    var isClosed: Bool { phase == .closed }

    /// What it reads: the framer, and who sent what (SO_PASSCRED).
    private struct Input {
        var framer: LineFramer
        /// Where each sender's bytes begin in the input stream (offsets as the framer counts them), oldest first;
        /// entries before the frame being delivered are dropped, so this holds one entry but for a shared socket.
        var senders: [(from: Int, sender: Credentials)] = []
        /// The peer ended its input.
        var ended = false
    }

    /// What waits to be sent, in order, from `first` on; `firstSent` bytes of `pieces[first]` went already.
    private struct OutQueue {
        var pieces: [Piece] = []
        var first = 0
        var firstSent = 0
        var queuedBytes = 0
    }

    /// Where the connection stands: open, flushing its last replies before it closes, closed.
    private enum Phase: String {
        case open, draining, closed
    }

    /// The one setter of its phase: logs old -> new.
    private func setPhase(_ new: Phase) {
        guard new != phase else { return }
        Log.debug("control socket: client fd \(fd): \(phase.rawValue) -> \(new.rawValue)")
        phase = new
    }

    /// A subscriber that fell behind: the events dropped since (nil while it keeps up), and the timer that closes it
    /// if it has not caught up `maxLagMicroseconds` after.
    private struct Lag {
        var dropped: Int?
        var stallTimer: TimerSource?
    }

    /// A subscriber's socket buffer is filled only to half (`room`), so that the last overflow line always fits
    /// in it, whether the subscriber reads or not: once it stopped reading with its buffer full, the line never
    /// reached anyone. `sendBuffer` is the buffer's size, `inKernel` what it holds at most (counted up as bytes
    /// go, read from the kernel when that count says half). `subscriber`: events were pushed to it; `lastLines`: its
    /// last lines go out without holding half its buffer back.
    private struct Pacing {
        var sendBuffer = 0
        var inKernel = 0
        var subscriber = false
        var lastLines = false
    }

    /// Replies (and event heads) are the connection's own bytes; an event's body is shared.
    private struct Piece {
        var own: [UInt8]
        var body: EventBody?
        var count: Int { own.count + (body?.bytes.count ?? 0) }
        var isEvent: Bool { body != nil }
    }

    init(id: UInt64, fd: Int32, connector: Credentials, server: ControlServer) {
        self.id = id
        self.fd = fd
        self.connector = connector
        self.server = server
        input = Input(framer: LineFramer(maxLine: server.limits.maxLine))
    }

    func start(in group: IOGroup) throws(Errno) {
        interest = IOEvents.readable
        source = try group.add(fd: fd, events: interest) { [unowned self] revents in
            self.ready(revents)
        }
    }

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
        var bytes = bytes
        // Nothing waits before it (most replies): sent from the caller's bytes, and only what the socket does not
        // take is queued. Queued first, every reply was copied into an array made, sent from and freed at once.
        if out.queuedBytes == 0, lag.dropped == nil, bytes.count > 0, bytes.count <= room() {
            let sent: Int?
            do { sent = try FD.send(fd, bytes) } catch {
                close()   // EPIPE/ECONNRESET: the client is gone.
                return
            }
            if let n = sent {
                pacing.inKernel += n + 1024
                if n == bytes.count {
                    updateInterest()
                    return
                }
                bytes = UnsafeRawBufferPointer(rebasing: bytes[n...])
            }
        }
        let wasEmpty = out.queuedBytes == 0
        // Replies in a row are one piece: a pipelined flood of them costs what one array does.
        if let last = out.pieces.indices.last, last >= out.first, !out.pieces[last].isEvent {
            out.pieces[last].own.append(contentsOf: bytes)
        } else {
            out.pieces.append(Piece(own: Array(bytes), body: nil))
        }
        grew(bytes.count, own: bytes.count)
        if wasEmpty { flushAndWatch() }
    }

    /// An event line. Never blocks: a subscriber that has fallen `maxEventBytes` behind (or is behind at all while
    /// all queues together hold more than `maxTotalQueuedBytes`) loses the events it has not read (never a reply),
    /// and the events after them, until it has read its queue empty; then the processor is told (`caughtUp`), and
    /// sends the whole state again. One that has not caught up within `maxLagMicroseconds` has stopped reading: it
    /// gets a last overflow line and is closed.
    func push(head: UnsafeRawBufferPointer, body: EventBody) {
        guard !isClosed else { return }
        pacing.subscriber = true
        if let d = lag.dropped {
            lag.dropped = d + 1
            return
        }
        if out.queuedBytes > server.limits.maxEventBytes
            || (out.queuedBytes > 0 && server.queuedTotal + head.count > server.limits.maxTotalQueuedBytes) {
            let lost = dropUnsentEvents() + 1
            lag.dropped = lost
            server.fellBehind(fd: fd, dropped: lost)
            lag.stallTimer = server.afterLagLimit { [weak self] in self?.stalled() }
            return
        }
        let wasEmpty = out.queuedBytes == 0
        out.pieces.append(Piece(own: Array(head), body: body))
        grew(head.count + body.bytes.count, own: head.count)
        if wasEmpty { flushAndWatch() }
    }

    private func grew(_ n: Int, own: Int) {
        out.queuedBytes += n
        server.tally.own += own
    }

    /// Drops the unsent event lines, keeping the line already begun (part of it went out) and every reply.
    /// Returns how many events were dropped.
    private func dropUnsentEvents() -> Int {
        var kept: [Piece] = []
        var count = 0
        var freed = 0, freedOwn = 0
        for i in out.first..<out.pieces.count {
            let p = out.pieces[i]
            if p.isEvent && !(i == out.first && out.firstSent > 0) {
                count += 1
                freed += p.count
                freedOwn += p.own.count
            } else {
                kept.append(p)
            }
        }
        out.pieces = kept
        out.first = 0
        out.queuedBytes -= freed
        server.tally.own -= freedOwn
        return count
    }

    /// Still behind when its time ran out: it is not reading. The line it was sent part of is finished, the
    /// overflow line follows (the half of its socket buffer kept free holds them), and it is closed.
    private func stalled() {
        lag.stallTimer = nil
        guard !isClosed, lag.dropped != nil else { return }
        server.stalled(fd: fd)
        // Only the line begun goes before it: replies queued behind it would not fit, and nothing reads them.
        let begun = out.firstSent > 0 ? out.first : nil
        releasePieces(from: begun.map { $0 + 1 } ?? out.first)
        let line = Array("{\"event\":\"overflow\"}\n".utf8)
        out.pieces.append(Piece(own: line, body: nil))
        grew(line.count, own: line.count)
        pacing.lastLines = true
        lag.dropped = nil
        flush()
        close()
    }

    /// Forgets the pieces from `index` on, unsent.
    private func releasePieces(from index: Int) {
        guard index < out.pieces.count else { return }
        for p in out.pieces[index...] {
            out.queuedBytes -= p.count
            server.tally.own -= p.own.count
        }
        out.pieces.removeSubrange(index...)
    }

    private func flushAndWatch() {
        flush()
        if !isClosed { updateInterest() }
    }

    func closeAfterFlush() {
        if phase == .open { setPhase(.draining) }
    }

    private func readSome() {
        // Read only while the framer holds less than a line: the rest stays in the kernel's buffer.
        guard !input.ended, input.framer.buffered <= server.limits.maxLine, mayTakeRequests else { return }
        let r: FD.Read
        do {
            r = try server.scratch.withUnsafeMutableBytes { (b) -> Result<FD.Read, Errno> in
                let r = Result { () throws(Errno) in try UnixSocket.receive(fd, into: b) }
                if case let .success((.bytes(n), sender)) = r {
                    // The kernel attaches credentials to every message once SO_PASSCRED is on; none means
                    // nobody can say who sent them.
                    let who = sender ?? .unknown
                    if input.senders.last?.sender != who { input.senders.append((input.framer.received, who)) }
                    input.framer.append(UnsafeRawBufferPointer(rebasing: b[0..<n]))
                }
                // A closure, not the key path `\.read`: that one was projected at run time (~510 instructions a read).
                return r.map { $0.read }
            }.get()
        } catch {
            close()
            return
        }
        switch r {
        case .bytes, .wouldBlock:
            break
        case .end:
            input.ended = true
            // A last request without its newline still counts (`printf PING | socat ...`).
            if input.framer.buffered > 0 { input.framer.append([0x0A]) }
        }
    }

    /// Requests are taken while this client's replies fit its queue, and while all queues together fit theirs
    /// (or this one is empty: a client that reads its replies is always served).
    private var mayTakeRequests: Bool {
        out.queuedBytes < server.limits.maxQueuedBytes
            && (out.queuedBytes == 0 || server.queuedTotal < server.limits.maxTotalQueuedBytes)
    }

    /// Hands the buffered requests over and sends, until they run out or the client's socket is full. A queue that
    /// filled up (so taking requests paused) and then went into the socket at once would otherwise leave requests
    /// in the framer with nothing to wake the connection: no bytes to write, and no reading while the framer holds
    /// more than a line. Pipelined floods stalled that way.
    private func serve() {
        while true {
            processFrames()
            let paused = !mayTakeRequests
            flush()
            guard paused, !isClosed, mayTakeRequests else { return }
        }
    }

    private func processFrames() {
        while !isClosed && !held && phase != .draining && mayTakeRequests, let frame = input.framer.next() {
            server.delegate.frame(id, frame, sender: sender(of: input.framer.frameStart))
            if !established && !isClosed { establish() }
        }
    }

    /// Its first request answered: from now on it is served with the established clients (`ControlServer`).
    private func establish() {
        established = true
        source?.cancel()
        do {
            source = try server.clientGroup.add(fd: fd, events: interest) { [unowned self] revents in self.ready(revents) }
        } catch {
            Log.warning("control socket: cannot move client fd \(fd) to the established clients: \(error)")
            close()
        }
    }

    /// Who sent the byte at `offset`: the process that began a line is the one it is answered for (a trusted
    /// program that merely ends someone else's line with a newline lends it nothing).
    private func sender(of offset: Int) -> Credentials {
        while input.senders.count > 1 && input.senders[1].from <= offset { input.senders.removeFirst() }
        return input.senders.first?.sender ?? .unknown
    }

    /// How much may go into the socket now: all of it, but for a subscriber only up to half its buffer.
    private func room() -> Int {
        guard pacing.subscriber || keepAfterEOF, !pacing.lastLines, !isClosed else { return .max }
        if pacing.sendBuffer == 0 {
            guard let b = try? UnixSocket.sendBuffer(fd) else { return .max }
            pacing.sendBuffer = max(b.size, 8192)
            pacing.inKernel = b.used
        }
        let half = pacing.sendBuffer / 2
        if pacing.inKernel >= half, let used = try? UnixSocket.sendQueue(fd) { pacing.inKernel = used }
        return max(0, half - pacing.inKernel)
    }

    private func flush() {
        while out.queuedBytes > 0 {
            let limit = room()
            guard limit > 0 else { break }
            let sent: Int?
            do { sent = try send(upTo: limit) } catch {
                close()   // EPIPE/ECONNRESET: the client is gone.
                return
            }
            guard let n = sent else { break }
            // What the kernel holds grows by the bytes and its own bookkeeping of them (at most about 1 KiB a send).
            pacing.inKernel += n + 1024
            advance(n)
        }
        if out.queuedBytes == 0 {
            out.pieces.removeAll(keepingCapacity: out.pieces.capacity <= 64)
            out.first = 0
            out.firstSent = 0
            if let d = lag.dropped, !isClosed {
                lag.dropped = nil
                lag.stallTimer?.cancel()
                lag.stallTimer = nil
                server.caughtUp(self, dropped: d)
            }
        } else if out.first > 64 && out.first * 2 > out.pieces.count {
            out.pieces.removeSubrange(0..<out.first)
            out.first = 0
        }
    }

    /// One send of at most `limit` bytes from the head of the queue: straight from the first piece when it
    /// holds them, else gathered in the server's buffer. nil: the socket is full.
    private func send(upTo limit: Int) throws(Errno) -> Int? {
        let p = out.pieces[out.first]
        if out.firstSent < p.own.count, p.body == nil || p.own.count - out.firstSent >= limit {
            return try p.own.withUnsafeBytes { b in
                Result { () throws(Errno) -> Int? in
                    try FD.send(fd, UnsafeRawBufferPointer(rebasing: b[out.firstSent..<(out.firstSent + min(b.count - out.firstSent, limit))]))
                }
            }.get()
        }
        if let body = p.body, out.firstSent >= p.own.count {
            return try body.bytes.withUnsafeBytes { b in
                let from = out.firstSent - p.own.count
                return Result { () throws(Errno) -> Int? in
                    try FD.send(fd, UnsafeRawBufferPointer(rebasing: b[from..<(from + min(b.count - from, limit))]))
                }
            }.get()
        }
        let want = min(limit, out.queuedBytes, server.gather.count)
        var n = 0, i = out.first, skip = out.firstSent
        server.gather.withUnsafeMutableBytes { g in
            while n < want && i < out.pieces.count {
                let piece = out.pieces[i]
                for part in [piece.own, piece.body?.bytes ?? []] where n < want {
                    if skip >= part.count { skip -= part.count; continue }
                    let take = min(part.count - skip, want - n)
                    part.withUnsafeBytes { src in
                        g.baseAddress!.advanced(by: n).copyMemory(from: src.baseAddress! + skip, byteCount: take)
                    }
                    n += take
                    skip = 0
                }
                i += 1
            }
        }
        return try server.gather.withUnsafeBytes { g in
            Result { () throws(Errno) -> Int? in try FD.send(fd, UnsafeRawBufferPointer(rebasing: g[0..<n])) }
        }.get()
    }

    /// `n` bytes went: the pieces they finish are let go (a body shared with others lives on in their queues).
    private func advance(_ n: Int) {
        var left = n
        out.queuedBytes -= n
        while left > 0 {
            let rest = out.pieces[out.first].count - out.firstSent
            if left < rest {
                out.firstSent += left
                return
            }
            left -= rest
            server.tally.own -= out.pieces[out.first].own.count
            out.pieces[out.first] = Piece(own: [], body: nil)
            out.first += 1
            out.firstSent = 0
        }
    }

    private func updateInterest() {
        // A client that half-closed after a WAIT or SUBSCRIBE still gets its reply and events.
        if out.queuedBytes == 0 && !held && (phase == .draining || (input.ended && input.framer.buffered == 0 && !keepAfterEOF)) {
            close()
            return
        }
        var events: UInt32 = 0
        let canTakeMore = mayTakeRequests && phase != .draining && !held
        if canTakeMore && !input.ended && input.framer.buffered <= server.limits.maxLine { events |= IOEvents.readable }
        if out.queuedBytes > 0 { events |= IOEvents.writable }
        if events != interest {
            interest = events
            source?.setEvents(events)
        }
    }

    func close() {
        guard !isClosed else { return }
        setPhase(.closed)
        lag.stallTimer?.cancel()
        lag.stallTimer = nil
        source?.cancel()
        source = nil
        FD.close(fd)
        releasePieces(from: out.first)
        out.pieces = []
        server.remove(self)
    }
}
