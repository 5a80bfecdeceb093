// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// `netpermctl usage [reset] [APP]`: what each app used per kind of link, this period and the last, and its budget.
enum Usage {
    static let periods = [("current", "this period"), ("previous", "last period"), ("since_reset", "since reset")]

    /// "wwan, metered", "wwan, metered, roaming"
    static func kind(_ e: JSON) -> String {
        (e["kind"]?.stringValue ?? "?") + (e["metered"]?.boolValue == true ? ", metered" : "")
            + (e["roaming"]?.boolValue == true ? ", roaming" : "")
    }

    static func bytes(_ v: JSON?) -> String { ByteSize.text(UInt64(max(0, v?.intValue ?? 0))) }

    /// "31.7 MiB of 200 MiB (15%), enforced" / "..., used up, advice only".
    static func budget(_ b: JSON) -> String {
        let limit = max(1, b["limit"]?.intValue ?? 1), used = b["used"]?.intValue ?? 0
        let percent = Int((Double(used) * 100 / Double(limit)).rounded(.down))
        return "\(bytes(b["used"])) of \(bytes(b["limit"])) (\(percent)%)"
            + (b["exhausted"]?.boolValue == true ? ", used up until \(b["period_end"]?.stringValue ?? "the next period")" : "")
            + (b["enforced"]?.boolValue == true ? ", enforced" : ", advice only")
    }

    static func human(_ r: JSON) -> String {
        let p = r["period"]
        var out = "this period: \(p?["start"]?.stringValue ?? "?") to \(p?["end"]?.stringValue ?? "?")"
            + " (last period from \(p?["previous_start"]?.stringValue ?? "?"))"
            + (r["counting"]?.boolValue == true ? "" : "; not counting ([Usage] Count=no)") + "\n"
        var budgets: [(String, String)] = []
        var rows: [(String, JSON)] = (r["apps"]?.arrayValue ?? []).map { ($0["app"]?.stringValue ?? "?", $0) }
        if let other = r["other"] { rows.append(("(other processes)", other)) }
        out += table(rows, budgets: &budgets)
        // Users' own apps: parts of their uid's counts above (or of other processes'), never beside them.
        let users = r["user_apps"]?.arrayValue ?? []
        if !users.isEmpty {
            out += "users' own apps (already counted above, as their uid's):\n"
            out += table(users.map { ("\($0["app"]?.stringValue ?? "?") (uid \($0["uid"]?.intValue ?? -1))", $0) }, budgets: &budgets)
        }
        if !budgets.isEmpty {
            out += "metered budgets:\n" + budgets.map { "  \($0.0): \($0.1)\n" }.joined()
        }
        return out
    }

    /// One row per app and kind it used in one of the periods.
    static func table(_ rows: [(String, JSON)], budgets: inout [(String, String)]) -> String {
        var t = Table(header: ["APP", "KIND", "SENT", "RECEIVED", "LAST PERIOD", "SINCE RESET"])
        for (name, a) in rows {
            // Every kind it used in one of the periods, in the daemon's order.
            var kinds: [String] = []
            var byKind: [String: [String: JSON]] = [:]
            for (key, _) in periods {
                for e in a[key]?["kinds"]?.arrayValue ?? [] {
                    let k = kind(e)
                    if byKind[k] == nil { kinds.append(k) }
                    byKind[k, default: [:]][key] = e
                }
            }
            if kinds.isEmpty { t.rows.append([name, "-", "0 B", "0 B", "0 B", "0 B"]) }
            for k in kinds {
                let e = byKind[k]!
                func total(_ key: String) -> String {
                    ByteSize.text(UInt64(max(0, (e[key]?["sent_bytes"]?.intValue ?? 0) + (e[key]?["received_bytes"]?.intValue ?? 0))))
                }
                t.rows.append([name, k, bytes(e["current"]?["sent_bytes"]), bytes(e["current"]?["received_bytes"]),
                               total("previous"), total("since_reset")])
            }
            if let b = a["budget"] { budgets.append((name, budget(b))) }
        }
        return t.render()
    }

    /// One line per app, period and kind (or one with no kind for an app that used nothing):
    /// app:period:kind:metered:sent-bytes:received-bytes:sent-packets:received-packets:budget:budget-used:roaming:uid
    /// (`uid` only on a user's own app's lines, which come last: parts of their uid's lines, not more).
    static func terse(_ r: JSON) -> String {
        var out = ""
        var rows: [(String, JSON)] = (r["apps"]?.arrayValue ?? []).map { ($0["app"]?.stringValue ?? "", $0) }
        if let other = r["other"] { rows.append(("", other)) }
        rows += (r["user_apps"]?.arrayValue ?? []).map { ($0["app"]?.stringValue ?? "", $0) }
        for (name, a) in rows {
            let uid = Terse.value(a["uid"])
            let budget = [Terse.value(a["budget"]?["limit"]), Terse.value(a["budget"]?["used"])]
            var any = false
            for (key, _) in periods {
                for e in a[key]?["kinds"]?.arrayValue ?? [] {
                    any = true
                    out += Terse.row([name, key, Terse.value(e["kind"]), Terse.value(e["metered"]),
                                      Terse.value(e["sent_bytes"]), Terse.value(e["received_bytes"]),
                                      Terse.value(e["sent_packets"]), Terse.value(e["received_packets"])] + budget
                                      + [Terse.value(e["roaming"]), uid])
                }
            }
            if !any { out += Terse.row([name, "current", "", "", "0", "0", "0", "0"] + budget + ["", uid]) }
        }
        return out
    }

    static func resetHuman(_ r: JSON) -> String {
        (r["reset"]?.stringValue.map { "\($0): counts of this period start from zero" }
            ?? "every app's counts of this period start from zero") + "\n"
    }

    static func resetTerse(_ r: JSON) -> [(String, String)] {
        [("reset", Terse.value(r["reset"])), ("at", Terse.value(r["at"]))]
    }

    /// What the agent shows of a `usage` event.
    static func notice(_ e: JSON) -> String {
        let b = e["budget"]
        let percent = e["percent"]?.intValue ?? 0
        return "\(e["app"]?.stringValue ?? "?") has used \(percent)% of its metered budget: "
            + (b.map(budget) ?? "?")
            + (percent >= 100 ? "; 'netpermctl usage reset \(e["app"]?.stringValue ?? "APP")' opens it again" : "")
    }
}
