// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// One connection to the caller's own user manager, kept open for the scopes `netpermctl scopes` makes one after
/// another (a new connection per scope cost the manager an accept, an authentication and a teardown: BENCHMARKS.md
/// figure 23). The manager sends every connection to its private socket every unit's changes: the caller polls
/// `pollFD` and calls `drain()` when it is ready, so that nothing piles up in the socket or in the manager. A
/// connection the manager closed (it stopped, or re-executed itself) is made again, and a scope it failed for on
/// that account is asked for once more on the new one.
public final class UserManagerConnection {
    private let uid: UInt32
    private var bus: OpaquePointer?
    private var reached = ""
    private var direct = true

    public init(uid: UInt32) { self.uid = uid }

    deinit { close() }

    /// Starts the scope `name` holding `pids` in `slice` and waits (at most `timeout` seconds) for its start job.
    public func start(name: String, pids: [UInt32], description: String, slice: String,
                      timeout: Double = 5) throws(TransientScope.Failure) {
        var attempt = 0
        while true {
            attempt += 1
            if bus == nil { try open() }
            guard let bus else { return }
            do {
                try TransientScope.start(name: name, pids: pids, description: description, slice: slice,
                                         connection: (bus, reached, direct), timeout: timeout, keep: true)
                return
            } catch {
                guard sd_bus_is_open(bus) <= 0 else { throw error }
                close()
                if attempt > 1 { throw error }
            }
        }
    }

    /// What to poll for while idle (nil: no connection open).
    public var pollFD: pollfd? {
        guard let bus else { return nil }
        let events = sd_bus_get_events(bus)
        return pollfd(fd: sd_bus_get_fd(bus), events: Int16(truncatingIfNeeded: events > 0 ? events : Int32(POLLIN)), revents: 0)
    }

    /// Reads and drops what the manager sent (signals nobody waits for now); a connection it closed is closed.
    public func drain() {
        guard let bus else { return }
        var r: Int32
        repeat { r = sd_bus_process(bus, nil) } while r > 0
        if r < 0 || sd_bus_is_open(bus) <= 0 { close() }
    }

    private func open() throws(TransientScope.Failure) {
        (bus, reached, direct) = try TransientScope.connect(ofUser: uid)
    }

    private func close() {
        if let bus { _ = sd_bus_flush_close_unref(bus) }
        bus = nil
    }
}
