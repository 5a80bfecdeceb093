// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// Links for people: the `links` table and `links IFACE`, modelled on `networkctl list` and `networkctl status`.
enum LinkText {
    /// The table's width on a typical machine: names up to IFNAMSIZ-1, a few addresses.
    static let tableWidth = 100

    static func yesNo(_ b: Bool) -> String { b ? "yes" : "no" }

    static func table(_ r: JSON) -> String {
        var t = Table(header: ["IDX", "NAME", "KIND", "METERED", "STATE", "DEFAULT", "METRIC", "USABLE", "ADDRESSES"])
        let links = (r["links"]?.arrayValue ?? []).map(LinkView.init)
        for l in links {
            t.rows.append([
                String(l.index), l.name, l.kind + (l.over.map { " (" + $0 + ")" } ?? ""), yesNo(l.metered), l.state,
                // The families as -t and JSON name them.
                l.defaultRouteFamilies.isEmpty ? "-" : l.defaultRouteFamilies.joined(separator: ","),
                l.metric.map(String.init) ?? "-", yesNo(l.usable), firstAddress(l),
            ])
        }
        // The last column is not padded, so a cell that would overflow can shrink without moving the others.
        let last = t.header.count - 1
        let lead = t.widths.dropLast().reduce(0, +) + Table.gap.count * last
        for (i, l) in links.enumerated() where lead + t.rows[i][last].count > tableWidth {
            t.rows[i][last] = l.addresses.count == 1 ? "1 address" : "\(l.addresses.count) addresses"
        }
        return t.render()
    }

    /// An IPv4 address if there is one (the shortest, and the one people look for), then "+N" for the rest.
    static func firstAddress(_ l: LinkView) -> String {
        let all = l.addresses
        guard let first = all.first(where: { !$0.contains(":") }) ?? all.first else { return "-" }
        return all.count > 1 ? "\(first) +\(all.count - 1)" : first
    }

    static func detail(_ l: LinkView) -> String {
        var out = "\(l.index): \(l.name)\n"
        func line(_ key: String, _ value: String) {
            out += key + ":" + String(repeating: " ", count: max(1, 14 - key.count)) + value + "\n"
        }
        line("kind", "\(l.kind) (classified by \(l.classifiedBy))")
        if let over = l.over { line("over", over) }
        line("metered", "\(yesNo(l.metered)) (by \(l.meteredBy))")
        if let roaming = l.roaming { line("roaming", "\(yesNo(roaming)) (by \(l.roamingBy ?? "?"))") }
        if let ssid = l.ssid { line("network", "\(ssid)" + (l.bssid.map { " (\($0))" } ?? "")) }
        if let id = l.connectionID { line("connection", id + (l.connectionType.map { " (\($0))" } ?? "")) }
        line("state", l.state)
        line("admin", l.adminUp ? "up" : "down")
        line("carrier", l.carrier ? "on" : "off")
        line("operstate", l.operstate)
        let addresses = l.addresses
        line("addresses", addresses.first ?? "-")
        for a in addresses.dropFirst() { out += String(repeating: " ", count: 15) + a + "\n" }
        let families = l.defaultRouteFamilies
        line("default route", ["ipv4", "ipv6"].map { "\($0) \(yesNo(families.contains($0)))" }.joined(separator: ", ")
            + (l.metric.map { ", metric \($0)" } ?? ""))
        let obstacles = l.obstacles
        line("usable", l.usable ? "yes" : "no" + (obstacles.isEmpty ? "" : " (" + obstacles.map(\.words)
            .joined(separator: ", ") + ")"))
        return out
    }
}
