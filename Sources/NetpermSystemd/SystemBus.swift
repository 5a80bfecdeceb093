// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// The system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else its well-known socket) on the daemon's loop, for the services it
/// reads (NetworkManager, ModemManager). Nothing here blocks: the connection, its matches and every call are
/// asynchronous, each call bounded by `callTimeout`, and at most `maxCallsInFlight` out at once (`CallWindow`: the
/// rest wait, a call the bus refuses is tried again). A signal is taken only from whom it must come from: the bus
/// itself, or the connection that owns a followed name now (a unicast signal reaches us whatever a match's
/// `sender=`, from any peer). A bus whose socket is not there is connected to once its
/// directory says it was made (inotify): a machine without one (a container, a gateway without D-Bus) is not
/// tried every minute, each attempt bringing libsystemd's connecting code back into memory. A bus that refuses or
/// goes away is tried again, 5 s after, then every 60 s at most; each (re)connection tells `onConnect`, which sets
/// up its matches again.
public final class SystemBus {
    /// How long a service may take to answer one call before it counts as failed.
    public static let callTimeout: UInt64 = 5_000_000
    /// Calls out at once, well below the 128 replies a system bus lets one connection wait for.
    public static let maxCallsInFlight = 32

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
    private var window = CallWindow<BusCall>(limit: SystemBus.maxCallsInFlight)
    /// The back-off of a refused call while nothing else is out.
    private var heldTimer: TimerSource?
    /// Refused calls tried again since the last line said so.
    private var retried = 0
    /// The unique name owning each followed name, as the bus said (GetNameOwner, NameOwnerChanged).
    private var owners: [String: String] = [:]
    /// Signals from the wrong sender, said at most once a minute: any peer can send them.
    private var strangers = RateLimitedLog(intervalMicroseconds: 60_000_000)

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

    private static let onDisconnected: sd_bus_message_handler_t = { m, userdata, _ in
        guard let userdata else { return 0 }
        // sd-bus's own message (the bus daemon disconnects a peer that sends on the Local interface).
        guard let m, BusReply(m).sender == "org.freedesktop.DBus.Local" else { return 0 }
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
        let pending = slots.values.filter { $0.signal == nil } + window.drain()
        for c in slots.values { c.cancel() }
        slots = [:]
        window = CallWindow(limit: Self.maxCallsInFlight)
        heldTimer?.cancel()
        heldTimer = nil
        owners = [:]
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
    /// service that is not running is simply absent). `append` adds the arguments (to each try's message); `done`
    /// gets the reply, or the error's name (a time-out is `org.freedesktop.DBus.Error.Timeout`, no bus is
    /// `Disconnected`). The call waits its turn in the window; a refusal reaches `done` only after its last try.
    /// `timeout` and `autoStart` for polkit, which the bus starts on demand and which may wait for a person.
    public func call(_ destination: String, _ path: String, _ interface: String, _ member: String,
                     timeout: UInt64 = SystemBus.callTimeout, autoStart: Bool = false,
                     append: @escaping (OpaquePointer) -> Int32 = { _ in 0 },
                     _ done: @escaping (Result<BusReply, BusCallError>) -> Void) {
        guard bus != nil else { return done(.failure(BusCallError(name: "Disconnected", errno: ENOTCONN))) }
        window.add(BusCall(owner: self, call: (destination, path, interface, member, append, timeout, autoStart), done: done))
        pump()
    }

    /// Sends what the window lets go. Re-entered from a `done` that calls again: the window is consistent between
    /// its steps.
    private func pump() {
        while let (c, attempt) = window.next() { send(c, attempt: attempt) }
        if window.inFlight == 0 && window.waitingCount == 0 && retried > 0 {
            Log.info("system bus: \(retried) refused calls tried again; at most \(window.limit) out at once now")
            retried = 0
        }
    }

    private func send(_ c: BusCall, attempt: Int) {
        guard let bus, let call = c.call else {
            window.answered()
            return c.done(.failure(BusCallError(name: "Disconnected", errno: ENOTCONN)))
        }
        c.attempt = attempt
        var m: OpaquePointer?
        var r = sd_bus_message_new_method_call(bus, &m, call.destination, call.path, call.interface, call.member)
        defer { _ = sd_bus_message_unref(m) }
        if r >= 0, let m { r = sd_bus_message_set_auto_start(m, call.autoStart ? 1 : 0) }
        if r >= 0, let m { r = call.append(m) }
        var slot: OpaquePointer?
        if r >= 0, let m {
            r = sd_bus_call_async(bus, &slot, m, Self.onReply, Unmanaged.passUnretained(c).toOpaque(), call.timeout)
        }
        guard r >= 0 else {
            // Refused before it left (sd-bus's own queue is full): as the bus's refusal.
            if r == -ENOBUFS { return refused(c, BusCallError(name: "org.freedesktop.DBus.Error.LimitsExceeded", errno: ENOBUFS)) }
            window.answered()
            return c.done(.failure(BusCallError(name: "Failed", errno: -r)))
        }
        c.slot = slot
        slots[ObjectIdentifier(c)] = c
    }

    private func refused(_ c: BusCall, _ e: BusCallError) {
        switch window.refused(c, attempt: c.attempt) {
        case .queued:
            if retried == 0 { Log.info("system bus: a call was refused (\(e)); fewer are sent at once and it is tried again") }
            retried += 1
        case let .held(microseconds):
            if retried == 0 { Log.info("system bus: a call was refused (\(e)); it is tried again") }
            retried += 1
            heldTimer = try? loop.addTimer(afterMicroseconds: microseconds) { [weak self] in
                guard let self else { return }
                self.heldTimer = nil
                self.window.release()
                self.pump()
            }
            if heldTimer == nil { window.release() }
        case .givenUp:
            Log.info("system bus: \(c.call.map { "\($0.destination) \($0.interface).\($0.member)" } ?? "a call") refused "
                + "\(CallWindow<BusCall>.attempts) times (\(e)); given up")
            c.done(.failure(e))
        }
    }

    private static let onReply: sd_bus_message_handler_t = { m, userdata, _ in
        guard let userdata else { return 0 }
        let c = Unmanaged<BusCall>.fromOpaque(userdata).takeUnretainedValue()
        c.owner?.slots[ObjectIdentifier(c)] = nil
        c.cancel()
        guard let me = c.owner else { return 0 }
        let result: Result<BusReply, BusCallError>
        if let m, let e = sd_bus_message_get_error(m), sd_bus_error_is_set(e) != 0 {
            let error = BusCallError(name: e.pointee.name.map { String(cString: $0) } ?? "Failed",
                                     errno: sd_bus_error_get_errno(e))
            if error.refused {
                me.refused(c, error)
                me.pump()
                return 0
            }
            result = .failure(error)
        } else if let m {
            result = .success(BusReply(m))
        } else {
            result = .failure(BusCallError(name: "Failed", errno: EIO))
        }
        me.window.answered()
        c.done(result)
        me.pump()
        return 0
    }

    /// Hears every signal matching `rule` (a D-Bus match rule) that comes `from` whom it must, while connected;
    /// added again on reconnection by the caller's `onConnect`. The match is installed asynchronously. The rule's
    /// `sender=` only spares the bus broadcasting what we do not want: a peer's unicast signal reaches us whatever
    /// it says, so `from` is what is checked.
    public func subscribe(_ rule: String, from: SignalSender, _ handler: @escaping (BusReply) -> Void) {
        guard let bus else { return }
        let c = BusCall(owner: self, from: from, signal: handler)
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
        let c = Unmanaged<BusCall>.fromOpaque(userdata).takeUnretainedValue()
        guard let me = c.owner, let from = c.from else { return 0 }
        let signal = BusReply(m)
        guard me.accepts(signal, from: from) else { return 0 }
        c.signal?(signal)
        return 0
    }

    /// Whether `signal` comes from whom it must: the one place a signal's sender is checked. The bus daemon sets
    /// every message's sender to the sending connection's unique name (its own: "org.freedesktop.DBus"); no peer
    /// can take another's.
    private func accepts(_ signal: BusReply, from: SignalSender) -> Bool {
        let expected: String?
        switch from {
        case .bus: expected = "org.freedesktop.DBus"
        case let .owner(name): expected = owners[name]
        }
        let sender = signal.sender
        if let expected, sender == expected { return true }
        // No owner known yet (its GetNameOwner is on its way, and a reading follows it): not worth a notice.
        guard expected != nil else {
            Log.debug("system bus: ignored \(signal.member ?? "a signal") from \(sender ?? "no sender"): no owner known")
            return false
        }
        strangers.emit(5, "system bus: ignored \(signal.member ?? "a signal") from \(sender ?? "no sender"), not from "
            + (from.name.map { "\($0)'s owner" } ?? "the bus"))
        return false
    }

    /// The unique name that owns `name` now, as the bus last said; nil when none does or it was not asked.
    public func owner(of name: String) -> String? { owners[name] }

    /// Follows who owns `name` (within `onConnect`): `changed` hears each NameOwnerChanged the bus itself sends for
    /// it, with the new owner (nil: none). Signals subscribed `from: .owner(name)` are taken from that owner only.
    public func watchOwner(of name: String, _ changed: @escaping (String?) -> Void) {
        subscribe("type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
            + "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(name)'", from: .bus) { [weak self] m in
            guard let self, m.string() == name else { return }
            _ = m.string()
            let owner = m.string().flatMap { $0.isEmpty ? nil : $0 }
            self.owners[name] = owner
            changed(owner)
        }
    }

    /// Asks the bus who owns `name` now (GetNameOwner); the answer is also what `from: .owner(name)` checks. The
    /// bus answers in order with its NameOwnerChanged signals, so whichever arrives last is the newest.
    public func askOwner(of name: String, _ done: @escaping (Result<String?, BusCallError>) -> Void) {
        call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
             append: { BusMessage.append($0, "s", name) }) { [weak self] result in
            switch result {
            case let .success(reply):
                let owner = reply.string()
                self?.owners[name] = owner
                done(.success(owner))
            case let .failure(e) where e.serviceAbsent:
                self?.owners[name] = nil
                done(.success(nil))
            case let .failure(e):
                done(.failure(e))
            }
        }
    }
}

/// Whom a signal must come from to be heard.
public enum SignalSender: Equatable, Sendable {
    /// The bus daemon itself (NameOwnerChanged).
    case bus
    /// The connection that owns this well-known name now.
    case owner(String)

    var name: String? {
        switch self {
        case .bus: return nil
        case let .owner(n): return n
        }
    }
}

/// A call or a match in flight: what hears its answer, and its slot (unreferenced: cancelled).
final class BusCall {
    typealias Request = (destination: String, path: String, interface: String, member: String,
                         append: (OpaquePointer) -> Int32, timeout: UInt64, autoStart: Bool)
    weak var owner: SystemBus?
    var slot: OpaquePointer?
    /// A call's message, built again for each try.
    let call: Request?
    /// Its try (1 first).
    var attempt = 0
    let done: (Result<BusReply, BusCallError>) -> Void
    let signal: ((BusReply) -> Void)?
    /// A match's required sender.
    let from: SignalSender?

    init(owner: SystemBus, call: Request, done: @escaping (Result<BusReply, BusCallError>) -> Void) {
        self.owner = owner; self.call = call; self.done = done; signal = nil; from = nil
    }

    init(owner: SystemBus, from: SignalSender, signal: @escaping (BusReply) -> Void) {
        self.owner = owner; self.from = from; self.signal = signal; call = nil; done = { _ in }
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

    public init(name: String, errno: Int32) { self.name = name; self.errno = errno }

    /// The service did not answer in time (or the connection went).
    public var timedOut: Bool {
        name == "org.freedesktop.DBus.Error.Timeout" || name == "org.freedesktop.DBus.Error.NoReply" || name == "Disconnected"
    }

    /// The service is not on the bus (never was, stopped, or exited).
    public var serviceAbsent: Bool {
        name == "org.freedesktop.DBus.Error.ServiceUnknown" || name == "org.freedesktop.DBus.Error.NameHasNoOwner"
    }

    /// The bus could not start the service it names (its systemd unit masked or missing, its program failing): it is
    /// not running, and will not be until an administrator changes that.
    public var activationFailed: Bool {
        name.hasPrefix("org.freedesktop.DBus.Error.Spawn.") || name == "org.freedesktop.systemd1.UnitMasked"
            || name == "org.freedesktop.systemd1.NoSuchUnit"
    }

    /// The object asked is not there (removed since it was listed), or the service went: nothing to read of it.
    /// Every other failure says nothing of whether it is there.
    public var gone: Bool {
        serviceAbsent || name == "org.freedesktop.DBus.Error.UnknownObject"
            || name == "org.freedesktop.DBus.Error.UnknownMethod" || name == "org.freedesktop.DBus.Error.UnknownInterface"
    }

    /// The bus refused the call for want of room (too many calls of ours waiting, its memory): worth another try.
    var refused: Bool {
        name == "org.freedesktop.DBus.Error.LimitsExceeded" || name == "org.freedesktop.DBus.Error.NoMemory"
    }
}
