// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO

/// An EventLoop over poll(2) for tests: the transport and the daemon's interpreter run on it exactly as on
/// sd-event, one pass at a time. Its timers keep a `FakeClock`: they fire only when the test advances it.
public final class TestLoop: EventLoop {
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
    private let clock = FakeClock<Int>()
    private var timers: [Int: Source] = [:]
    private var nextTimer = 0

    public init() {}

    public func addIO(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(Errno) -> IOSource {
        let s = Source(fd: fd, events: events, handler: handler)
        sources.append(s)
        return s
    }

    public func addTimer(afterMicroseconds usec: UInt64, _ handler: @escaping () -> Void) throws(Errno) -> TimerSource {
        let s = Source(fd: -1, events: 0) { _ in handler() }
        nextTimer += 1
        timers[nextTimer] = s
        clock.arm(nextTimer, after: usec)
        return s
    }

    /// Moves the clock, firing each timer that falls due (and was not cancelled), earliest first.
    public func advance(byMicroseconds usec: UInt64) {
        clock.advance(by: usec) { id in
            guard let s = timers.removeValue(forKey: id), s.live else { return }
            s.live = false
            s.handler(0)
        }
    }

    /// Timers armed and not yet fired or cancelled.
    public var armedTimers: Int { timers.values.filter(\.live).count }

    public func watch(directory path: String, _ handler: @escaping (String?) -> Void) throws(Errno) -> TimerSource {
        throw Errno(ENOSYS)
    }

    /// Every source is served once per pass here, whatever its group's priority.
    public func makeIOGroup(servedFirst: Bool, batch: Int) throws(Errno) -> IOGroup { Group(loop: self) }

    public func exit(code: Int32) {}

    /// One pass: waits up to `timeoutMilliseconds` for a ready source, then dispatches each ready one once.
    public func runOnce(timeoutMilliseconds: Int32 = 50) {
        sources.removeAll { !$0.live }
        let watched = sources.filter { $0.events != 0 }
        var fds = watched.map { pollfd(fd: $0.fd, events: Self.pollEvents($0.events), revents: 0) }
        guard (try? sys { poll(&fds, nfds_t(fds.count), timeoutMilliseconds) }) ?? 0 > 0 else { return }
        for (s, p) in zip(watched, fds) where p.revents != 0 && s.live {
            s.handler(Self.epollEvents(p.revents))
        }
    }

    /// Passes of the loop until `done` holds; false after `timeout` seconds.
    public func run(until done: () -> Bool, timeout: Double = 5) -> Bool {
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
