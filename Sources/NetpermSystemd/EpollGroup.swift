// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// An epoll instance of its own, seen by sd-event as one source: each pass of the loop serves every ready member
/// (up to `batch`), instead of one source per pass.
final class EpollGroup: IOGroup {
    private let batch: Int
    private let epfd: Int32
    private var source: IOSource?
    /// Keyed by an id, never by descriptor: a descriptor closed and reused within one batch must not reach the
    /// new member with the old one's event.
    private var handlers: [UInt64: (UInt32) -> Void] = [:]
    private var nextID: UInt64 = 1
    private var ready: [epoll_event]

    /// `servedFirst`: a higher sd-event priority than the loop's other sources (and other groups).
    init(loop: SDEventLoop, servedFirst: Bool, batch: Int) throws(Errno) {
        self.batch = batch
        ready = [epoll_event](repeating: epoll_event(), count: batch)
        epfd = try sys { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        do {
            let s = try loop.addIO(fd: epfd, events: IOEvents.readable) { [unowned self] _ in self.dispatch() }
            if servedFirst, let sd = (s as? SDIOSource)?.source { sd_event_source_set_priority(sd, -1) }
            source = s
        } catch {
            FD.close(epfd)
            throw error
        }
    }

    deinit {
        source?.cancel()
        FD.close(epfd)
    }

    func add(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(Errno) -> IOSource {
        let id = nextID
        nextID += 1
        try control(EPOLL_CTL_ADD, fd: fd, id: id, events)
        handlers[id] = handler
        return Member(group: self, fd: fd, id: id)
    }

    fileprivate func control(_ op: Int32, fd: Int32, id: UInt64, _ events: UInt32) throws(Errno) {
        var ev = epoll_event()
        ev.events = events
        ev.data.u64 = id
        _ = try sys { epoll_ctl(epfd, op, fd, &ev) }
    }

    private func dispatch() {
        let n = (try? ready.withUnsafeMutableBufferPointer { (buf) throws(Errno) -> Int32 in
            try sys { epoll_wait(epfd, buf.baseAddress, Int32(batch), 0) }
        }) ?? 0
        guard n > 0 else { return }
        for i in 0..<Int(n) {
            // A member closed by an earlier handler in this batch has no handler any more.
            handlers[ready[i].data.u64]?(ready[i].events)
        }
    }

    fileprivate func remove(_ id: UInt64) { handlers[id] = nil }

    final class Member: IOSource {
        private unowned let group: EpollGroup
        private let fd: Int32
        private let id: UInt64
        private var live = true

        init(group: EpollGroup, fd: Int32, id: UInt64) { self.group = group; self.fd = fd; self.id = id }

        func setEvents(_ events: UInt32) {
            guard live else { return }
            do { try group.control(EPOLL_CTL_MOD, fd: fd, id: id, events) } catch {
                Log.warning("epoll_ctl(MOD) of fd \(fd) failed: \(error)")
            }
        }

        /// Before the descriptor is closed.
        func cancel() {
            guard live else { return }
            live = false
            _ = try? group.control(EPOLL_CTL_DEL, fd: fd, id: id, 0)
            group.remove(id)
        }
    }
}

extension SDEventLoop {
    public func makeIOGroup(servedFirst: Bool, batch: Int) throws(Errno) -> IOGroup {
        try EpollGroup(loop: self, servedFirst: servedFirst, batch: batch)
    }
}
