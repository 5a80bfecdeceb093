// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// A link as LINKS and link events report it, with what netpermctl derives from it for people and scripts.
struct LinkView {
    let json: JSON

    init(_ json: JSON) { self.json = json }

    var index: Int { json["index"]?.intValue ?? 0 }
    var name: String { json["name"]?.stringValue ?? "?" }
    var kind: String { json["kind"]?.stringValue ?? "?" }
    var classifiedBy: String { json["classified_by"]?.stringValue ?? "?" }
    var metered: Bool { json["metered"]?.boolValue == true }
    /// The carrier whose kind a stacked link or tunnel took.
    var over: String? { json["over"]?.stringValue }
    /// Where `metered` came from (config, kind, tethering, dhcp, default); "?" from a daemon that does not say.
    var meteredBy: String { json["metered_by"]?.stringValue ?? "?" }
    var adminUp: Bool { json["admin_up"]?.boolValue == true }
    var carrier: Bool { json["carrier"]?.boolValue == true }
    var operstate: String { json["operstate"]?.stringValue ?? "?" }
    var addresses: [String] { (json["addresses"]?.arrayValue ?? []).compactMap(\.stringValue) }
    var metric: Int? { json["metric"]?.intValue }
    var usable: Bool { json["usable"]?.boolValue == true }
    /// The Wi-Fi network (already escaped by the daemon: an SSID is arbitrary bytes).
    var ssid: String? { json["ssid"]?.stringValue }
    var bssid: String? { json["bssid"]?.stringValue }
    /// Roaming (ModemManager, or Roaming= in the config); nil when no source knows.
    var roaming: Bool? { json["roaming"]?.boolValue }
    var roamingBy: String? { json["roaming_by"]?.stringValue }
    /// NetworkManager's active connection on the link.
    var connectionID: String? { json["connection"]?["id"]?.stringValue }
    var connectionType: String? { json["connection"]?["type"]?.stringValue }

    /// "ipv4", "ipv6": the families with a default route through the link.
    var defaultRouteFamilies: [String] {
        ["ipv4", "ipv6"].filter { json["default_route"]?[$0]?.boolValue == true }
    }

    /// networkctl's words, so administrators read it at a glance: off (admin down), no-carrier, carrier (no
    /// default route), routable (a default route), or the kernel's operstate when it is not simply up (dormant).
    var state: String {
        if !adminUp { return "off" }
        if !carrier { return "no-carrier" }
        // Drivers that do not track operstate (loopback, tun) report unknown: carrier is all there is.
        guard operstate == "up" || operstate == "unknown" else { return operstate }
        return defaultRouteFamilies.isEmpty ? "carrier" : "routable"
    }

    /// What stands between the link and being usable (admin up, carrier, a default route).
    enum Obstacle: String {
        case adminDown = "admin-down"
        case noCarrier = "no-carrier"
        case noDefaultRoute = "no-default-route"

        var words: String {
            switch self {
            case .adminDown: return "admin down"
            case .noCarrier: return "no carrier"
            case .noDefaultRoute: return "no default route"
            }
        }
    }

    var obstacles: [Obstacle] {
        guard !usable else { return [] }
        var found: [Obstacle] = []
        if !adminUp { found.append(.adminDown) }
        if !carrier { found.append(.noCarrier) }
        if defaultRouteFamilies.isEmpty { found.append(.noDefaultRoute) }
        return found
    }
}
