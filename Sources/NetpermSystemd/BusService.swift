// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO
import NetpermProtocol

/// The daemon's own object on the system bus: its name (requested, queued behind another owner), one object path,
/// introspection and properties answered here, and every other method call handed on as a `BusIncoming`, whose
/// reply may come later (after polkit, after the engine): nothing here waits. Registered again on every
/// (re)connection of the `SystemBus` it shares with the services the daemon reads.
public final class BusService {
    private let bus: SystemBus
    private let name: String
    private let path: String
    /// Input signatures of the methods handed on, by interface and member.
    private let methods: [String: [String: String]]
    private let introspection: String
    /// Read-only string properties, by interface and name.
    private let properties: [String: [String: String]]
    private var objectSlot: OpaquePointer?
    private var nameSlot: OpaquePointer?
    private var failures = RateLimitedLog(intervalMicroseconds: 60_000_000)
    /// Each method call of `methods`, with who sent it (the bus daemon's word: the sender's unique name).
    public var onCall: (BusIncoming) -> Void = { _ in }
    /// Each (re)connection: what the face knew of the bus's peers belongs to the last one.
    public var onConnect: () -> Void = {}

    public init(bus: SystemBus, name: String, path: String, methods: [String: [String: String]], introspection: String,
                properties: [String: [String: String]]) {
        self.bus = bus; self.name = name; self.path = path; self.methods = methods
        self.introspection = introspection; self.properties = properties
    }

    /// Serves from now on (at once if connected), once `onCall` and `onConnect` are set.
    public func start() {
        bus.onDisconnect { [weak self] in self?.release() }
        bus.onConnect { [weak self] _ in self?.register() }
    }

    deinit { release() }

    private func release() {
        if let s = objectSlot { _ = sd_bus_slot_unref(s) }
        if let s = nameSlot { _ = sd_bus_slot_unref(s) }
        objectSlot = nil
        nameSlot = nil
    }

    private func register() {
        guard let b = bus.bus else { return }
        release()
        onConnect()
        let me = Unmanaged.passUnretained(self).toOpaque()
        var slot: OpaquePointer?
        var r = sd_bus_add_object(b, &slot, path, Self.onMessage, me)
        guard r >= 0 else { return Log.warning("system bus: cannot serve \(path): \(Errno(-r))") }
        objectSlot = slot
        // Queued behind another owner (another daemon on the same bus, in tests): it gets the name when that one goes.
        r = sd_bus_request_name_async(b, &nameSlot, name, UInt64(SD_BUS_NAME_QUEUE), Self.onName, me)
        if r < 0 { Log.warning("system bus: cannot ask for \(name): \(Errno(-r))") }
    }

    private static let onName: sd_bus_message_handler_t = { m, userdata, _ in
        guard let userdata, let m else { return 0 }
        let me = Unmanaged<BusService>.fromOpaque(userdata).takeUnretainedValue()
        if let e = sd_bus_message_get_error(m), sd_bus_error_is_set(e) != 0 {
            // No bus policy lets the daemon's user own the name (the package's is not installed): the socket serves.
            let why = e.pointee.message.map { String(cString: $0) } ?? "refused"
            Log.info("system bus: \(me.name) not taken (\(why)); only the control socket serves")
        } else {
            var code: UInt32 = 0
            _ = sd_bus_message_read_basic(m, BusMessage.type("u"), &code)
            // 1: primary owner, 2: queued, 4: already ours.
            Log.info(code == 2 ? "system bus: waiting in line for \(me.name)" : "system bus: serving \(me.name)")
        }
        return 0
    }

    /// Emits `member` of `interface` from the object; `append` adds its arguments. `to`: a unicast signal, for that
    /// unique name alone (the bus delivers it to no one else, whatever their match rules); nil: a broadcast. Dropped
    /// when not connected, or when the bus does not take it (said at most once a minute).
    public func emit(_ interface: String, _ member: String, to destination: String? = nil,
                     _ append: (OpaquePointer) -> Int32 = { _ in 0 }) {
        guard let b = bus.bus else { return }
        var m: OpaquePointer?
        var r = sd_bus_message_new_signal(b, &m, path, interface, member)
        defer { _ = sd_bus_message_unref(m) }
        if r >= 0, let m, let destination { r = sd_bus_message_set_destination(m, destination) }
        if r >= 0, let m { r = append(m) }
        if r >= 0, let m { r = sd_bus_send(b, m, nil) }
        if r < 0 { failures.emit(4, "system bus: signal \(member) not sent: \(Errno(-r))") }
    }

    private static let onMessage: sd_bus_message_handler_t = { m, userdata, _ in
        guard let userdata, let m, sd_bus_message_is_method_call(m, nil, nil) > 0 else { return 0 }
        let me = Unmanaged<BusService>.fromOpaque(userdata).takeUnretainedValue()
        let interface = sd_bus_message_get_interface(m).map { String(cString: $0) }
        guard let member = sd_bus_message_get_member(m).map({ String(cString: $0) }) else { return 0 }
        switch (interface, member) {
        case ("org.freedesktop.DBus.Introspectable", "Introspect"):
            BusIncoming.reply(to: m) { BusMessage.append($0, "s", me.introspection) }
            return 1
        case ("org.freedesktop.DBus.Properties", _):
            return me.property(m, member)
        default:
            return me.method(m, interface, member)
        }
    }

    /// Get and GetAll of the read-only properties; Set is refused.
    private func property(_ m: OpaquePointer, _ member: String) -> Int32 {
        let reply = BusReply(m)
        let interface = reply.string() ?? ""
        let values = properties[interface]
        switch member {
        case "Get":
            let key = reply.string() ?? ""
            guard let value = values?[key] else {
                BusIncoming.fail(m, "org.freedesktop.DBus.Error.UnknownProperty", "no property \(key) in \(interface)")
                return 1
            }
            BusIncoming.reply(to: m) { out in
                var r = sd_bus_message_open_container(out, BusMessage.type("v"), "s")
                if r >= 0 { r = BusMessage.append(out, "s", value) }
                return r >= 0 ? sd_bus_message_close_container(out) : r
            }
        case "GetAll":
            BusIncoming.reply(to: m) { out in
                var r = sd_bus_message_open_container(out, BusMessage.type("a"), "{sv}")
                for (k, v) in (values ?? [:]).sorted(by: { $0.key < $1.key }) where r >= 0 {
                    r = BusMessage.pair(out, "e", k, "s") { BusMessage.append($0, "s", v) }
                }
                return r >= 0 ? sd_bus_message_close_container(out) : r
            }
        case "Set":
            BusIncoming.fail(m, "org.freedesktop.DBus.Error.PropertyReadOnly", "the properties are read-only")
        default:
            return 0
        }
        return 1
    }

    /// A method of ours: its arguments read as its signature says (any other is InvalidArgs), then handed on.
    private func method(_ m: OpaquePointer, _ interface: String?, _ member: String) -> Int32 {
        // A call without an interface names a member of whichever interface has it.
        guard let iface = interface ?? methods.keys.sorted().first(where: { methods[$0]?[member] != nil }),
              let signature = methods[iface]?[member] else { return 0 }
        let given = sd_bus_message_get_signature(m, 1).map { String(cString: $0) } ?? ""
        guard given == signature else {
            BusIncoming.fail(m, "org.freedesktop.DBus.Error.InvalidArgs",
                             "\(member) takes (\(signature)), not (\(given))")
            return 1
        }
        let reply = BusReply(m)
        var args: [BusArgument] = []
        var array = false
        for t in signature.unicodeScalars {
            switch t {
            // `as`, the one array a method takes.
            case "a": array = true
            case "s" where array: args.append(.strings(reply.strings("s") ?? [])); array = false
            case "s": args.append(.string(reply.string() ?? ""))
            case "b": args.append(.bool(reply.bool() ?? false))
            default: args.append(.uint32(reply.uint32() ?? 0))
            }
        }
        guard let sender = reply.sender else { return 0 }
        onCall(BusIncoming(m, sender: sender, interface: iface, member: member, arguments: args))
        return 1
    }
}

/// A method call held until its answer: the message is referenced until `reply` or `fail` (or the last reference
/// goes, unanswered: the caller then hears NoReply from its bus).
public final class BusIncoming {
    private var m: OpaquePointer?
    /// The bus daemon's unique name of the caller's connection.
    public let sender: String
    public let interface: String
    public let member: String
    public let arguments: [BusArgument]
    /// The caller allows polkit to ask for a password (the message's ALLOW_INTERACTIVE_AUTHORIZATION flag).
    public let interactive: Bool

    init(_ m: OpaquePointer, sender: String, interface: String, member: String, arguments: [BusArgument]) {
        self.m = sd_bus_message_ref(m)
        self.sender = sender; self.interface = interface; self.member = member; self.arguments = arguments
        interactive = sd_bus_message_get_allow_interactive_authorization(m) > 0
    }

    deinit { if let m { _ = sd_bus_message_unref(m) } }

    public func reply(_ append: (OpaquePointer) -> Int32) {
        guard let call = m else { return }
        Self.reply(to: call, append)
        _ = sd_bus_message_unref(call)
        m = nil
    }

    public func fail(_ name: String, _ message: String) {
        guard let call = m else { return }
        Self.fail(call, name, message)
        _ = sd_bus_message_unref(call)
        m = nil
    }

    static func reply(to call: OpaquePointer, _ append: (OpaquePointer) -> Int32) {
        var out: OpaquePointer?
        var r = sd_bus_message_new_method_return(call, &out)
        defer { _ = sd_bus_message_unref(out) }
        if r >= 0, let out { r = append(out) }
        if r >= 0, let out {
            r = sd_bus_send(nil, out, nil)
        } else {
            fail(call, "org.freedesktop.DBus.Error.Failed", "the answer could not be written: \(Errno(-r))")
        }
    }

    static func fail(_ call: OpaquePointer, _ name: String, _ message: String) {
        var e = sd_bus_error()
        _ = sd_bus_error_set(&e, name, message)
        _ = sd_bus_reply_method_error(call, &e)
        sd_bus_error_free(&e)
    }
}
