// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

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
        out += "agents:    \(r["agents"]?.intValue ?? 0)\n"
        let policy = r["policy"]
        out += "policy:    generation \(policy?["generation"]?.intValue ?? 0), "
            + counted(policy?["apps"]?.intValue ?? 0, "app") + warnings(policy) + "\n"
        // Only while a reload failed: the policy in force is then older than the file.
        if let error = policy?["error"]?.stringValue { out += "policy error: \(error)\n" }
        out += (policy?["findings"]?.arrayValue ?? []).map { "policy warning: \(place($0))\(text($0))\n" }.joined()
        out += "enforcement: \(enforcement(r["enforcement"]))\n"
        if let steering = r["enforcement"]?["steering"] { out += "steering:  \(Self.steering(steering))\n" }
        out += "usage:     \(usage(r["usage"]))\n"
        return out
    }

    /// ", 1 warning": the policy in force's, as STATUS and RELOAD count them.
    static func warnings(_ p: JSON?) -> String {
        let n = p?["warnings"]?.intValue ?? 0
        return n == 0 ? "" : ", " + counted(n, "warning")
    }

    /// A finding's "FILE:LINE: ", as `check` prints it.
    static func place(_ f: JSON) -> String {
        (f["file"]?.stringValue ?? "?") + (f["line"]?.intValue.map { ":\($0)" } ?? "") + ": "
    }

    /// A finding's "[Section]: message".
    static func text(_ f: JSON) -> String {
        (f["section"]?.stringValue.map { $0 + ": " } ?? "") + (f["message"]?.stringValue ?? "")
    }

    /// "off", "block, enforcing (3 apps, 2 uids, 1 unit cgroup, 2 links)", "block, failed after 5 attempts: ERROR".
    static func enforcement(_ e: JSON?) -> String {
        let mode = e?["mode"]?.stringValue ?? "?"
        let state = e?["state"]?.stringValue ?? "?"
        guard mode != "off" || state != "off" else { return "off" }
        var out = "\(mode), \(state)"
        // What the rules name while in force; a failure says why instead.
        if e?["apps"] != nil, e?["error"] == nil {
            func n(_ key: String, _ what: String) -> String { counted(e?[key]?.intValue ?? 0, what) }
            // Units named as they were made: what they must not do is in force, the rest comes with their load.
            let restricted = e?["units_restricted"]?.intValue ?? 0
            out += " (\(n("apps", "app")), \(n("uids", "uid")), \(n("unit_cgroups", "unit cgroup")), \(n("links", "link"))"
                + (restricted > 0 ? "; \(counted(restricted, "new unit")) restricted" : "") + ")"
        }
        if let error = e?["error"]?.stringValue {
            out += " after \(counted(e?["attempts"]?.intValue ?? 0, "attempt")): \(error)"
        }
        return out
    }

    /// "off", "counting since 2026-12-01 (2 budgets, 1 used up)", "failed after 2 attempts: ERROR".
    static func usage(_ u: JSON?) -> String {
        guard u?["counting"]?.boolValue == true else { return "off" }
        var out = u?["state"]?.stringValue ?? "?"
        if let error = u?["error"]?.stringValue { return out + " after \(counted(u?["attempts"]?.intValue ?? 0, "attempt")): \(error)" }
        if let start = u?["period_start"]?.stringValue { out += ", period from \(start)" }
        let budgets = u?["budgets"]?.intValue ?? 0
        if budgets > 0 { out += " (\(counted(budgets, "budget")), \(u?["exhausted"]?.intValue ?? 0) used up)" }
        return out
    }

    /// "steering, 2 tables, 1 marked uid, 0 marked unit cgroups", or "failed: ERROR".
    static func steering(_ s: JSON) -> String {
        if let error = s["error"]?.stringValue { return "\(s["state"]?.stringValue ?? "failed"): \(error)" }
        func n(_ key: String, _ what: String) -> String { counted(s[key]?.intValue ?? 0, what) }
        return "\(s["state"]?.stringValue ?? "?"), \(n("tables", "table")), \(n("marked_uids", "marked uid")), "
            + n("marked_unit_cgroups", "marked unit cgroup")
    }
}

extension Render {
    static func permissions(_ v: JSON) -> String {
        ["wifi", "wwan", "ethernet", "other", "metered", "roaming"].map { "\($0)=\(permission(v, $0))" }.joined(separator: " ")
    }

    /// One permission and, unless the policy says it, where it comes from: "allow", "allow (decided)", "allow
    /// (once)", "allow (your own decision)" for the asking user's own, and "ask (no agent)" for an `ask` nobody can
    /// be asked about, which the daemon counts as a deny.
    static func permission(_ v: JSON, _ kind: String) -> String {
        let p = v["permissions"]?[kind]?.stringValue ?? "?"
        switch v["sources"]?[kind]?.stringValue {
        case "no-agent": return "ask (no agent)"
        case "decision": return p + " (decided)"
        case "once": return p + " (once)"
        case "user-decision": return p + " (your own decision)"
        case "user-once": return p + " (your own, once)"
        default: return p
        }
    }

    /// "yes", or "no (executable-only)": whether the kernel enforces the app's permissions, and why not.
    static func enforced(_ v: JSON) -> String {
        v["enforced"]?.boolValue == true ? "yes" : "no (\(v["enforced_why"]?.stringValue ?? "?"))"
    }

    /// One line saying whether and why: "ok via wlan0 (wifi)", "denied: wwan", ...
    static func because(_ v: JSON) -> String {
        let kinds = { (key: String) in (v[key]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ",") }
        switch v["reason"]?.stringValue ?? "?" {
        case "ok":
            let via = v["via"]
            return "yes, via \(linkRef(via))"
        case "no-network": return "no: no usable network"
        case "denied": return "no: denied on \(kinds("denied_kinds"))" + stackedEgress(v)
        case "awaiting-decision": return "no: awaiting a decision for \(kinds("pending_kinds"))"
        case "routed-elsewhere": return "no: " + routedElsewhere(v)
        case "budget-exhausted":
            return "no: its metered budget is used up" + (v["budget"].map { " (\(Usage.budget($0)))" } ?? "")
        case "starting": return "no: netpermd is starting"
        case let r: return "no: \(r)"
        }
    }

    static func query(_ v: JSON) -> String {
        var out = "app:          \(v["app"]?.stringValue ?? "?") (matched by \(v["matched_by"]?.stringValue ?? "?"))\n"
        out += "network:      \(because(v))\n"
        // The daemon's own sentence: the one "why not" every face shows.
        if let why = v["message"]?.stringValue { out += "why:          \(why)\n" }
        out += "permissions:  \(permissions(v))\n"
        out += "enforced:     \(enforced(v))\n"
        if let b = v["budget"] { out += "budget:       \(Usage.budget(b)) on metered links this period\n" }
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
                (v["app"]?.stringValue ?? "?") + (PromptText.name(v).map { " (\($0))" } ?? ""),
                yesNo(v["available"]),
                permission(v, "wifi"), permission(v, "wwan"), permission(v, "ethernet"), permission(v, "other"),
                permission(v, "metered"),
                because(v),
            ])
        }
        return t.render()
    }

    static func reload(_ r: JSON) -> String {
        "policy reloaded: generation \(r["generation"]?.intValue ?? 0), " + counted(r["apps"]?.intValue ?? 0, "app")
            + warnings(r) + "\n"
            + (r["findings"]?.arrayValue ?? []).map { "\(place($0))\($0["severity"]?.stringValue ?? "warning"): \(text($0))\n" }
            .joined()
    }
}

extension Render {
    static func prompts(_ r: JSON) -> String {
        var t = Table(header: ["ID", "APP", "KIND", "LINK", "EXECUTABLE", "UNIT", "UID"])
        for p in r["prompts"]?.arrayValue ?? [] {
            t.rows.append([
                String(p["id"]?.intValue ?? 0), p["app"]?.stringValue ?? "?",
                (p["kinds"]?.arrayValue?.compactMap(\.stringValue)).map { $0.joined(separator: ",") } ?? p["kind"]?.stringValue ?? "?",
                nameOver(p["link"]) + linkTags(p["link"]),
                p["identity"]?["executable"]?.stringValue ?? "-", p["identity"]?["unit"]?.stringValue ?? "-",
                p["identity"]?["uid"]?.intValue.map(String.init) ?? "-",
            ])
        }
        return t.render()
    }

    /// " (metered)", " (metered, roaming)", or nothing.
    static func linkTags(_ l: JSON?) -> String {
        let tags = ["metered", "roaming"].filter { l?[$0]?.boolValue == true }
        return tags.isEmpty ? "" : " (" + tags.joined(separator: ", ") + ")"
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

    /// "wwan0 (wwan, metered, roaming)"
    static func linkRef(_ l: JSON?) -> String {
        "\(nameOver(l)) (\(l?["kind"]?.stringValue ?? "?")" + (l?["metered"]?.boolValue == true ? ", metered" : "")
            + (l?["roaming"]?.boolValue == true ? ", roaming)" : ")")
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
