// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import NetpermIO

/// What polkit said of one caller and one action.
public enum PolkitAnswer: Equatable, Sendable {
    case authorized
    /// Not without a password (or another challenge), which the caller did not allow polkit to ask for.
    case challenge
    case denied
    /// polkit could not be asked (not installed, not running, no answer): what needs it is refused.
    case unavailable(String)
}

/// polkit's `CheckAuthorization` over the system bus, asynchronously, for a caller named by its unique name on the
/// bus (a `system-bus-name` subject: polkit asks the bus daemon who it is, never the caller).
public enum Polkit {
    /// A check that may wait for a person typing a password: at most as long as a caller waits for its reply.
    public static let interactiveTimeout: UInt64 = 120_000_000
    /// One that may not: polkitd may have to be started by the bus first.
    public static let timeout: UInt64 = 25_000_000

    public static func check(bus: SystemBus, sender: String, action: String, interactive: Bool,
                             _ done: @escaping (PolkitAnswer) -> Void) {
        bus.call("org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                 "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization",
                 timeout: interactive ? interactiveTimeout : timeout, autoStart: true,
                 append: { m in subject(m, sender: sender, action: action, interactive: interactive) }) { result in
            switch result {
            case let .success(reply):
                guard reply.enterStruct("bba{ss}"), let yes = reply.bool(), let challenge = reply.bool() else {
                    return done(.unavailable("polkit's answer could not be read"))
                }
                done(yes ? .authorized : challenge ? .challenge : .denied)
            case let .failure(e) where e.serviceAbsent:
                done(.unavailable("polkit is not running on this system"))
            // Its unit masked: the bus's error name alone (sd-bus's errno for it, ERFKILL, would mislead).
            case let .failure(e) where e.activationFailed:
                done(.unavailable("polkit is not running on this system (the bus could not start it: \(e.name))"))
            case let .failure(e):
                done(.unavailable("polkit did not answer: \(e)"))
            }
        }
    }

    /// `(sa{sv}) s a{ss} u s`: the subject, the action, no details, the flags, no cancellation id.
    private static func subject(_ m: OpaquePointer, sender: String, action: String, interactive: Bool) -> Int32 {
        var r = sd_bus_message_open_container(m, BusMessage.type("r"), "sa{sv}")
        if r >= 0 { r = BusMessage.append(m, "s", "system-bus-name") }
        if r >= 0 { r = sd_bus_message_open_container(m, BusMessage.type("a"), "{sv}") }
        if r >= 0 { r = BusMessage.pair(m, "e", "name", "s") { BusMessage.append($0, "s", sender) } }
        if r >= 0 { r = sd_bus_message_close_container(m) }
        if r >= 0 { r = sd_bus_message_close_container(m) }
        if r >= 0 { r = BusMessage.append(m, "s", action) }
        if r >= 0 { r = sd_bus_message_open_container(m, BusMessage.type("a"), "{ss}") }
        if r >= 0 { r = sd_bus_message_close_container(m) }
        // 1: AllowUserInteraction.
        var flags: UInt32 = interactive ? 1 : 0
        if r >= 0 { r = sd_bus_message_append_basic(m, BusMessage.type("u"), &flags) }
        if r >= 0 { r = BusMessage.append(m, "s", "") }
        return r
    }
}
