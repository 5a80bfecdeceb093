import NetpermCore

/// Human output for each command; --json prints the daemon's reply instead, -t the fields of Terse+Fields.swift.
enum Render {
    static func yesNo(_ v: JSON?) -> String { v?.boolValue == true ? "yes" : "no" }

    static func status(_ r: JSON) -> String {
        var out = ""
        out += "version:   \(r["version"]?.stringValue ?? "?")\n"
        out += "ready:     \(yesNo(r["ready"]))\n"
        out += "links:     \(r["links"]?.intValue ?? 0)\n"
        out += "network:   \(r["available"]?.boolValue == true ? "available" : "unavailable")\n"
        if let p = r["primary"]?.stringValue {
            let over = r["primary_over"]?.stringValue.map { " over " + $0 } ?? ""
            out += "primary:   \(p)\(over) (\(r["primary_kind"]?.stringValue ?? "?"))\n"
        } else {
            out += "primary:   -\n"
        }
        let policy = r["policy"]
        out += "policy:    generation \(policy?["generation"]?.intValue ?? 0), \(policy?["apps"]?.intValue ?? 0) apps\n"
        // Only while a reload failed: the policy in force is then older than the file.
        if let error = policy?["error"]?.stringValue { out += "policy error: \(error)\n" }
        return out
    }
}

extension Render {
    static func permissions(_ v: JSON) -> String {
        ["wifi", "wwan", "ethernet", "other", "metered"].map { "\($0)=\(v["permissions"]?[$0]?.stringValue ?? "?")" }
            .joined(separator: " ")
    }

    /// One line saying whether and why: "ok via wlan0 (wifi)", "denied: wwan", ...
    static func because(_ v: JSON) -> String {
        let kinds = { (key: String) in (v[key]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ",") }
        switch v["reason"]?.stringValue ?? "?" {
        case "ok":
            let via = v["via"]
            return "yes, via \(nameOver(via)) (\(via?["kind"]?.stringValue ?? "?")"
                + (via?["metered"]?.boolValue == true ? ", metered)" : ")")
        case "no-network": return "no: no usable network"
        case "denied": return "no: denied on \(kinds("denied_kinds"))" + stackedEgress(v)
        case "awaiting-decision": return "no: awaiting a decision for \(kinds("pending_kinds"))"
        case "routed-elsewhere": return "no: " + routedElsewhere(v)
        case "starting": return "no: netpermd is starting"
        case let r: return "no: \(r)"
        }
    }

    static func query(_ v: JSON) -> String {
        var out = "app:          \(v["app"]?.stringValue ?? "?") (matched by \(v["matched_by"]?.stringValue ?? "?"))\n"
        out += "network:      \(because(v))\n"
        out += "permissions:  \(permissions(v))\n"
        if let id = v["identity"] {
            out += "identity:     pid \(id["pid"]?.intValue ?? 0), uid \(id["uid"]?.intValue ?? 0), "
                + "executable \(id["executable"]?.stringValue ?? "unknown"), unit \(id["unit"]?.stringValue ?? "-")\n"
            if let p = id["problem"]?.stringValue { out += "note:         \(p)\n" }
        }
        return out
    }

    static func apps(_ r: JSON) -> String {
        var t = Table(header: ["APP", "AVAILABLE", "WIFI", "WWAN", "ETHERNET", "OTHER", "METERED", "WHY"])
        for v in r["apps"]?.arrayValue ?? [] {
            t.rows.append([
                v["app"]?.stringValue ?? "?",
                yesNo(v["available"]),
                v["permissions"]?["wifi"]?.stringValue ?? "?",
                v["permissions"]?["wwan"]?.stringValue ?? "?",
                v["permissions"]?["ethernet"]?.stringValue ?? "?",
                v["permissions"]?["other"]?.stringValue ?? "?",
                v["permissions"]?["metered"]?.stringValue ?? "?",
                because(v),
            ])
        }
        return t.render()
    }

    static func reload(_ r: JSON) -> String {
        "policy reloaded: generation \(r["generation"]?.intValue ?? 0), \(r["apps"]?.intValue ?? 0) apps\n"
    }
}

extension Render {
    static func prompts(_ r: JSON) -> String {
        var t = Table(header: ["ID", "APP", "KIND", "LINK", "EXECUTABLE", "UNIT", "UID"])
        for p in r["prompts"]?.arrayValue ?? [] {
            t.rows.append([
                String(p["id"]?.intValue ?? 0), p["app"]?.stringValue ?? "?",
                (p["kinds"]?.arrayValue?.compactMap(\.stringValue)).map { $0.joined(separator: ",") } ?? p["kind"]?.stringValue ?? "?",
                nameOver(p["link"]) + (p["link"]?["metered"]?.boolValue == true ? " (metered)" : ""),
                p["identity"]?["executable"]?.stringValue ?? "-", p["identity"]?["unit"]?.stringValue ?? "-",
                p["identity"]?["uid"]?.intValue.map(String.init) ?? "-",
            ])
        }
        return t.render()
    }

    static func decided(_ r: JSON) -> String {
        let d = r["decided"]
        var out = "\(d?["app"]?.stringValue ?? "?"): \(d?["kind"]?.stringValue ?? "?") \(d?["decision"]?.stringValue ?? "?")"
            + (d?["once"]?.boolValue == true ? " (until restart or policy change)" : " (stored)")
            + (d?["for_uid"]?.intValue.map { " for uid \($0)'s own processes" } ?? "") + "\n"
        if d?["overridden_by_policy"]?.boolValue == true {
            out += "note: the policy file sets this kind explicitly, and it wins over decisions\n"
        }
        return out + "now: \(because(r))\n"
    }

    static func forgotten(_ r: JSON) -> String {
        r["forgotten"]?.boolValue == true ? "forgotten\n" : "no stored decision to forget\n"
    }

    static func decisions(_ r: JSON) -> String {
        var t = Table(header: ["APP", "KIND", "DECISION", "UNTIL", "FOR"])
        for d in r["decisions"]?.arrayValue ?? [] {
            t.rows.append([d["app"]?.stringValue ?? "?", d["kind"]?.stringValue ?? "?", d["decision"]?.stringValue ?? "?",
                           d["once"]?.boolValue == true ? "restart or policy change" : "stored",
                           d["for_uid"]?.intValue.map { "uid \($0)" } ?? "everyone"])
        }
        return t.render()
    }
}

extension Render {
    /// "tun0 over wwan0", or the name alone.
    static func nameOver(_ l: JSON?) -> String {
        (l?["name"]?.stringValue ?? "?") + (l?["over"]?.stringValue.map { " over " + $0 } ?? "")
    }

    /// " (via tun0 over wwan0)" when the traffic leaves by a stacked link or tunnel, whose carrier decided.
    static func stackedEgress(_ v: JSON) -> String {
        for family in ["ipv4", "ipv6"] {
            guard let e = v["egress"]?[family], e["over"]?.stringValue != nil else { continue }
            return " (via \(nameOver(e)))"
        }
        return ""
    }

    static func linkRef(_ l: JSON?) -> String {
        "\(nameOver(l)) (\(l?["kind"]?.stringValue ?? "?")"
            + (l?["metered"]?.boolValue == true ? ", metered)" : ")")
    }

    /// Why a `routed-elsewhere` verdict is no: where the kernel sends the app's traffic, and what it could bind to.
    static func routedElsewhere(_ v: JSON) -> String {
        var why = "its traffic is not routed by a link it may use"
        for family in ["ipv4", "ipv6"] {
            guard let e = v["egress"]?[family], e != .null else { continue }
            if let blocked = e["blocked"]?.stringValue {
                why = "its \(family == "ipv4" ? "IPv4" : "IPv6") traffic would be dropped (\(blocked) route)"
                break
            }
            if e["usable"]?.boolValue == false {
                why = "its traffic would leave by \(linkRef(e)), which is not usable"
                break
            }
            if e["allowed"]?.boolValue == false {
                why = "its traffic would leave by \(linkRef(e)), which it may not use"
                break
            }
        }
        guard let bind = v["bind_to"], bind != .null else { return why }
        return why + "; it could bind to " + linkRef(bind)
    }
}
