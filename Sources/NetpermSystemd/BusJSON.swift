// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import NetpermProtocol

/// A socket reply's JSON as D-Bus values, one rule for every method (docs/DBUS.md, "Types"): an object is `a{sv}`
/// (a null member is left out: D-Bus has no null), a string `s`, a boolean `b`, a number `x`, an array `as`,
/// `ax`, `ab` or `aa{sv}` when its elements are all of one such type (an empty one `as`), `av` otherwise.
public enum BusJSON {
    /// `a{sv}` of an object's members (anything else: an empty dictionary).
    public static func appendObject(_ m: OpaquePointer, _ json: JSON, skipping skip: String? = nil) -> Int32 {
        var r = sd_bus_message_open_container(m, BusMessage.type("a"), "{sv}")
        if case let .object(members) = json {
            for (key, value) in members where key != skip && value != .null && r >= 0 {
                r = BusMessage.pair(m, "e", key, signature(of: value)) { append($0, value) }
            }
        }
        if r >= 0 { r = sd_bus_message_close_container(m) }
        return r
    }

    /// `aa{sv}` of an array's objects (its other elements, and anything not an array, left out).
    public static func appendObjects(_ m: OpaquePointer, _ json: JSON?) -> Int32 {
        var r = sd_bus_message_open_container(m, BusMessage.type("a"), "a{sv}")
        for item in json?.arrayValue ?? [] where r >= 0 {
            if case .object = item { r = appendObject(m, item) }
        }
        if r >= 0 { r = sd_bus_message_close_container(m) }
        return r
    }

    /// The D-Bus signature `value` is written with.
    static func signature(of value: JSON) -> String {
        switch value {
        case .null, .string: return "s"
        case .bool: return "b"
        case .int: return "x"
        case .object: return "a{sv}"
        case let .array(items):
            let kinds = Set(items.lazy.filter { $0 != .null }.map { signature(of: $0) })
            guard kinds.count <= 1 else { return "av" }
            let element = kinds.first ?? "s"
            return element.hasPrefix("a") && element != "a{sv}" ? "av" : "a" + element
        }
    }

    public static func append(_ m: OpaquePointer, _ value: JSON) -> Int32 {
        switch value {
        case .null: return BusMessage.append(m, "s", "")
        case let .string(s): return BusMessage.append(m, "s", s)
        case let .bool(b):
            var v: Int32 = b ? 1 : 0
            return sd_bus_message_append_basic(m, BusMessage.type("b"), &v)
        case let .int(i):
            var v = Int64(i)
            return sd_bus_message_append_basic(m, BusMessage.type("x"), &v)
        case .object: return appendObject(m, value)
        case let .array(items):
            let sig = signature(of: value)
            let element = String(sig.dropFirst())
            var r = sd_bus_message_open_container(m, BusMessage.type("a"), element)
            for item in items where item != .null && r >= 0 {
                if element == "v" {
                    r = sd_bus_message_open_container(m, BusMessage.type("v"), signature(of: item))
                    if r >= 0 { r = append(m, item) }
                    if r >= 0 { r = sd_bus_message_close_container(m) }
                } else {
                    r = append(m, item)
                }
            }
            if r >= 0 { r = sd_bus_message_close_container(m) }
            return r
        }
    }
}
