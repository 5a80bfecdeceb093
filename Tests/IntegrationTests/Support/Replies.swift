// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation

/// Strict readers for JSONSerialization output: a JSON `true` is not the number 1 and vice versa.
enum JSONValue {
    static func isBoolean(_ v: Any) -> Bool {
        String(describing: type(of: v)).contains("Boolean")
    }

    static func bool(_ o: [String: Any], _ key: String) throws -> Bool {
        guard let v = o[key], isBoolean(v), let b = v as? Bool else {
            throw HarnessError("\"\(key)\" is not a JSON boolean in \(o)")
        }
        return b
    }

    static func int(_ o: [String: Any], _ key: String) throws -> Int {
        guard let v = o[key], !isBoolean(v), let n = v as? NSNumber, Double(n.intValue) == n.doubleValue else {
            throw HarnessError("\"\(key)\" is not a JSON integer in \(o)")
        }
        return n.intValue
    }

    static func optionalInt(_ o: [String: Any], _ key: String) throws -> Int? {
        guard let v = o[key] else { throw HarnessError("\"\(key)\" is missing in \(o)") }
        if v is NSNull { return nil }
        return try int(o, key)
    }

    static func string(_ o: [String: Any], _ key: String) throws -> String {
        guard let v = o[key] as? String else { throw HarnessError("\"\(key)\" is not a JSON string in \(o)") }
        return v
    }

    static func optionalString(_ o: [String: Any], _ key: String) throws -> String? {
        guard let v = o[key] else { throw HarnessError("\"\(key)\" is missing in \(o)") }
        if v is NSNull { return nil }
        return try string(o, key)
    }

    /// Parses one reply line; it must be a JSON object.
    static func object(_ line: String) throws -> [String: Any] {
        guard let data = line.data(using: .utf8),
              let o = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw HarnessError("reply is not a JSON object: \(line.prefix(500))")
        }
        return o
    }

    /// A reply's members, recursively, without their values (an array by its first element): what two replies
    /// share when their values differ, a documented example and the daemon's reply.
    static func shape(_ line: String) throws -> String {
        func keys(_ v: Any) -> String {
            if let o = v as? [String: Any] {
                return "{" + o.keys.sorted().map { $0 + ":" + keys(o[$0]!) }.joined(separator: ",") + "}"
            }
            if let a = v as? [Any] { return "[" + (a.first.map(keys) ?? "") + "]" }
            return "_"
        }
        return keys(try object(line))
    }
}

/// One entry of a LINKS reply.
struct DaemonLink: CustomStringConvertible {
    var index: Int
    var name: String
    var kind: String
    var classifiedBy: String
    var metered: Bool
    var meteredBy: String
    var adminUp: Bool
    var carrier: Bool
    var operstate: String
    var addresses: [String]
    var defaultRouteV4: Bool
    var defaultRouteV6: Bool
    var metric: Int?
    var usable: Bool
    /// The carrier of a stacked link or tunnel; the member is always there, null when not stacked.
    var over: String?
    /// Roaming and its source; both always there, null when no source knows.
    var roaming: Bool?
    var roamingBy: String?

    init(_ o: [String: Any]) throws {
        index = try JSONValue.int(o, "index")
        name = try JSONValue.string(o, "name")
        kind = try JSONValue.string(o, "kind")
        classifiedBy = try JSONValue.string(o, "classified_by")
        metered = try JSONValue.bool(o, "metered")
        meteredBy = try JSONValue.string(o, "metered_by")
        adminUp = try JSONValue.bool(o, "admin_up")
        carrier = try JSONValue.bool(o, "carrier")
        operstate = try JSONValue.string(o, "operstate")
        guard let addrs = o["addresses"] as? [String] else { throw HarnessError("\"addresses\" is not a list of strings in \(o)") }
        addresses = addrs
        guard let dr = o["default_route"] as? [String: Any] else { throw HarnessError("\"default_route\" is not an object in \(o)") }
        defaultRouteV4 = try JSONValue.bool(dr, "ipv4")
        defaultRouteV6 = try JSONValue.bool(dr, "ipv6")
        metric = try JSONValue.optionalInt(o, "metric")
        usable = try JSONValue.bool(o, "usable")
        switch o["over"] {
        case let name as String: over = name
        case is NSNull: over = nil
        default: throw HarnessError("\"over\" is neither a name nor null in \(o)")
        }
        switch (o["roaming"], o["roaming_by"]) {
        case let (r as Bool, by as String): roaming = r; roamingBy = by
        case (is NSNull, is NSNull): roaming = nil; roamingBy = nil
        default: throw HarnessError("\"roaming\" and \"roaming_by\" are neither both set nor both null in \(o)")
        }
    }

    /// The part `ip -j link` can confirm.
    var kernelView: KernelLink {
        KernelLink(name: name, index: index, adminUp: adminUp, carrier: carrier, operstate: operstate)
    }

    var description: String {
        "\(name)#\(index)(kind \(kind) by \(classifiedBy), metered \(metered) by \(meteredBy), roaming \(roaming.map { "\($0)" } ?? "null"), admin \(adminUp ? "up" : "down"), "
            + "carrier \(carrier ? "on" : "off"), oper \(operstate), addrs \(addresses), v4 \(defaultRouteV4), "
            + "metric \(metric.map(String.init) ?? "null"), usable \(usable)"
            + (over.map { ", over \($0)" } ?? "") + ")"
    }
}

/// A STATUS reply.
struct DaemonStatus: CustomStringConvertible {
    var version: String
    var ready: Bool
    var links: Int
    var available: Bool
    var primary: String?
    var primaryKind: String?

    init(_ o: [String: Any]) throws {
        guard try JSONValue.bool(o, "ok") else { throw HarnessError("STATUS failed: \(o)") }
        version = try JSONValue.string(o, "version")
        ready = try JSONValue.bool(o, "ready")
        links = try JSONValue.int(o, "links")
        available = try JSONValue.bool(o, "available")
        primary = try JSONValue.optionalString(o, "primary")
        primaryKind = try JSONValue.optionalString(o, "primary_kind")
    }

    var description: String {
        "STATUS(ready \(ready), links \(links), available \(available), primary \(primary ?? "null") "
            + "(\(primaryKind ?? "null")))"
    }
}
