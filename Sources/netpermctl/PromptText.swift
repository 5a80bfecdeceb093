// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermPolicyFiles
import NetpermProtocol

/// What a person is told about a prompt, on a terminal and in a notification, in a person's words (iOS asks "Allow
/// “Maps” to use cellular data?"): the app, who runs it (its executable or unit, the user by name), what it asked
/// for, or that its connection was refused and to where, the link, metered or not, when the question expires, and
/// the choices. `p` is the daemon's prompt, escaped for the terminal (`JSON.forTerminal`).
enum PromptText {
    /// What each kind is to a person.
    static let kindNames: [String: String] = ["wifi": "Wi-Fi", "wwan": "cellular data", "ethernet": "Ethernet",
                                              "other": "other networks", "metered": "metered networks",
                                              "roaming": "data while roaming"]
    /// A link's kind, as a person calls it.
    static let linkKindNames: [String: String] = ["wifi": "Wi-Fi", "wwan": "cellular", "ethernet": "Ethernet",
                                                  "other": "other", "loopback": "loopback"]

    /// "cellular data and metered networks"; roaming is when, not what: "cellular data while roaming".
    static func kinds(_ p: JSON) -> String {
        var kinds = p["kinds"]?.arrayValue?.compactMap(\.stringValue) ?? [p["kind"]?.stringValue ?? "?"]
        let roaming = kinds.contains("roaming")
        kinds.removeAll { $0 == "roaming" }
        if roaming, kinds.isEmpty { kinds = [p["link"]?["kind"]?.stringValue ?? "wwan"] }
        return kinds.map { kindNames[$0] ?? $0 }.joined(separator: " and ") + (roaming ? " while roaming" : "")
    }

    /// The app as a person knows it: its desktop file's name in the caller's language ("Karten" under
    /// `LANG=de_DE.UTF-8`, from `names`), else its C locale's name ("Maps"), else its id.
    static func app(_ p: JSON) -> String { name(p) ?? p["app"]?.stringValue ?? "?" }

    /// The desktop file's name of the app of a verdict, prompt or APPS entry, in the caller's `LC_ALL`,
    /// `LC_MESSAGES` or `LANG`; nil when it has none.
    static func name(_ p: JSON) -> String? {
        LocalizedName.pick(LocalizedName.names(p["names"]), locale: callerLocale) ?? p["name"]?.stringValue
    }

    static let callerLocale = LocalizedName.messagesLocale { getenv($0).map { String(cString: $0) } }

    /// "alice", or "uid 4101" for a uid with no name.
    static func user(_ uid: Int) -> String {
        guard uid >= 0, let name = SystemAccounts().name(ofUser: UInt32(uid)) else { return "uid \(uid)" }
        return SafeText.escape(name)
    }

    /// "/usr/bin/gnome-maps, run by alice", or "run by alice" for a refused connection; for an app its user named
    /// ("app-firefox-x2.scope, run by alice; alice's own service manager named it firefox"), who named it.
    static func who(_ p: JSON) -> String {
        let id = p["identity"]
        var who: [String] = []
        // A name is a desktop file's word: the id it names is said too.
        if p["name"]?.stringValue != nil, let id = p["app"]?.stringValue { who.append(id) }
        if let exe = id?["executable"]?.stringValue { who.append(exe) }
        if let unit = id?["unit"]?.stringValue { who.append(unit) }
        let uid = (id?["uid"] ?? p["uid"])?.intValue
        if let uid { who.append("run by " + user(uid)) }
        var text = who.joined(separator: ", ")
        if p["user_named"]?.boolValue == true, let uid {
            text += "; \(user(uid))'s own service manager named it \(p["app"]?.stringValue ?? "?")"
        }
        return text
    }

    /// An answer a person can give: a daemon's choice, for the uid whose process asked (the prompt's `for_uid`) or,
    /// from a privileged agent, for everyone.
    struct Option {
        var choice: PromptChoice
        var everyone: Bool
        var label: String
        /// The notification action's key.
        var key: String { choice.rawValue + (everyone ? "-everyone" : "") }
    }

    /// The daemon's choices (allow, deny, once), and for a privileged agent asked about one user's process (an
    /// admin's answer is that uid's) "Allow for everyone" last.
    static func options(_ p: JSON, privileged: Bool) -> [Option] {
        var options = choices(p).map { Option(choice: $0.choice, everyone: false, label: $0.label) }
        if privileged, p["for_uid"]?.intValue != nil {
            options.append(Option(choice: .allow, everyone: true, label: "Allow for everyone"))
        }
        return options
    }

    /// Whose an answer is, for a privileged agent: "Answers are for alice's own processes." when a user's process
    /// asked; nil otherwise (a user's agent answers for their own, an everyone's prompt for everyone).
    static func whose(_ p: JSON, privileged: Bool) -> String? {
        guard privileged, let uid = p["for_uid"]?.intValue else { return nil }
        return "Answers are for \(user(uid))'s own processes; “Allow for everyone” opens \(app(p)) for every user."
    }

    /// "wwan0 (cellular, metered)", "tun0 over wwan0 (cellular)", "wwan0 (cellular, metered, roaming)"
    static func link(_ p: JSON) -> String {
        let link = p["link"]
        let kind = link?["kind"]?.stringValue ?? "?"
        return Render.nameOver(link) + " (" + (linkKindNames[kind] ?? kind)
            + (link?["metered"]?.boolValue == true ? ", metered" : "") + (link?["roaming"]?.boolValue == true ? ", roaming)" : ")")
    }

    /// "maps (/usr/bin/gnome-maps, run by alice) asks to use cellular data via wwan0 (cellular, metered)", or for a
    /// refused connection "maps (run by alice) was refused a connection to 203.0.113.5:443 over cellular data via
    /// wwan0 (cellular, metered)".
    static func question(_ p: JSON) -> String {
        let who = who(p)
        let app = app(p) + (who.isEmpty ? "" : " (\(who))")
        guard p["source"]?.stringValue == "blocked" else { return app + " asks to use \(kinds(p)) via \(link(p))" }
        let to = p["destination"]?.stringValue.map { " to " + $0 } ?? ""
        return app + " was refused a connection\(to) over \(kinds(p)) via \(link(p))"
    }

    /// "Unanswered, it expires in 30 s and maps stays off cellular data."
    static func expiry(_ p: JSON) -> String {
        let seconds = p["timeout_sec"]?.intValue.map { "in \($0) s" } ?? "soon"
        return "Unanswered, it expires \(seconds) and \(app(p)) stays off \(kinds(p))."
    }

    /// A notification's title: "Allow “Maps” to use cellular data?"
    static func summary(_ p: JSON) -> String { "Allow “\(app(p))” to use \(kinds(p))?" }

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

    /// How an answer went, for the agent's own output: "maps: Wi-Fi only (cellular data and metered networks denied,
    /// for everyone)".
    static func answered(_ reply: JSON, label: String) -> String {
        let a = reply["answered"]
        let kinds = (a?["kinds"]?.arrayValue ?? []).compactMap(\.stringValue).map { kindNames[$0] ?? $0 }
            .joined(separator: " and ")
        let decision = a?["decision"]?.stringValue == "allow" ? "allowed" : "denied"
        let until = a?["once"]?.boolValue == true ? " " + PromptChoice.onceUntil : ""
        let whose = a?["for_uid"]?.intValue.map { "for \(user($0))'s own processes" } ?? "for everyone"
        return "\(a?["app"]?.stringValue ?? "?"): \(label) (\(kinds) \(decision)\(until), \(whose))"
    }
}
