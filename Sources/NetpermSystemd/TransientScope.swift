// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// A transient scope started over sd-bus, as `systemd-run --scope` does: the caller's pids move into a new unit of
/// the system's manager (as root) or of the caller's own user manager (`netpermctl run`, docs/ENFORCEMENT.md).
public enum TransientScope {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Starts the scope `name` holding `pids` and waits (at most `timeout` seconds) for its start job to end.
    /// `user`: through the caller's own user manager (`$XDG_RUNTIME_DIR/systemd/private`, else the user bus);
    /// otherwise the system's (`/run/systemd/private`, else the system bus). Returns which manager was reached.
    @discardableResult
    public static func start(name: String, pids: [UInt32], description: String, user: Bool,
                             timeout: Double = 10) throws(Failure) -> String {
        try start(name: name, pids: pids, description: description, slice: nil, connection: connect(user: user),
                  timeout: timeout)
    }

    /// Starts the scope `name` holding `pids` in `slice` of user `uid`'s manager, as root (the daemon giving an app
    /// found by what it runs a scope of its own: docs/APPS.md): its private socket `/run/user/UID/systemd/private`
    /// (which takes root and the user only), else the user's bus `/run/user/UID/bus`.
    @discardableResult
    public static func start(name: String, pids: [UInt32], description: String, slice: String, ofUser uid: UInt32,
                             timeout: Double = 5) throws(Failure) -> String {
        var tried: [String] = []
        let runtime = "/run/user/\(uid)"
        if let bus = openPrivate(runtime + "/systemd/private", failures: &tried) {
            return try start(name: name, pids: pids, description: description, slice: slice,
                             connection: (bus, runtime + "/systemd/private", true), timeout: timeout)
        }
        var bus: OpaquePointer?
        var r = sd_bus_new(&bus)
        if r >= 0 { r = sd_bus_set_address(bus, "unix:path=" + addressEscape(runtime + "/bus")) }
        if r >= 0 { r = sd_bus_set_bus_client(bus, 1) }
        if r >= 0 { r = sd_bus_start(bus) }
        guard r >= 0, let bus else {
            _ = sd_bus_close_unref(bus)
            tried.append("\(runtime)/bus (\(Errno(-r)))")
            throw Failure(description: "uid \(uid)'s service manager not reachable: tried " + tried.joined(separator: " and "))
        }
        return try start(name: name, pids: pids, description: description, slice: slice,
                         connection: (bus, "uid \(uid)'s bus", false), timeout: timeout)
    }

    private static func start(name: String, pids: [UInt32], description: String, slice: String?,
                              connection: (OpaquePointer, String, Bool), timeout: Double) throws(Failure) -> String {
        let (bus, reached, direct) = connection
        defer { _ = sd_bus_flush_close_unref(bus) }

        // JobRemoved is matched before the call, so a job that ends before its reply is read is not missed.
        let jobs = Jobs()
        let context = Unmanaged.passUnretained(jobs).toOpaque()
        // A private socket is a direct connection: its messages carry no sender name. On a bus any peer can send a
        // JobRemoved "done" straight to us: each is kept with its sender, and only the one from the connection that
        // answered StartTransientUnit (the manager's, whoever owned the name when the call was made: it may join the
        // bus only as the call activates it) counts.
        let sender: String? = direct ? nil : "org.freedesktop.systemd1"
        var slot: OpaquePointer?
        var r = sd_bus_match_signal(bus, &slot, sender, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                                    "JobRemoved", { m, userdata, _ in
            guard let m, let userdata else { return 0 }
            let jobs = Unmanaged<Jobs>.fromOpaque(userdata).takeUnretainedValue()
            let from = sd_bus_message_get_sender(m).map { String(cString: $0) }
            var id: UInt32 = 0
            var path: UnsafePointer<CChar>?
            var unit: UnsafePointer<CChar>?
            var result: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(m, CChar(UInt8(ascii: "u")), &id) > 0,
                  sd_bus_message_read_basic(m, CChar(UInt8(ascii: "o")), &path) > 0,
                  sd_bus_message_read_basic(m, CChar(UInt8(ascii: "s")), &unit) > 0,
                  sd_bus_message_read_basic(m, CChar(UInt8(ascii: "s")), &result) > 0,
                  let path, let result else { return 0 }
            jobs.removed[String(cString: path), default: []].append((String(cString: result), from))
            return 0
        }, context)
        guard r >= 0 else { throw Failure(description: "cannot watch \(reached) for jobs: \(Errno(-r))") }
        defer { _ = sd_bus_slot_unref(slot) }
        // On the system or user bus the manager sends job signals only to subscribers; on its private socket always.
        if sender != nil { _ = call(bus, "Subscribe") { _ in 0 } }

        var reply: OpaquePointer?
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error); _ = sd_bus_message_unref(reply) }
        r = call(bus, "StartTransientUnit", error: &error, reply: &reply) { m in
            appendStart(m, name: name, pids: pids, description: description, slice: slice)
        }
        guard r >= 0 else {
            let why = error.message.map { String(cString: $0) } ?? "\(Errno(-r))"
            throw Failure(description: "\(reached) refused to start \(name): \(why)")
        }
        var job: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(reply, BusMessage.type("o"), &job) > 0, let job else {
            throw Failure(description: "\(reached) answered StartTransientUnit without a job")
        }
        let jobPath = String(cString: job)
        // On the private socket only the manager speaks; on a bus, only the connection that answered counts.
        let manager = direct ? nil : sd_bus_message_get_sender(reply).map { String(cString: $0) } ?? ""
        func result() -> String? { jobs.removed[jobPath]?.first { manager == nil || $0.sender == manager }?.result }

        let deadline = Clock.monotonicSeconds() + timeout
        while result() == nil {
            r = sd_bus_process(bus, nil)
            if r > 0 { continue }
            if r < 0 { throw Failure(description: "lost \(reached) while \(name) started: \(Errno(-r))") }
            let left = deadline - Clock.monotonicSeconds()
            guard left > 0 else { throw Failure(description: "\(name) did not start within \(Int(timeout)) s (\(reached))") }
            r = sd_bus_wait(bus, UInt64(left * 1_000_000))
            if r < 0 && r != -EINTR { throw Failure(description: "lost \(reached) while \(name) started: \(Errno(-r))") }
        }
        guard let result = result(), result == "done" else {
            throw Failure(description: "\(name) failed to start (\(reached)): the job's result is \(result() ?? "")")
        }
        return reached
    }

    /// StartTransientUnit's arguments: the scope `name` of `pids`, with its description and slice.
    private static func appendStart(_ m: OpaquePointer, name: String, pids: [UInt32], description: String,
                                    slice: String?) -> Int32 {
        var r = BusMessage.append(m, "s", name)
        if r >= 0 { r = BusMessage.append(m, "s", "fail") }
        if r >= 0 { r = sd_bus_message_open_container(m, BusMessage.type("a"), "(sv)") }
        if r >= 0 {
            r = BusMessage.pair(m, "r", "PIDs", "au") { m in
                var r = sd_bus_message_open_container(m, BusMessage.type("a"), "u")
                for var pid in pids where r >= 0 { r = sd_bus_message_append_basic(m, BusMessage.type("u"), &pid) }
                return r >= 0 ? sd_bus_message_close_container(m) : r
            }
        }
        if r >= 0 { r = BusMessage.pair(m, "r", "Description", "s") { BusMessage.append($0, "s", description) } }
        if r >= 0, let slice { r = BusMessage.pair(m, "r", "Slice", "s") { BusMessage.append($0, "s", slice) } }
        if r >= 0 { r = sd_bus_message_close_container(m) }
        // No auxiliary units.
        if r >= 0 { r = sd_bus_message_open_container(m, BusMessage.type("a"), "(sa(sv))") }
        if r >= 0 { r = sd_bus_message_close_container(m) }
        return r
    }

    private final class Jobs {
        /// Job object path -> each JobRemoved heard for it: its result ("done", "failed", ...) and its sender.
        var removed: [String: [(result: String, sender: String?)]] = [:]
    }

    /// The manager's private socket first (no dbus-daemon needed, as systemd-run does), then the bus. Returns the
    /// connection, what it reached (for messages), and whether it is the private socket (a direct connection).
    private static func connect(user: Bool) throws(Failure) -> (OpaquePointer, String, Bool) {
        guard user else {
            var tried: [String] = []
            if let bus = openPrivate("/run/systemd/private", failures: &tried) { return (bus, "/run/systemd/private", true) }
            var bus: OpaquePointer?
            let r = sd_bus_open_system(&bus)
            if r >= 0, let bus { return (bus, "the system bus", false) }
            _ = sd_bus_close_unref(bus)
            tried.append("the system bus (\(Errno(-r)))")
            throw Failure(description: "no system service manager reachable: tried " + tried.joined(separator: " and "))
        }
        // What a user meets most: no session environment (a bare `su`, a cron job), or another user's kept by
        // su or sudo. Each gets a sentence that names the way out rather than sd-bus's errno.
        let uid = getuid()
        let own = "/run/user/\(uid)"
        let running = "is your user manager (user@\(uid).service) running? It runs while you are logged in, "
            + "and always after `loginctl enable-linger`"
        let runtime = environment("XDG_RUNTIME_DIR")
        let busAddress = environment("DBUS_SESSION_BUS_ADDRESS")
        var tried: [String] = []
        if let runtime {
            let owner: uid_t
            do { owner = try Files.owner(runtime) } catch {
                // Gone: the manager's runtime directory goes with the user's last session.
                throw Failure(description: "no user service manager reachable: XDG_RUNTIME_DIR is \(runtime): \(error)"
                              + (error == .notFound ? "; " + running : ""))
            }
            // Its manager would refuse us anyway (its private socket is 0700); say why instead.
            guard owner == uid else {
                throw Failure(description: "no user service manager reachable: XDG_RUNTIME_DIR is \(runtime), which "
                              + "belongs to uid \(owner), not to you (uid \(uid)); was it kept from another user's session "
                              + "(su, sudo)? Yours is \(own)")
            }
            let path = runtime + "/systemd/private"
            if let bus = openPrivate(path, failures: &tried) { return (bus, path, true) }
        }
        // sd_bus_open_user takes DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus.
        if let address = busAddress ?? runtime.map({ "unix:path=" + addressEscape($0 + "/bus") }) {
            var bus: OpaquePointer?
            let r = sd_bus_open_user(&bus)
            if r >= 0, let bus { return (bus, "the user bus (\(address))", false) }
            _ = sd_bus_close_unref(bus)
            tried.append("the user bus \(address) (\(Errno(-r)))")
        }
        guard runtime != nil || busAddress != nil else {
            throw Failure(description: "no user service manager reachable: XDG_RUNTIME_DIR is not set (it names the "
                          + "directory of your user manager's socket, \(own) in a login session) and neither is "
                          + "DBUS_SESSION_BUS_ADDRESS")
        }
        throw Failure(description: "no user service manager reachable: tried " + tried.joined(separator: " and ")
                      + "; " + running)
    }

    /// A direct connection to a manager's private socket, or nil with the failure appended to `failures`.
    private static func openPrivate(_ path: String, failures: inout [String]) -> OpaquePointer? {
        var bus: OpaquePointer?
        var r = sd_bus_new(&bus)
        if r >= 0 { r = sd_bus_set_address(bus, "unix:path=" + addressEscape(path)) }
        if r >= 0 { r = sd_bus_start(bus) }
        if r >= 0, let bus { return bus }
        _ = sd_bus_close_unref(bus)
        failures.append("\(path) (\(Errno(-r)))")
        return nil
    }

    private static func environment(_ name: String) -> String? {
        guard let v = getenv(name), v.pointee != 0 else { return nil }
        return String(cString: v)
    }

    /// A method of org.freedesktop.systemd1.Manager, its arguments appended by `build`.
    private static func call(_ bus: OpaquePointer, _ method: String, error: UnsafeMutablePointer<sd_bus_error>? = nil,
                             reply: UnsafeMutablePointer<OpaquePointer?>? = nil,
                             _ build: (OpaquePointer) -> Int32) -> Int32 {
        BusMessage.call(bus, destination: "org.freedesktop.systemd1", path: "/org/freedesktop/systemd1",
                        interface: "org.freedesktop.systemd1.Manager", method, error: error, reply: reply, build)
    }

    /// D-Bus addresses escape every byte but `[A-Za-z0-9_/.\-]` as %XX.
    static func addressEscape(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            let c = Unicode.Scalar(b)
            if ("a"..."z").contains(c) || ("A"..."Z").contains(c) || ("0"..."9").contains(c) || "_/.-".unicodeScalars.contains(c) {
                out.unicodeScalars.append(c)
            } else {
                let hex = String(b, radix: 16)
                out += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return out
    }
}
