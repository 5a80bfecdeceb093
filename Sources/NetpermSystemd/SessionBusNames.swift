// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// The well-known names owned on this user's session bus, and by which process: what `netpermctl scopes` tells the
/// daemon (OWNS NAME PID), since an app owns its ID as its name (GApplication, D-Bus activation) and the daemon cannot
/// reach a user's bus. Names that are no reverse-DNS ID (no '.') and unique names are skipped. The bus's own word on
/// a name's owner counts: NameOwnerChanged only from org.freedesktop.DBus, the owner's pid from
/// GetConnectionUnixProcessID.
public final class SessionBusNames {
    private var bus: OpaquePointer?
    private var slot: OpaquePointer?
    private let acquired = Acquired()

    public struct Failure: Error, CustomStringConvertible { public let description: String }

    /// Connects to this user's session bus (DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus) and starts watching.
    public init() throws(Failure) {
        var r = sd_bus_open_user(&bus)
        guard r >= 0, let bus else { throw Failure(description: "no session bus: \(Errno(-r))") }
        let context = Unmanaged.passUnretained(acquired).toOpaque()
        r = sd_bus_match_signal(bus, &slot, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                "NameOwnerChanged", { m, userdata, _ in
            guard let m, let userdata else { return 0 }
            var name: UnsafePointer<CChar>?, old: UnsafePointer<CChar>?, new: UnsafePointer<CChar>?
            let s = BusMessage.type("s")
            guard sd_bus_message_read_basic(m, s, &name) > 0, sd_bus_message_read_basic(m, s, &old) > 0,
                  sd_bus_message_read_basic(m, s, &new) > 0, let name, let new, new.pointee != 0 else { return 0 }
            Unmanaged<Acquired>.fromOpaque(userdata).takeUnretainedValue().names.append(String(cString: name))
            return 0
        }, context)
        guard r >= 0 else { throw Failure(description: "cannot watch the session bus's names: \(Errno(-r))") }
        // The names owned already (apps running before this started).
        var reply: OpaquePointer?
        defer { _ = sd_bus_message_unref(reply) }
        r = Self.call(bus, "ListNames", reply: &reply) { _ in 0 }
        if r >= 0, sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "a")), "s") > 0 {
            var name: UnsafePointer<CChar>?
            while sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "s")), &name) > 0, let n = name {
                acquired.names.append(String(cString: n))
            }
        }
    }

    deinit {
        _ = sd_bus_slot_unref(slot)
        _ = sd_bus_flush_close_unref(bus)
    }

    /// What to poll for: the bus's descriptor, its events and its time-out (microseconds; UInt64.max: none).
    public var pollFD: pollfd { pollfd(fd: sd_bus_get_fd(bus), events: Int16(sd_bus_get_events(bus)), revents: 0) }
    public var timeout: UInt64 {
        var t: UInt64 = 0
        return sd_bus_get_timeout(bus, &t) >= 0 ? t : UInt64.max
    }

    /// Processes what the bus sent; the names acquired since, each with its owner's pid (names whose owner is gone,
    /// unique names and names without a '.' skipped). Throws when the bus is lost.
    public func taken() throws(Failure) -> [(name: String, pid: UInt32)] {
        while true {
            let r = sd_bus_process(bus, nil)
            if r < 0 { throw Failure(description: "lost the session bus: \(Errno(-r))") }
            if r == 0 { break }
        }
        let names = acquired.names
        acquired.names = []
        return names.filter { !$0.hasPrefix(":") && $0.contains(".") && $0 != "org.freedesktop.DBus" }
            .compactMap { name in pid(of: name).map { (name, $0) } }
    }

    private func pid(of name: String) -> UInt32? {
        guard let bus else { return nil }
        var reply: OpaquePointer?
        defer { _ = sd_bus_message_unref(reply) }
        let r = Self.call(bus, "GetConnectionUnixProcessID", reply: &reply) { BusMessage.append($0, "s", name) }
        var pid: UInt32 = 0
        guard r >= 0, sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "u")), &pid) > 0, pid > 0 else { return nil }
        return pid
    }

    /// A method of the bus itself, built by `build`.
    private static func call(_ bus: OpaquePointer, _ method: String, reply: UnsafeMutablePointer<OpaquePointer?>,
                             _ build: (OpaquePointer) -> Int32) -> Int32 {
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        return BusMessage.call(bus, destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                               interface: "org.freedesktop.DBus", method, error: &error, reply: reply, build)
    }

    private final class Acquired {
        var names: [String] = []
    }
}
