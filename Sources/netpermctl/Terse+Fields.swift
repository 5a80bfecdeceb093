// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// The fields each command prints with -t. `help COMMAND` documents them; keep the two in step.
extension Terse {
    static func status(_ r: JSON) -> [(String, String)] {
        let e = r["enforcement"]
        return [("version", value(r["version"])), ("ready", value(r["ready"])), ("agents", value(r["agents"])),
                ("links", value(r["links"])), ("available", value(r["available"])), ("primary", value(r["primary"])),
                ("primary-kind", value(r["primary_kind"])), ("primary-over", value(r["primary_over"]))]
            + policy(r["policy"]) + [("policy-warnings", value(r["policy"]?["warnings"])),
                                     ("enforcement-mode", value(e?["mode"])), ("enforcement-state", value(e?["state"])),
                                     ("enforcement-error", value(e?["error"])),
                                     ("steering-state", value(e?["steering"]?["state"])),
                                     ("steering-error", value(e?["steering"]?["error"])),
                                     ("usage-counting", value(r["usage"]?["counting"])),
                                     ("usage-state", value(r["usage"]?["state"])),
                                     ("usage-error", value(r["usage"]?["error"]))]
    }

    /// STATUS's policy object, a policy event, or the snapshot's policy.
    static func policy(_ p: JSON?) -> [(String, String)] {
        [("policy-generation", value(p?["generation"])), ("policy-apps", value(p?["apps"])),
         ("policy-error", value(p?["error"]))]
    }

    static func link(_ l: LinkView) -> [(String, String)] {
        [("index", String(l.index)), ("name", l.name), ("kind", l.kind), ("classified-by", l.classifiedBy),
         ("over", l.over ?? ""),
         ("metered", yesNo(l.metered)), ("metered-by", l.meteredBy), ("state", l.state), ("admin-up", yesNo(l.adminUp)),
         ("carrier", yesNo(l.carrier)), ("operstate", l.operstate),
         ("default-route", l.defaultRouteFamilies.joined(separator: ",")), ("metric", l.metric.map(String.init) ?? ""),
         ("usable", yesNo(l.usable)), ("unusable-because", l.obstacles.map(\.rawValue).joined(separator: ",")),
         ("addresses", l.addresses.joined(separator: ",")), ("ssid", l.ssid ?? ""), ("bssid", l.bssid ?? ""),
         ("roaming", l.roaming.map(yesNo) ?? ""), ("roaming-by", l.roamingBy ?? ""),
         ("connection", l.connectionID ?? ""), ("connection-type", l.connectionType ?? "")]
    }

    static let linkRow = ["index", "name", "kind", "metered", "state", "default-route", "metric", "usable", "addresses"]

    static func links(_ r: JSON) -> String {
        (r["links"]?.arrayValue ?? []).map { row(link(LinkView($0)), linkRow) }.joined()
    }

    /// What an app's verdict is, as QUERY replies and app events both carry it.
    static func verdictState(_ v: JSON) -> [(String, String)] {
        let kinds = ["wifi", "wwan", "ethernet", "other", "metered"]
        return [("available", value(v["available"])), ("reason", value(v["reason"])),
                ("via", value(v["via"]?["name"])), ("via-kind", value(v["via"]?["kind"])),
                ("via-metered", value(v["via"]?["metered"])), ("via-over", value(v["via"]?["over"])),
                ("denied-kinds", value(v["denied_kinds"])), ("pending-kinds", value(v["pending_kinds"]))]
            + kinds.map { ($0, value(v["permissions"]?[$0])) }
            + kinds.map { ("\($0)-source", value(v["sources"]?[$0])) }
    }

    static func query(_ v: JSON) -> [(String, String)] {
        let id = v["identity"]
        return [("app", value(v["app"])), ("matched-by", value(v["matched_by"]))] + verdictState(v)
            + ["ipv4", "ipv6"].flatMap { family -> [(String, String)] in
                let e = v["egress"]?[family]
                return [("egress-\(family)", value(e?["name"])), ("egress-\(family)-blocked", value(e?["blocked"])),
                        ("egress-\(family)-usable", value(e?["usable"])), ("egress-\(family)-allowed", value(e?["allowed"]))]
            }
            + [("bind-to", value(v["bind_to"]?["name"])), ("bind-to-kind", value(v["bind_to"]?["kind"])),
               ("enforced", value(v["enforced"])), ("enforced-why", value(v["enforced_why"]))]
            + [("budget", value(v["budget"]?["limit"])), ("budget-used", value(v["budget"]?["used"])),
               ("budget-exhausted", value(v["budget"]?["exhausted"])), ("budget-enforced", value(v["budget"]?["enforced"]))]
            + [("pid", value(id?["pid"])), ("uid", value(id?["uid"])), ("executable", value(id?["executable"])),
               ("unit", value(id?["unit"])), ("problem", value(id?["problem"]))]
            + [("via-roaming", value(v["via"]?["roaming"])), ("roaming", value(v["permissions"]?["roaming"])),
               ("roaming-source", value(v["sources"]?["roaming"]))]
    }

    static let appRow = ["app", "available", "reason", "via", "via-kind", "via-metered", "denied-kinds",
                         "pending-kinds", "wifi", "wwan", "ethernet", "other", "metered"]

    static func apps(_ r: JSON) -> String {
        (r["apps"]?.arrayValue ?? []).map { row(query($0), appRow) }.joined()
    }

    static func prompts(_ r: JSON) -> String {
        (r["prompts"]?.arrayValue ?? []).map { p in
            row([value(p["id"]), value(p["app"]),
                 value(p["kinds"]), value(p["link"]?["name"]),
                 value(p["link"]?["metered"]), value(p["identity"]?["executable"]), value(p["identity"]?["unit"]),
                 value(p["identity"]?["uid"])])
        }.joined()
    }

    static func reload(_ r: JSON) -> [(String, String)] {
        [("policy-generation", value(r["generation"])), ("policy-apps", value(r["apps"])),
         ("policy-warnings", value(r["warnings"]))]
    }

    static func decided(_ r: JSON) -> [(String, String)] {
        let d = r["decided"]
        return [("app", value(d?["app"])), ("kind", value(d?["kind"])), ("decision", value(d?["decision"])),
                ("once", value(d?["once"])), ("overridden-by-policy", value(d?["overridden_by_policy"])),
                ("for-uid", value(d?["for_uid"]))]
            + verdictState(r)
    }

    static func forgotten(_ r: JSON) -> [(String, String)] {
        [("forgotten", value(r["forgotten"])), ("app", value(r["app"])), ("kind", value(r["kind"])),
         ("for-uid", value(r["for_uid"]))]
    }

    static func decisions(_ r: JSON) -> String {
        (r["decisions"]?.arrayValue ?? []).map { d in
            row([value(d["app"]), value(d["kind"]), value(d["decision"]), value(d["once"]), value(d["for_uid"])])
        }.joined()
    }
}
