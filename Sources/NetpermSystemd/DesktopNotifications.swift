// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// The desktop's notification server (org.freedesktop.Notifications, the Desktop Notifications Specification) on
/// the user's session bus, over sd-bus: `netpermctl agent --notify` shows prompts with it. Its signals are taken only
/// from the owner of the server's name (the bus routes no one else's to this match).
public final class DesktopNotifications {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// What the server said, in order.
    public enum Signal: Equatable, Sendable {
        /// The person chose an action (`key` as given to `notify`; "default" for the notification itself).
        case actionInvoked(id: UInt32, key: String)
        /// Gone from the screen: 1 expired, 2 dismissed by the person, 3 closed by `close`, 4 otherwise.
        case closed(id: UInt32, reason: UInt32)
    }

    static let name = "org.freedesktop.Notifications"
    static let path = "/org/freedesktop/Notifications"

    private let bus: OpaquePointer
    private var slots: [OpaquePointer?] = []
    private let inbox = Inbox()
    /// Where the bus is, for messages.
    public let address: String

    private final class Inbox {
        var signals: [Signal] = []
    }

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
    }

    deinit {
        for s in slots { _ = sd_bus_slot_unref(s) }
        _ = sd_bus_flush_close_unref(bus)
    }

    private static let onAction: sd_bus_message_handler_t = { m, userdata, _ in
        guard let m, let userdata else { return 0 }
        var id: UInt32 = 0
        var key: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(m, BusMessage.type("u"), &id) > 0,
              sd_bus_message_read_basic(m, BusMessage.type("s"), &key) > 0, let key else { return 0 }
        let signal = Signal.actionInvoked(id: id, key: String(cString: key))
        Unmanaged<Inbox>.fromOpaque(userdata).takeUnretainedValue().signals.append(signal)
        return 0
    }

    private static let onClosed: sd_bus_message_handler_t = { m, userdata, _ in
        guard let m, let userdata else { return 0 }
        var id: UInt32 = 0
        var reason: UInt32 = 0
        guard sd_bus_message_read_basic(m, BusMessage.type("u"), &id) > 0,
              sd_bus_message_read_basic(m, BusMessage.type("u"), &reason) > 0 else { return 0 }
        Unmanaged<Inbox>.fromOpaque(userdata).takeUnretainedValue().signals.append(.closed(id: id, reason: reason))
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

    /// Notify: shows a notification that stays until it is answered or closed (no time-out, `resident`: an action
    /// does not remove it, the agent does), with `actions` as (key, label) pairs; returns its id.
    public func notify(appName: String, icon: String, summary: String, body: String, actions: [(key: String, label: String)],
                       urgency: UInt8) throws(Failure) -> UInt32 {
        var reply: OpaquePointer?
        defer { _ = sd_bus_message_unref(reply) }
        try call("Notify", reply: &reply) { m in
            var r = BusMessage.append(m, "s", appName)
            var replaces: UInt32 = 0
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
                    var yes: Int32 = 1
                    return sd_bus_message_append_basic(m, BusMessage.type("b"), &yes)
                }
            }
            if r >= 0 { r = BusMessage.pair(m, "e", "category", "s") { BusMessage.append($0, "s", "network") } }
            if r >= 0 { r = sd_bus_message_close_container(m) }
            var never: Int32 = 0
            if r >= 0 { r = sd_bus_message_append_basic(m, BusMessage.type("i"), &never) }
            return r
        }
        var id: UInt32 = 0
        guard sd_bus_message_read_basic(reply, BusMessage.type("u"), &id) > 0 else {
            throw Failure(description: "\(Self.name) answered Notify without an id")
        }
        return id
    }

    /// CloseNotification: takes it off the screen (the server then says `closed` with reason 3).
    public func close(_ id: UInt32) throws(Failure) {
        var reply: OpaquePointer?
        defer { _ = sd_bus_message_unref(reply) }
        try call("CloseNotification", reply: &reply) { m in
            var id = id
            return sd_bus_message_append_basic(m, BusMessage.type("u"), &id)
        }
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
