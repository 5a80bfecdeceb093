import NetpermCore

/// Human output for each command; `--json` bypasses all of this.
enum Render {
    static func yesNo(_ v: JSON?) -> String { v?.boolValue == true ? "yes" : "no" }

    static func status(_ r: JSON) -> String {
        var out = ""
        out += "version:   \(r["version"]?.stringValue ?? "?")\n"
        out += "ready:     \(yesNo(r["ready"]))\n"
        out += "links:     \(r["links"]?.intValue ?? 0)\n"
        out += "network:   \(r["available"]?.boolValue == true ? "available" : "unavailable")\n"
        if let p = r["primary"]?.stringValue {
            out += "primary:   \(p) (\(r["primary_kind"]?.stringValue ?? "?"))\n"
        } else {
            out += "primary:   -\n"
        }
        return out
    }

    static func links(_ r: JSON) -> String {
        var t = Table(header: ["IDX", "NAME", "KIND", "METERED", "ADMIN", "CARRIER", "OPER", "DEFAULT", "METRIC",
                               "USABLE", "ADDRESSES", "CLASSIFIED BY"])
        for l in r["links"]?.arrayValue ?? [] {
            var routes: [String] = []
            if l["default_route"]?["ipv4"]?.boolValue == true { routes.append("v4") }
            if l["default_route"]?["ipv6"]?.boolValue == true { routes.append("v6") }
            let addrs = (l["addresses"]?.arrayValue ?? []).compactMap(\.stringValue)
            t.rows.append([
                String(l["index"]?.intValue ?? 0),
                l["name"]?.stringValue ?? "?",
                l["kind"]?.stringValue ?? "?",
                yesNo(l["metered"]),
                l["admin_up"]?.boolValue == true ? "up" : "down",
                l["carrier"]?.boolValue == true ? "on" : "off",
                l["operstate"]?.stringValue ?? "?",
                routes.isEmpty ? "-" : routes.joined(separator: ","),
                l["metric"]?.intValue.map(String.init) ?? "-",
                yesNo(l["usable"]),
                addrs.isEmpty ? "-" : addrs.joined(separator: ","),
                l["classified_by"]?.stringValue ?? "?",
            ])
        }
        return t.render()
    }
}
