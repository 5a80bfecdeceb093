// SPDX-License-Identifier: LGPL-2.1-or-later
/// The single-threaded event loop the edges register with. The daemon implements it with sd-event; the modules
/// that must not import libsystemd (the control socket, the netlink watcher, the policy reloader) see only this.
public protocol EventLoop: AnyObject {
    /// Calls `handler` with the ready events (`IOEvents` bits) while the source lives.
    func addIO(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(Errno) -> IOSource
    /// One-shot timer after `usec` microseconds on CLOCK_MONOTONIC.
    func addTimer(afterMicroseconds usec: UInt64, _ handler: @escaping () -> Void) throws(Errno) -> TimerSource
    /// Calls `handler` with the name of the entry that changed in directory `path` (nil for the directory itself).
    /// Throws when the path does not exist.
    func watch(directory path: String, _ handler: @escaping (String?) -> Void) throws(Errno) -> TimerSource
    /// See `IOGroup`. `servedFirst`: its ready members are served before any other source's; `batch`: at most this
    /// many ready members per pass, so that a group served first waits behind no more than that.
    func makeIOGroup(servedFirst: Bool, batch: Int) throws(Errno) -> IOGroup
    func exit(code: Int32)
}

public protocol IOSource: AnyObject {
    func setEvents(_ events: UInt32)
    /// Stops watching; the descriptor is not closed.
    func cancel()
}

/// A timer or a watch: something that fires until cancelled (or once, for a timer).
public protocol TimerSource: AnyObject {
    func cancel()
}

/// Many descriptors served as one source of the loop: one pass handles every ready descriptor. sd-event
/// dispatches one source per pass and re-polls all the others each time, so with a source per client a burst of
/// ready clients costs O(ready) per request (10,000 subscribers took 7 s to connect; 64 busy clients served 30%
/// fewer requests than 8).
public protocol IOGroup: AnyObject {
    func add(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(Errno) -> IOSource
}

extension EventLoop {
    public func makeIOGroup() throws(Errno) -> IOGroup { try makeIOGroup(servedFirst: false, batch: 256) }
}
