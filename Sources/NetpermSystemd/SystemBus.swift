// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// The system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else its well-known socket) on the daemon's loop, for the services it
/// reads (NetworkManager, ModemManager). Nothing here blocks: the connection, its matches and every call are
/// asynchronous, each call bounded by `callTimeout`. A bus whose socket is not there is connected to once its
/// directory says it was made (inotify): a machine without one (a container, a gateway without D-Bus) is not
/// tried every minute, each attempt bringing libsystemd's connecting code back into memory. A bus that refuses or
/// goes away is tried again, 5 s after, then every 60 s at most; each (re)connection tells `onConnect`, which sets
/// up its matches again.
public final class SystemBus {
    /// How long a service may take to answer one call before it counts as failed.
    public static let callTimeout: UInt64 = 5_000_000

    private let loop: SDEventLoop
    private(set) var bus: OpaquePointer?
    private var retry: TimerSource?
    /// The watch on the directory of a socket that is not there yet.
    private var socketWatch: TimerSource?
    private var retryDelay: UInt64 = 5_000_000
    private var connectedOnce = false
    /// Slots of matches and calls of this connection: unreferenced, they are cancelled.
    private var slots: [ObjectIdentifier: BusCall] = [:]
    private var clients: [(SystemBus) -> Void] = []
    private var losers: [() -> Void] = []
    private var disconnectSlot: OpaquePointer?

    public init(loop: SDEventLoop) {
        self.loop = loop
        connect()
    }

    deinit {
        drop()
        retry?.cancel()
        socketWatch?.cancel()
    }

    /// `body` runs now if the bus is connected, and after every (re)connection.
    public func onConnect(_ body: @escaping (SystemBus) -> Void) {
        clients.append(body)
        if bus != nil { body(self) }
    }

    /// `body` runs whenever the connection is lost (the bus daemon stopped or restarted).
    public func onDisconnect(_ body: @escaping () -> Void) { losers.append(body) }

    public var connected: Bool { bus != nil }

    private func connect() {
        var b: OpaquePointer?
        var r = sd_bus_open_system(&b)
        if r >= 0, let b { r = sd_bus_attach_event(b, loop.event, 0) }
        guard r >= 0, let b else {
            if let b { _ = sd_bus_close_unref(b) }
            if !connectedOnce && retryDelay == 5_000_000 && socketWatch == nil {
                Log.info("system bus: cannot connect (\(Errno(-r))); NetworkManager and ModemManager are not read "
                    + "until it is there")
            }
            socketWatch?.cancel()
            socketWatch = nil
            if !waitForSocket() { scheduleRetry() }
            return
        }
        bus = b
        retryDelay = 5_000_000
        if connectedOnce { Log.info("system bus: connected again") } else if socketWatch != nil { Log.info("system bus: connected") }
        socketWatch?.cancel()
        socketWatch = nil
        connectedOnce = true
        // sd-bus says a lost connection by a local signal.
        var slot: OpaquePointer?
        if sd_bus_match_signal(b, &slot, nil, "/org/freedesktop/DBus/Local", "org.freedesktop.DBus.Local",
                               "Disconnected", Self.onDisconnected, Unmanaged.passUnretained(self).toOpaque()) >= 0 {
            disconnectSlot = slot
        }
        for c in clients { c(self) }
    }

    private static let onDisconnected: sd_bus_message_handler_t = { _, userdata, _ in
        guard let userdata else { return 0 }
        let me = Unmanaged<SystemBus>.fromOpaque(userdata).takeUnretainedValue()
        Log.info("system bus: disconnected; connecting again in 5 s")
        // Not from inside sd-bus's own dispatch: the bus is closed from the loop, next.
        me.retry = try? me.loop.addTimer(afterMicroseconds: 0) { [weak me] in
            guard let me else { return }
            me.drop()
            for l in me.losers { l() }
            me.scheduleRetry()
        }
        return 0
    }

    /// Closes the connection; the calls in flight are answered `Disconnected` (a cancelled slot hears nothing, and
    /// whoever waited for it would wait for good).
    private func drop() {
        let pending = slots.values.filter { $0.signal == nil }
        for c in slots.values { c.cancel() }
        slots = [:]
        if let s = disconnectSlot { _ = sd_bus_slot_unref(s) }
        disconnectSlot = nil
        if let b = bus { _ = sd_bus_flush_close_unref(b) }
        bus = nil
        for c in pending { c.done(.failure(BusCallError(name: "Disconnected", errno: ENOTCONN))) }
    }

    /// When the bus's socket (`DBUS_SYSTEM_BUS_ADDRESS`'s `unix:path=`, else the well-known one) is not there:
    /// watches its directory and connects once an entry of that name is made there. False when it is there (the
    /// bus refused), or its address is no path, or its directory cannot be watched: then a timer tries again.
    private func waitForSocket() -> Bool {
        let address = getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }
        guard let path = Self.socketPath(address: address), let slash = path.lastIndex(of: "/") else { return false }
        let directory = slash == path.startIndex ? "/" : String(path[..<slash])
        let name = String(path[path.index(after: slash)...])
        guard access(path, F_OK) != 0, errno == ENOENT else { return false }
        do {
            socketWatch = try loop.watch(directory: directory) { [weak self] entry in
                guard let self, entry == nil || entry == name, self.bus == nil, self.retry == nil else { return }
                // From the loop, next: connecting ends this watch, which is not freed inside its own callback.
                self.retry = try? self.loop.addTimer(afterMicroseconds: 0) { [weak self] in
                    guard let self else { return }
                    self.retry = nil
                    if self.bus == nil { self.connect() }
                }
            }
        } catch {
            Log.debug("system bus: cannot watch \(directory) (\(error)); trying again in \(retryDelay / 1_000_000) s")
            return false
        }
        // Made between the attempt and the watch: the timer tries it.
        guard access(path, F_OK) != 0 else {
            socketWatch?.cancel()
            socketWatch = nil
            return false
        }
        Log.debug("system bus: waiting for \(path) to be made")
        return true
    }

    /// The socket of a `unix:path=` address (its first transport), or of the well-known address when none is set;
    /// nil for any other (an abstract socket, TCP, an escaped path).
    static func socketPath(address: String?) -> String? {
        guard let address else { return "/run/dbus/system_bus_socket" }
        let first = address.split(separator: ";").first.map(String.init) ?? ""
        guard first.hasPrefix("unix:") else { return nil }
        for pair in first.dropFirst(5).split(separator: ",") where pair.hasPrefix("path=") {
            let path = String(pair.dropFirst(5))
            return path.hasPrefix("/") && !path.contains("%") ? path : nil
        }
        return nil
    }

    private func scheduleRetry() {
        let delay = retryDelay
        retryDelay = min(retryDelay * 2, 60_000_000)
        retry = try? loop.addTimer(afterMicroseconds: delay) { [weak self] in
            guard let self else { return }
            self.retry = nil
            if self.bus == nil { self.connect() }
        }
    }

    /// Calls `member` of `interface` on `destination`'s `path` without starting the service (no activation: a
    /// service that is not running is simply absent). `append` adds the arguments; `done` gets the reply, or the
    /// error's name (a time-out is `org.freedesktop.DBus.Error.Timeout`, no bus is `Disconnected`).
    public func call(_ destination: String, _ path: String, _ interface: String, _ member: String,
                     append: (OpaquePointer) -> Int32 = { _ in 0 },
                     _ done: @escaping (Result<BusReply, BusCallError>) -> Void) {
        guard let bus else { return done(.failure(BusCallError(name: "Disconnected", errno: ENOTCONN))) }
        var m: OpaquePointer?
        var r = sd_bus_message_new_method_call(bus, &m, destination, path, interface, member)
        defer { _ = sd_bus_message_unref(m) }
        if r >= 0, let m { r = sd_bus_message_set_auto_start(m, 0) }
        if r >= 0, let m { r = append(m) }
        let c = BusCall(owner: self, done: done)
        var slot: OpaquePointer?
        if r >= 0, let m {
            r = sd_bus_call_async(bus, &slot, m, Self.onReply, Unmanaged.passUnretained(c).toOpaque(), Self.callTimeout)
        }
        guard r >= 0 else { return done(.failure(BusCallError(name: "Failed", errno: -r))) }
        c.slot = slot
        slots[ObjectIdentifier(c)] = c
    }

    private static let onReply: sd_bus_message_handler_t = { m, userdata, _ in
        guard let userdata else { return 0 }
        let c = Unmanaged<BusCall>.fromOpaque(userdata).takeUnretainedValue()
        c.owner?.slots[ObjectIdentifier(c)] = nil
        c.cancel()
        guard let m else {
            c.done(.failure(BusCallError(name: "Failed", errno: EIO)))
            return 0
        }
        if let e = sd_bus_message_get_error(m), sd_bus_error_is_set(e) != 0 {
            c.done(.failure(BusCallError(name: e.pointee.name.map { String(cString: $0) } ?? "Failed",
                                         errno: sd_bus_error_get_errno(e))))
        } else {
            c.done(.success(BusReply(m)))
        }
        return 0
    }

    /// Hears every signal matching `rule` (a D-Bus match rule) while connected; added again on reconnection by the
    /// caller's `onConnect`. The match is installed asynchronously.
    public func subscribe(_ rule: String, _ handler: @escaping (BusReply) -> Void) {
        guard let bus else { return }
        let c = BusCall(owner: self, signal: handler)
        var slot: OpaquePointer?
        let r = sd_bus_add_match_async(bus, &slot, rule, Self.onSignal, nil, Unmanaged.passUnretained(c).toOpaque())
        guard r >= 0 else {
            Log.warning("system bus: cannot match \(rule): \(Errno(-r))")
            return
        }
        c.slot = slot
        slots[ObjectIdentifier(c)] = c
    }

    private static let onSignal: sd_bus_message_handler_t = { m, userdata, _ in
        guard let userdata, let m else { return 0 }
        Unmanaged<BusCall>.fromOpaque(userdata).takeUnretainedValue().signal?(BusReply(m))
        return 0
    }
}

/// A call or a match in flight: what hears its answer, and its slot (unreferenced: cancelled).
final class BusCall {
    weak var owner: SystemBus?
    var slot: OpaquePointer?
    let done: (Result<BusReply, BusCallError>) -> Void
    let signal: ((BusReply) -> Void)?

    init(owner: SystemBus, done: @escaping (Result<BusReply, BusCallError>) -> Void) {
        self.owner = owner; self.done = done; signal = nil
    }

    init(owner: SystemBus, signal: @escaping (BusReply) -> Void) {
        self.owner = owner; self.signal = signal; done = { _ in }
    }

    func cancel() {
        if let slot { _ = sd_bus_slot_unref(slot) }
        slot = nil
    }
}

/// A failed call: the D-Bus error's name and its errno.
public struct BusCallError: Error, Equatable, Sendable, CustomStringConvertible {
    public var name: String
    public var errno: Int32
    public var description: String { "\(name) (\(Errno(errno)))" }

    /// The service did not answer in time (or the connection went).
    public var timedOut: Bool {
        name == "org.freedesktop.DBus.Error.Timeout" || name == "org.freedesktop.DBus.Error.NoReply" || name == "Disconnected"
    }

    /// The service is not on the bus (never was, stopped, or exited).
    public var serviceAbsent: Bool {
        name == "org.freedesktop.DBus.Error.ServiceUnknown" || name == "org.freedesktop.DBus.Error.NameHasNoOwner"
    }
}
