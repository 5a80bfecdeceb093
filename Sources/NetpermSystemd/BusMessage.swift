// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd

/// Building sd-bus messages, for the scope `netpermctl run` starts and the notifications its agent shows: a basic
/// value, and a name paired with a variant.
public enum BusMessage {
    /// The D-Bus type character as sd-bus takes it.
    static func type(_ t: Unicode.Scalar) -> CChar { CChar(UInt8(ascii: t)) }

    /// A method call built by `build` to `destination`'s `interface` at `path`, answered within sd-bus's default
    /// time-out: sd-bus's own, or a negative errno; `error` and `reply` as sd_bus_call fills them.
    static func call(_ bus: OpaquePointer, destination: String, path: String, interface: String, _ method: String,
                     error: UnsafeMutablePointer<sd_bus_error>? = nil, reply: UnsafeMutablePointer<OpaquePointer?>? = nil,
                     _ build: (OpaquePointer) -> Int32) -> Int32 {
        var m: OpaquePointer?
        var r = sd_bus_message_new_method_call(bus, &m, destination, path, interface, method)
        defer { _ = sd_bus_message_unref(m) }
        guard r >= 0, let m else { return r }
        r = build(m)
        guard r >= 0 else { return r }
        return sd_bus_call(bus, m, 0, error, reply)
    }

    public static func append(_ m: OpaquePointer, _ t: Unicode.Scalar, _ s: String) -> Int32 {
        s.withCString { sd_bus_message_append_basic(m, type(t), $0) }
    }

    /// One name and a variant of `signature` that `value` appends: `(sv)` in a property array (`container` "r"),
    /// `{sv}` in a dictionary of hints ("e").
    static func pair(_ m: OpaquePointer, _ container: Unicode.Scalar, _ name: String, _ signature: String,
                     _ value: (OpaquePointer) -> Int32) -> Int32 {
        var r = sd_bus_message_open_container(m, type(container), "sv")
        if r >= 0 { r = append(m, "s", name) }
        if r >= 0 { r = sd_bus_message_open_container(m, type("v"), signature) }
        if r >= 0 { r = value(m) }
        if r >= 0 { r = sd_bus_message_close_container(m) }
        if r >= 0 { r = sd_bus_message_close_container(m) }
        return r
    }
}
