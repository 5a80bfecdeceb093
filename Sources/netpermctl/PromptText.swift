// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore

/// What a person is told about a prompt, on a terminal and in a notification: the app, who asked (the process's
/// executable or unit, or the app's first blocked connection), the link and its kind, metered or not, and the
/// choices. `p` is the daemon's prompt, escaped for the terminal (`JSON.forTerminal`).
enum PromptText {
    static let kindNames: [String: String] = ["wifi": "Wi-Fi", "wwan": "WWAN", "ethernet": "Ethernet", "other": "Other",
                                              "metered": "metered links"]

    /// "WWAN and metered links"
    static func kinds(_ p: JSON) -> String {
        let kinds = p["kinds"]?.arrayValue?.compactMap(\.stringValue) ?? [p["kind"]?.stringValue ?? "?"]
        return kinds.map { kindNames[$0] ?? $0 }.joined(separator: " and ")
    }

    /// "/usr/bin/gnome-maps, uid 1000", or "its first blocked connection, uid 1000".
    static func who(_ p: JSON) -> String {
        let id = p["identity"]
        var who: [String] = []
        if let exe = id?["executable"]?.stringValue { who.append(exe) }
        if let unit = id?["unit"]?.stringValue { who.append(unit) }
        if who.isEmpty, p["source"]?.stringValue == "blocked" { who.append("its first blocked connection") }
        if let uid = (id?["uid"] ?? p["uid"])?.intValue { who.append("uid \(uid)") }
        return who.joined(separator: ", ")
    }

    /// "wwan0 (wwan, metered)", "tun0 over wwan0 (wwan)"
    static func link(_ p: JSON) -> String {
        let link = p["link"]
        return Render.nameOver(link) + " (" + (link?["kind"]?.stringValue ?? "?")
            + (link?["metered"]?.boolValue == true ? ", metered)" : ")")
    }

    /// "maps (/usr/bin/gnome-maps, uid 1000) wants to use WWAN and metered links via wwan0 (wwan, metered)"
    static func question(_ p: JSON) -> String {
        let who = who(p)
        return (p["app"]?.stringValue ?? "?") + (who.isEmpty ? "" : " (\(who))")
            + " wants to use \(kinds(p)) via \(link(p))"
    }

    /// A notification's title: "Allow maps to use WWAN and metered links?"
    static func summary(_ p: JSON) -> String { "Allow \(p["app"]?.stringValue ?? "?") to use \(kinds(p))?" }

    /// The daemon's choices with their labels (allow, deny, once), in its order.
    static func choices(_ p: JSON) -> [(choice: PromptChoice, label: String)] {
        let kinds = (p["kinds"]?.arrayValue?.compactMap(\.stringValue) ?? []).compactMap(PolicyDimension.init)
        return PromptChoice.allCases.map { c in
            let label = p["choices"]?.arrayValue?.first { $0["choice"]?.stringValue == c.rawValue }?["label"]?.stringValue
            return (c, label ?? c.label(kinds: kinds))
        }
    }

    /// "until netpermd restarts or its policy changes"
    static func onceUntil(_ p: JSON) -> String { p["once_until"]?.stringValue ?? PromptChoice.onceUntil }

    /// How an answer went, for the agent's own output: "maps: Wi-Fi only (WWAN and metered links denied, for
    /// everyone)".
    static func answered(_ reply: JSON, label: String) -> String {
        let a = reply["answered"]
        let kinds = (a?["kinds"]?.arrayValue ?? []).compactMap(\.stringValue).map { kindNames[$0] ?? $0 }
            .joined(separator: " and ")
        let decision = a?["decision"]?.stringValue == "allow" ? "allowed" : "denied"
        let until = a?["once"]?.boolValue == true ? " " + PromptChoice.onceUntil : ""
        let whose = a?["for_uid"]?.intValue.map { "for uid \($0)'s own processes" } ?? "for everyone"
        return "\(a?["app"]?.stringValue ?? "?"): \(label) (\(kinds) \(decision)\(until), \(whose))"
    }
}
