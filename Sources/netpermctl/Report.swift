// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermProtocol

/// `netpermctl report [APP]`, `report on|off`, `report clear [APP]`: the privacy report as a table by app, then by
/// destination (docs/PRIVACY.md).
enum Report {
    /// Local time as people read it: "2026-12-06 14:03".
    static func time(_ v: JSON?) -> String {
        guard var t = v?.intValue.map({ time_t($0) }), t > 0 else { return "-" }
        var tm = Glibc.tm()
        localtime_r(&t, &tm)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(tm.tm_year + 1900)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday)) \(two(tm.tm_hour)):\(two(tm.tm_min))"
    }

    static func kind(_ d: JSON) -> String {
        (d["kind"]?.stringValue ?? "?") + (d["metered"]?.boolValue == true ? ", metered" : "")
            + (d["roaming"]?.boolValue == true ? ", roaming" : "")
    }

    /// "2 denied, 1 waiting", or "-".
    static func refused(_ r: JSON?) -> String {
        let parts = [("denied", "denied"), ("ask", "waiting"), ("budget", "over budget")].compactMap { key, word -> String? in
            let n = r?[key]?.intValue ?? 0
            return n > 0 ? "\(n) \(word)" : nil
        }
        return parts.isEmpty ? "-" : parts.joined(separator: ", ")
    }

    static func human(_ r: JSON) -> String {
        var out = r["enabled"]?.boolValue == true
            ? "the last \(r["days"]?.intValue ?? 7) days" + (r["yours"]?.boolValue == true ? "" : "; your own apps are not recorded ('netpermctl report on')") + "\n"
            : "the report is off ([Report] Enabled=no)\n"
        let apps = r["apps"]?.arrayValue ?? []
        // Apps by activity: the most connections (and refusals) first.
        let ranked = apps.sorted { total($0) > total($1) }
        var t = Table(header: ["APP", "DESTINATION", "KIND", "CONNECTIONS", "REFUSED", "FIRST", "LAST"])
        for a in ranked {
            let name = (a["app"]?.stringValue ?? "?") + (a["uid"]?.intValue.map { " (uid \($0))" } ?? "")
            let ds = (a["destinations"]?.arrayValue ?? []).sorted { count($0) > count($1) }
            for (i, d) in ds.enumerated() {
                // A refused destination is marked where the eye starts, not only in its column.
                let host = (refused(d["refused"]) == "-" ? "" : "! ") + (d["host"]?.stringValue ?? "?")
                let port = d["port"]?.intValue ?? 0
                t.rows.append([i == 0 ? name : "", host + (port > 0 ? ":\(port)" : ""), kind(d),
                               String(d["connections"]?.intValue ?? 0), refused(d["refused"]), time(d["first"]), time(d["last"])])
            }
        }
        let marked = t.rows.contains { $0[1].hasPrefix("! ") }
        return out + (t.rows.isEmpty ? "nothing recorded\n" : t.render())
            + (marked ? "! refused: denied by the policy, waiting for an answer, or over budget (REFUSED says which)\n" : "")
    }

    static func count(_ d: JSON) -> Int {
        (d["connections"]?.intValue ?? 0) + ["denied", "ask", "budget"].reduce(0) { $0 + (d["refused"]?[$1]?.intValue ?? 0) }
    }

    static func total(_ a: JSON) -> Int { (a["destinations"]?.arrayValue ?? []).reduce(0) { $0 + count($1) } }

    static func terse(_ r: JSON) -> String {
        var out = ""
        for a in r["apps"]?.arrayValue ?? [] {
            for d in a["destinations"]?.arrayValue ?? [] {
                out += Terse.row([Terse.value(a["app"]), Terse.value(a["uid"])]
                    + ["host", "address", "port", "protocol", "kind", "metered", "roaming", "first", "last", "connections",
                       "bytes"].map { Terse.value(d[$0]) }
                    + ["denied", "ask", "budget"].map { Terse.value(d["refused"]?[$0]) })
            }
        }
        return out
    }

    static func clearedHuman(_ r: JSON) -> String {
        (r["cleared"]?.stringValue.map { "\($0): its report entries are deleted" } ?? "report entries deleted") + "\n"
    }

    static func keptHuman(_ r: JSON) -> String {
        (r["yours"]?.boolValue == true ? "your apps are recorded" : "your apps are not recorded; what was kept is deleted")
            + (r["enabled"]?.boolValue == true ? "" : " (the report is off for the machine: [Report] Enabled=no)") + "\n"
    }

    static func keptTerse(_ r: JSON) -> [(String, String)] {
        [("yours", Terse.value(r["yours"])), ("enabled", Terse.value(r["enabled"]))]
    }
}
