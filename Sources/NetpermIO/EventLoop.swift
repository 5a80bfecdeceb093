/// The single-threaded event loop the edges register with. The daemon implements it with sd-event;
/// modules that must not import libsystemd (the control socket) see only this protocol.
public protocol EventLoop: AnyObject {
    /// Calls `handler` with the ready events (EPOLLIN/EPOLLOUT/EPOLLHUP bits) while the source lives.
    func addIO(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(Errno) -> IOSource
    /// One-shot timer after `usec` microseconds on CLOCK_MONOTONIC.
    func addTimer(afterMicroseconds usec: UInt64, _ handler: @escaping () -> Void) throws(Errno) -> TimerSource
    func exit(code: Int32)
    /// See `IOGroup`.
    func makeIOGroup() throws(Errno) -> IOGroup
}

public protocol IOSource: AnyObject {
    func setEvents(_ events: UInt32)
    /// Stops watching; the descriptor is not closed.
    func cancel()
}

public protocol TimerSource: AnyObject {
    func cancel()
}

/// epoll event bits (<sys/epoll.h> is not part of Swift's Glibc module).
public enum IOEvents {
    public static let readable: UInt32 = 0x001
    public static let writable: UInt32 = 0x004
    public static let error: UInt32 = 0x008
    public static let hangup: UInt32 = 0x010
}

/// Many descriptors served as one source of the loop: one pass handles every ready descriptor. sd-event
/// dispatches one source per pass and re-polls all the others each time, so with a source per client a burst of
/// ready clients costs O(ready) per request (10,000 subscribers took 7 s to connect; 64 busy clients served 30%
/// fewer requests than 8).
public protocol IOGroup: AnyObject {
    func add(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(Errno) -> IOSource
}

extension EventLoop {
    /// A group whose members are ordinary sources of this loop (for loops without a better way).
    public func makeIOGroup() throws(Errno) -> IOGroup { SourcePerMember(loop: self) }
}

final class SourcePerMember: IOGroup {
    unowned let loop: EventLoop
    init(loop: EventLoop) { self.loop = loop }
    func add(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(Errno) -> IOSource {
        try loop.addIO(fd: fd, events: events, handler)
    }
}
