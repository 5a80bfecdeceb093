// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// The desktop's notification server (org.freedesktop.Notifications, the Desktop Notifications Specification) on
/// the user's session bus, over sd-bus: `netpermctl agent --notify` shows prompts with it. Its signals are taken only
/// from the connection that owns the server's name now (a signal any peer sends straight to the agent is not the
/// server's), followed through NameOwnerChanged: a server that restarts is a new one, whose notifications start over.
public final class DesktopNotifications {
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// What the server said, in order.
    public enum Signal: Equatable, Sendable {
        /// The person chose an action (`key` as given to `notify`; "default" for the notification itself).
        case actionInvoked(id: UInt32, key: String)
        /// Gone from the screen: 1 expired, 2 dismissed by the person, 3 closed by `close`, 4 otherwise.
        case closed(id: UInt32, reason: UInt32)
        /// Another connection owns the server's name (its unique name), or none: every notification shown is gone.
        case serverChanged(owner: String?)
        /// The server's answer to `notifyLater` `token`: the notification's id, or why not.
        case shown(token: UInt64, result: Result<UInt32, Failure>)
        /// The server's answer to `closeLater(id)`: nil when it closed it (or had no such notification).
        case closeAnswered(id: UInt32, failure: Failure?)
    }

    /// How long a call's reply is waited for. A notification is drawn in milliseconds, in seconds by a server that
    /// struggles; a Notify whose reply never comes leaves a notification the agent cannot name, so it is waited for
    /// longer than a close.
    static let notifyTimeoutUsec: UInt64 = 30_000_000
    static let closeTimeoutUsec: UInt64 = 10_000_000

    static let name = "org.freedesktop.Notifications"
    static let path = "/org/freedesktop/Notifications"

    private let bus: OpaquePointer
    private var slots: [OpaquePointer?] = []
    private let inbox = Inbox()
    /// Where the bus is, for messages.
    public let address: String

    private final class Inbox {
        var signals: [Signal] = []
        /// The unique name owning the server's name: the only sender whose signals count.
        var owner: String?
        var tokens: UInt64 = 0
        /// Calls sent whose reply (or time-out) has not come yet.
        var inFlight = 0
    }

    /// Notify and CloseNotification calls not answered yet.
    public var callsInFlight: Int { inbox.inFlight }

    /// The server's connection (its unique name), nil while none owns the name.
    public var owner: String? { inbox.owner }

    /// The session bus as sd-bus finds it: `$DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`.
    public init() throws(Failure) {
        let env = getenv("DBUS_SESSION_BUS_ADDRESS").map { String(cString: $0) }
        let runtime = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) }
        address = env ?? runtime.map { "unix:path=" + TransientScope.addressEscape($0 + "/bus") } ?? "(none)"
        guard env != nil || runtime != nil else {
            throw Failure(description: "no session bus: neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set "
                          + "(a graphical session sets them)")
        }
        var b: OpaquePointer?
        let r = sd_bus_open_user(&b)
        guard r >= 0, let b else {
            _ = sd_bus_close_unref(b)
            throw Failure(description: "cannot reach the session bus \(address): \(Errno(-r))")
        }
        bus = b
        let context = Unmanaged.passUnretained(inbox).toOpaque()
        for (member, handler) in [("ActionInvoked", Self.onAction), ("NotificationClosed", Self.onClosed)] as
            [(String, sd_bus_message_handler_t)] {
            var slot: OpaquePointer?
            let m = sd_bus_match_signal(bus, &slot, Self.name, Self.path, Self.name, member, handler, context)
            guard m >= 0 else {
                _ = sd_bus_flush_close_unref(bus)
                throw Failure(description: "cannot watch \(Self.name) on \(address): \(Errno(-m))")
            }
            slots.append(slot)
        }
        var slot: OpaquePointer?
        let rule = "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
            + "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(Self.name)'"
        let m = sd_bus_add_match(bus, &slot, rule, Self.onOwner, context)
        guard m >= 0 else {
            _ = sd_bus_flush_close_unref(bus)
            throw Failure(description: "cannot watch who owns \(Self.name) on \(address): \(Errno(-m))")
        }
        slots.append(slot)
    }

    /// Asks the bus who owns the server's name now (after `capabilities()`, which starts an activatable server).
    public func findOwner() {
        var m: OpaquePointer?, reply: OpaquePointer?
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error); _ = sd_bus_message_unref(m); _ = sd_bus_message_unref(reply) }
        var r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                               "GetNameOwner")
        if r >= 0, let m { r = BusMessage.append(m, "s", Self.name) }
        if r >= 0 { r = sd_bus_call(bus, m, 5_000_000, &error, &reply) }
        var owner: UnsafePointer<CChar>?
        guard r >= 0, sd_bus_message_read_basic(reply, BusMessage.type("s"), &owner) > 0, let owner else {
            inbox.owner = nil
            return
        }
        inbox.owner = String(cString: owner)
    }

    /// Whether `m` comes from the server's connection.
    private static func fromServer(_ m: OpaquePointer, _ inbox: Inbox) -> Bool {
        guard let sender = sd_bus_message_get_sender(m), let owner = inbox.owner else { return false }
        return String(cString: sender) == owner
    }

    deinit {
        for s in slots { _ = sd_bus_slot_unref(s) }
        _ = sd_bus_flush_close_unref(bus)
    }

    private static let onAction: sd_bus_message_handler_t = { m, userdata, _ in
        guard let m, let userdata, fromServer(m, Unmanaged<Inbox>.fromOpaque(userdata).takeUnretainedValue()) else { return 0 }
        var id: UInt32 = 0
        var key: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(m, BusMessage.type("u"), &id) > 0,
              sd_bus_message_read_basic(m, BusMessage.type("s"), &key) > 0, let key else { return 0 }
        let signal = Signal.actionInvoked(id: id, key: String(cString: key))
        Unmanaged<Inbox>.fromOpaque(userdata).takeUnretainedValue().signals.append(signal)
        return 0
    }

    private static let onClosed: sd_bus_message_handler_t = { m, userdata, _ in
        guard let m, let userdata, fromServer(m, Unmanaged<Inbox>.fromOpaque(userdata).takeUnretainedValue()) else { return 0 }
        var id: UInt32 = 0
        var reason: UInt32 = 0
        guard sd_bus_message_read_basic(m, BusMessage.type("u"), &id) > 0,
              sd_bus_message_read_basic(m, BusMessage.type("u"), &reason) > 0 else { return 0 }
        Unmanaged<Inbox>.fromOpaque(userdata).takeUnretainedValue().signals.append(.closed(id: id, reason: reason))
        return 0
    }

    private static let onOwner: sd_bus_message_handler_t = { m, userdata, _ in
        // Only the bus says who owns a name: a NameOwnerChanged any peer sends straight to the agent would make it
        // the server, whose ActionInvoked would then answer prompts.
        guard let m, let userdata, let sender = sd_bus_message_get_sender(m),
              String(cString: sender) == "org.freedesktop.DBus" else { return 0 }
        var name: UnsafePointer<CChar>?, old: UnsafePointer<CChar>?, new: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(m, BusMessage.type("s"), &name) > 0,
              sd_bus_message_read_basic(m, BusMessage.type("s"), &old) > 0,
              sd_bus_message_read_basic(m, BusMessage.type("s"), &new) > 0, let name, let new,
              String(cString: name) == DesktopNotifications.name else { return 0 }
        let inbox = Unmanaged<Inbox>.fromOpaque(userdata).takeUnretainedValue()
        let owner = String(cString: new)
        inbox.owner = owner.isEmpty ? nil : owner
        inbox.signals.append(.serverChanged(owner: inbox.owner))
        return 0
    }

    /// GetCapabilities: what the server can show ("actions", "body", "persistence", ...). Fails when no server
    /// owns the name (nor can be started).
    public func capabilities() throws(Failure) -> [String] {
        var reply: OpaquePointer?
        defer { _ = sd_bus_message_unref(reply) }
        try call("GetCapabilities", reply: &reply) { _ in 0 }
        var caps: [String] = []
        guard sd_bus_message_enter_container(reply, BusMessage.type("a"), "s") > 0 else { return caps }
        var s: UnsafePointer<CChar>?
        while sd_bus_message_read_basic(reply, BusMessage.type("s"), &s) > 0, let s { caps.append(String(cString: s)) }
        return caps
    }

    /// GetServerInformation's name and version ("dunst 1.9.0"), for messages.
    public func serverName() -> String? {
        var reply: OpaquePointer?
        defer { _ = sd_bus_message_unref(reply) }
        guard (try? call("GetServerInformation", reply: &reply) { _ in 0 }) != nil else { return nil }
        var name: UnsafePointer<CChar>?, vendor: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(reply, BusMessage.type("s"), &name) > 0,
              sd_bus_message_read_basic(reply, BusMessage.type("s"), &vendor) > 0,
              sd_bus_message_read_basic(reply, BusMessage.type("s"), &version) > 0, let name else { return nil }
        return String(cString: name) + (version.map { " " + String(cString: $0) } ?? "")
    }

    /// Notify, without waiting: shows a notification with `actions` as (key, label) pairs, `resident` (no time-out,
    /// an action does not remove it: the agent does) or the server's usual one; `replaces` a notification shown
    /// (its id) in place, or 0 for a new one. The server's answer, its id, comes as `.shown(token, ...)` from
    /// `process()`, in order with its signals, so that a server slow to answer one notification (seconds) holds up
    /// nothing else. Returns the token.
    public func notifyLater(appName: String, icon: String, summary: String, body: String,
                            actions: [(key: String, label: String)], urgency: UInt8,
                            resident: Bool = true, replaces: UInt32 = 0) throws(Failure) -> UInt64 {
        var m: OpaquePointer?
        defer { _ = sd_bus_message_unref(m) }
        var r = sd_bus_message_new_method_call(bus, &m, Self.name, Self.path, Self.name, "Notify")
        if r >= 0, let m {
            r = Self.appendNotify(m, appName: appName, icon: icon, summary: summary, body: body, actions: actions,
                                  urgency: urgency, resident: resident, replaces: replaces)
        }
        inbox.tokens += 1
        let token = inbox.tokens
        try send(m, r, "Notify", Pending(inbox: inbox, token: token), Self.onNotified, timeout: Self.notifyTimeoutUsec)
        return token
    }

    /// CloseNotification, without waiting: the server's answer comes as `.closeAnswered(id, ...)` from `process()`
    /// (and the server says `closed` with reason 3).
    public func closeLater(_ id: UInt32) throws(Failure) {
        var m: OpaquePointer?
        defer { _ = sd_bus_message_unref(m) }
        var r = sd_bus_message_new_method_call(bus, &m, Self.name, Self.path, Self.name, "CloseNotification")
        var n = id
        if r >= 0 { r = sd_bus_message_append_basic(m, BusMessage.type("u"), &n) }
        try send(m, r, "CloseNotification", Pending(inbox: inbox, token: UInt64(id)), Self.onCloseAnswered,
                 timeout: Self.closeTimeoutUsec)
    }

    /// Sends `m` (built when `built` >= 0) with `pending` as the handler's context, counted in flight until its reply.
    private func send(_ m: OpaquePointer?, _ built: Int32, _ method: String, _ pending: Pending,
                      _ handler: sd_bus_message_handler_t, timeout: UInt64) throws(Failure) {
        var r = built
        let box = Unmanaged.passRetained(pending).toOpaque()
        // A floating slot (nil): sd-bus keeps it until the reply or the time-out.
        if r >= 0 { r = sd_bus_call_async(bus, nil, m, handler, box, timeout) }
        guard r >= 0 else {
            Unmanaged<Pending>.fromOpaque(box).release()
            throw Failure(description: "\(Self.name).\(method) on \(address): \(Errno(-r))")
        }
        inbox.inFlight += 1
    }

    private final class Pending {
        let inbox: Inbox
        /// The Notify's token, or the id a CloseNotification closes.
        let token: UInt64
        init(inbox: Inbox, token: UInt64) { self.inbox = inbox; self.token = token }
    }

    /// The error a reply carries (a time-out is one too: sd-bus answers the call itself), if any.
    private static func failure(_ m: OpaquePointer?) -> Failure? {
        guard let m else { return Failure(description: "no reply") }
        guard let e = sd_bus_message_get_error(m), sd_bus_error_is_set(e) != 0 else { return nil }
        return Failure(description: e.pointee.message.map { String(cString: $0) } ?? e.pointee.name.map { String(cString: $0) }
                       ?? "error")
    }

    private static let onCloseAnswered: sd_bus_message_handler_t = { m, userdata, _ in
        guard let userdata else { return 0 }
        let pending = Unmanaged<Pending>.fromOpaque(userdata).takeRetainedValue()
        pending.inbox.inFlight -= 1
        pending.inbox.signals.append(.closeAnswered(id: UInt32(truncatingIfNeeded: pending.token), failure: failure(m)))
        return 0
    }

    private static let onNotified: sd_bus_message_handler_t = { m, userdata, _ in
        guard let userdata else { return 0 }
        let pending = Unmanaged<Pending>.fromOpaque(userdata).takeRetainedValue()
        pending.inbox.inFlight -= 1
        var id: UInt32 = 0
        if let why = failure(m) {
            pending.inbox.signals.append(.shown(token: pending.token, result: .failure(why)))
        } else if let m, sd_bus_message_read_basic(m, BusMessage.type("u"), &id) > 0 {
            pending.inbox.signals.append(.shown(token: pending.token, result: .success(id)))
        } else {
            pending.inbox.signals.append(.shown(token: pending.token,
                                                result: .failure(Failure(description: "Notify answered without an id"))))
        }
        return 0
    }

    private static func appendNotify(_ m: OpaquePointer, appName: String, icon: String, summary: String, body: String,
                                     actions: [(key: String, label: String)], urgency: UInt8, resident: Bool,
                                     replaces: UInt32) -> Int32 {
            var r = BusMessage.append(m, "s", appName)
            var replaces = replaces
            if r >= 0 { r = sd_bus_message_append_basic(m, BusMessage.type("u"), &replaces) }
            for s in [icon, summary, body] where r >= 0 { r = BusMessage.append(m, "s", s) }
            if r >= 0 { r = sd_bus_message_open_container(m, BusMessage.type("a"), "s") }
            for a in actions where r >= 0 {
                r = BusMessage.append(m, "s", a.key)
                if r >= 0 { r = BusMessage.append(m, "s", a.label) }
            }
            if r >= 0 { r = sd_bus_message_close_container(m) }
            if r >= 0 { r = sd_bus_message_open_container(m, BusMessage.type("a"), "{sv}") }
            if r >= 0 {
                r = BusMessage.pair(m, "e", "urgency", "y") { m in
                    var u = urgency
                    return sd_bus_message_append_basic(m, BusMessage.type("y"), &u)
                }
            }
            if r >= 0 {
                r = BusMessage.pair(m, "e", "resident", "b") { m in
                    var yes: Int32 = resident ? 1 : 0
                    return sd_bus_message_append_basic(m, BusMessage.type("b"), &yes)
                }
            }
            if r >= 0 { r = BusMessage.pair(m, "e", "category", "s") { BusMessage.append($0, "s", "network") } }
            if r >= 0 { r = sd_bus_message_close_container(m) }
            var never: Int32 = resident ? 0 : -1
            if r >= 0 { r = sd_bus_message_append_basic(m, BusMessage.type("i"), &never) }
            return r
    }

    /// Waits at most `seconds` for the calls in flight to be answered (the agent's closes as it goes: a call still
    /// unread when the connection closes may never reach the server), then sends what is queued.
    public func finish(within seconds: Double) {
        let deadline = Clock.monotonicSeconds() + seconds
        while inbox.inFlight > 0 {
            guard (try? process()) != nil, inbox.inFlight > 0 else { break }
            let left = deadline - Clock.monotonicSeconds()
            guard left > 0 else { break }
            var fds = [pollfd(fd: fd, events: events, revents: 0)]
            _ = poll(&fds, 1, min(pollTimeout, Int32(left * 1000) + 1))
        }
        _ = sd_bus_flush(bus)
    }

    /// How long a poll may wait before `process()` is due (a call's time-out), in milliseconds; -1 for no limit.
    public var pollTimeout: Int32 {
        var usec: UInt64 = 0
        guard sd_bus_get_timeout(bus, &usec) >= 0, usec != UInt64.max else { return -1 }
        let now = Clock.monotonicMicroseconds()
        return usec <= now ? 0 : Int32(clamping: (usec - now + 999) / 1000)
    }

    /// The descriptor to poll, and for what.
    public var fd: Int32 { sd_bus_get_fd(bus) }
    public var events: Int16 { Int16(truncatingIfNeeded: max(0, sd_bus_get_events(bus))) }

    /// Reads and dispatches what has arrived; returns the signals, in order. Fails when the bus is gone.
    public func process() throws(Failure) -> [Signal] {
        while true {
            let r = sd_bus_process(bus, nil)
            if r < 0 { throw Failure(description: "lost the session bus \(address): \(Errno(-r))") }
            if r == 0 { break }
        }
        defer { inbox.signals = [] }
        return inbox.signals
    }

    // MARK: - Messages

    private func call(_ method: String, reply: inout OpaquePointer?, _ build: (OpaquePointer) -> Int32) throws(Failure) {
        var m: OpaquePointer?
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error); _ = sd_bus_message_unref(m) }
        var r = sd_bus_message_new_method_call(bus, &m, Self.name, Self.path, Self.name, method)
        if r >= 0, let m { r = build(m) }
        if r >= 0 { r = sd_bus_call(bus, m, 5_000_000, &error, &reply) }
        guard r >= 0 else {
            let why = error.message.map { String(cString: $0) } ?? "\(Errno(-r))"
            throw Failure(description: "\(Self.name).\(method) on \(address): \(why)")
        }
    }
}
