// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd

/// A property's value, as far as the services netpermd reads need: anything else is `other` (read past, never
/// misread).
public enum BusValue: Equatable, Sendable {
    case string(String)
    case objectPath(String)
    case uint32(UInt32)
    case int32(Int32)
    case bool(Bool)
    case objectPaths([String])
    /// `a(su)`: ModemManager's ports (name, type).
    case namedNumbers([NamedNumber])
    case other

    public struct NamedNumber: Equatable, Sendable {
        public var name: String
        public var number: UInt32
    }

    public var string: String? {
        switch self {
        case let .string(s), let .objectPath(s): return s
        default: return nil
        }
    }

    public var uint32: UInt32? { if case let .uint32(u) = self { u } else { nil } }
    public var objectPaths: [String] { if case let .objectPaths(p) = self { p } else { [] } }
    public var namedNumbers: [NamedNumber] { if case let .namedNumbers(p) = self { p } else { [] } }
}

/// A message read in order (a reply, or a signal), valid while its handler runs. Each reader returns nil (or
/// nothing) on a type it did not expect.
public struct BusReply {
    let m: OpaquePointer

    init(_ m: OpaquePointer) { self.m = m }

    private static func type(_ t: Unicode.Scalar) -> CChar { CChar(UInt8(ascii: t)) }

    public var member: String? { sd_bus_message_get_member(m).map { String(cString: $0) } }
    public var sender: String? { sd_bus_message_get_sender(m).map { String(cString: $0) } }
    public var path: String? { sd_bus_message_get_path(m).map { String(cString: $0) } }

    /// A string, object path or signature (`t`: "s", "o", "g").
    public func string(_ t: Unicode.Scalar = "s") -> String? {
        var p: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(m, Self.type(t), &p) > 0, let p else { return nil }
        return String(cString: p)
    }

    public func bool() -> Bool? {
        var b: Int32 = 0
        return sd_bus_message_read_basic(m, Self.type("b"), &b) > 0 ? b != 0 : nil
    }

    /// Enters a struct of `contents` (`bba{ss}`); `exit` leaves it.
    public func enterStruct(_ contents: String) -> Bool {
        sd_bus_message_enter_container(m, Self.type("r"), contents) > 0
    }

    public func uint32() -> UInt32? {
        var u: UInt32 = 0
        return sd_bus_message_read_basic(m, Self.type("u"), &u) > 0 ? u : nil
    }

    /// `ao` (or `as` with `t` "s").
    public func strings(_ t: Unicode.Scalar = "o") -> [String]? {
        guard sd_bus_message_enter_container(m, Self.type("a"), t == "o" ? "o" : "s") > 0 else { return nil }
        var out: [String] = []
        while let s = string(t) { out.append(s) }
        _ = sd_bus_message_exit_container(m)
        return out
    }

    /// A variant, read when it holds a type `BusValue` has, skipped otherwise.
    public func variant() -> BusValue? {
        var t: CChar = 0
        var contents: UnsafePointer<CChar>?
        guard sd_bus_message_peek_type(m, &t, &contents) > 0, t == Self.type("v"), let contents else { return nil }
        let signature = String(cString: contents)
        guard sd_bus_message_enter_container(m, Self.type("v"), contents) > 0 else { return nil }
        defer { _ = sd_bus_message_exit_container(m) }
        switch signature {
        case "s": return string("s").map(BusValue.string)
        case "o": return string("o").map(BusValue.objectPath)
        case "u": return uint32().map(BusValue.uint32)
        case "i":
            var i: Int32 = 0
            return sd_bus_message_read_basic(m, Self.type("i"), &i) > 0 ? .int32(i) : nil
        case "b":
            var b: Int32 = 0
            return sd_bus_message_read_basic(m, Self.type("b"), &b) > 0 ? .bool(b != 0) : nil
        case "ao": return strings("o").map(BusValue.objectPaths)
        case "a(su)":
            guard sd_bus_message_enter_container(m, Self.type("a"), "(su)") > 0 else { return nil }
            var out: [BusValue.NamedNumber] = []
            while sd_bus_message_enter_container(m, Self.type("r"), "su") > 0 {
                if let s = string("s"), let u = uint32() { out.append(.init(name: s, number: u)) }
                _ = sd_bus_message_exit_container(m)
            }
            _ = sd_bus_message_exit_container(m)
            return .namedNumbers(out)
        default:
            _ = sd_bus_message_skip(m, contents)
            return .other
        }
    }

    /// `a{sv}`: a property dictionary (GetAll's reply, PropertiesChanged's second argument).
    public func properties() -> [String: BusValue]? {
        guard sd_bus_message_enter_container(m, Self.type("a"), "{sv}") > 0 else { return nil }
        var out: [String: BusValue] = [:]
        while sd_bus_message_enter_container(m, Self.type("e"), "sv") > 0 {
            if let k = string("s"), let v = variant() { out[k] = v }
            _ = sd_bus_message_exit_container(m)
        }
        _ = sd_bus_message_exit_container(m)
        return out
    }

    /// `a{oa{sa{sv}}}`: the ObjectManager's GetManagedObjects, by path and interface.
    public func managedObjects() -> [String: [String: [String: BusValue]]]? {
        guard sd_bus_message_enter_container(m, Self.type("a"), "{oa{sa{sv}}}") > 0 else { return nil }
        var out: [String: [String: [String: BusValue]]] = [:]
        while sd_bus_message_enter_container(m, Self.type("e"), "oa{sa{sv}}") > 0 {
            if let path = string("o"), sd_bus_message_enter_container(m, Self.type("a"), "{sa{sv}}") > 0 {
                var interfaces: [String: [String: BusValue]] = [:]
                while sd_bus_message_enter_container(m, Self.type("e"), "sa{sv}") > 0 {
                    if let i = string("s"), let p = properties() { interfaces[i] = p }
                    _ = sd_bus_message_exit_container(m)
                }
                _ = sd_bus_message_exit_container(m)
                out[path] = interfaces
            }
            _ = sd_bus_message_exit_container(m)
        }
        _ = sd_bus_message_exit_container(m)
        return out
    }
}

extension SystemBus {
    /// `org.freedesktop.DBus.Properties.GetAll(interface)` of `path`.
    public func properties(_ destination: String, _ path: String, _ interface: String,
                           _ done: @escaping (Result<[String: BusValue], BusCallError>) -> Void) {
        call(destination, path, "org.freedesktop.DBus.Properties", "GetAll",
             append: { BusMessage.append($0, "s", interface) }) { result in
            done(result.flatMap { r in
                r.properties().map { .success($0) } ?? .failure(BusCallError(name: "BadReply", errno: 74))
            })
        }
    }
}
