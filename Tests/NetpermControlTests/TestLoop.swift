import Glibc
import NetpermIO

/// An EventLoop over poll(2) for tests: the transport runs on it exactly as on sd-event, one pass at a time,
/// with no daemon behind it.
final class TestLoop: EventLoop {
    final class Source: IOSource, TimerSource {
        let fd: Int32
        var events: UInt32
        let handler: (UInt32) -> Void
        var live = true
        init(fd: Int32, events: UInt32, handler: @escaping (UInt32) -> Void) {
            self.fd = fd; self.events = events; self.handler = handler
        }
        func setEvents(_ events: UInt32) { self.events = events }
        func cancel() { live = false }
    }

    final class Group: IOGroup {
        unowned let loop: TestLoop
        init(loop: TestLoop) { self.loop = loop }
        func add(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(Errno) -> IOSource {
            try loop.addIO(fd: fd, events: events, handler)
        }
    }

    private var sources: [Source] = []
    private var timers: [(at: UInt64, source: Source)] = []

    func addIO(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(Errno) -> IOSource {
        let s = Source(fd: fd, events: events, handler: handler)
        sources.append(s)
        return s
    }

    func addTimer(afterMicroseconds usec: UInt64, _ handler: @escaping () -> Void) throws(Errno) -> TimerSource {
        let s = Source(fd: -1, events: 0) { _ in handler() }
        timers.append((Clock.monotonicMicroseconds() + usec, s))
        return s
    }

    func watch(directory path: String, _ handler: @escaping (String?) -> Void) throws(Errno) -> TimerSource {
        throw Errno(ENOSYS)
    }

    func makeIOGroup() throws(Errno) -> IOGroup { Group(loop: self) }

    func exit(code: Int32) {}

    /// One pass: waits up to `timeoutMilliseconds` for a ready source, then dispatches each ready one once.
    func runOnce(timeoutMilliseconds: Int32 = 50) {
        sources.removeAll { !$0.live }
        let now = Clock.monotonicMicroseconds()
        for t in timers where t.at <= now && t.source.live {
            t.source.live = false
            t.source.handler(0)
        }
        timers.removeAll { !$0.source.live }
        let watched = sources.filter { $0.events != 0 }
        var fds = watched.map { pollfd(fd: $0.fd, events: Self.pollEvents($0.events), revents: 0) }
        guard (try? sys { poll(&fds, nfds_t(fds.count), timeoutMilliseconds) }) ?? 0 > 0 else { return }
        for (s, p) in zip(watched, fds) where p.revents != 0 && s.live {
            s.handler(Self.epollEvents(p.revents))
        }
    }

    /// Passes of the loop until `done` holds; false after `timeout` seconds.
    func run(until done: () -> Bool, timeout: Double = 5) -> Bool {
        let deadline = Clock.monotonicSeconds() + timeout
        while !done() {
            if Clock.monotonicSeconds() > deadline { return false }
            runOnce(timeoutMilliseconds: 10)
        }
        return true
    }

    private static func pollEvents(_ e: UInt32) -> Int16 {
        (e & IOEvents.readable != 0 ? Int16(POLLIN) : 0) | (e & IOEvents.writable != 0 ? Int16(POLLOUT) : 0)
    }

    private static func epollEvents(_ r: Int16) -> UInt32 {
        (r & Int16(POLLIN) != 0 ? IOEvents.readable : 0) | (r & Int16(POLLOUT) != 0 ? IOEvents.writable : 0)
            | (r & Int16(POLLHUP) != 0 ? IOEvents.hangup : 0) | (r & Int16(POLLERR) != 0 ? IOEvents.error : 0)
    }
}
