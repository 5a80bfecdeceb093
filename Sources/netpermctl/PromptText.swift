// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermPolicyFiles
import NetpermProtocol

/// What a person is told about a prompt, on a terminal and in a notification, in a person's words (iOS asks "Allow
/// “Maps” to use cellular data?"): the app, who runs it (its executable or unit, the user by name), what it asked
/// for, or that its connection was refused and to where, the link, metered or not, when the question expires, and
/// the choices. `p` is the daemon's prompt, escaped for the terminal (`JSON.forTerminal`).
enum PromptText {
    static func tr(_ text: String) -> String { Localized.tr(text) }
    static func tr(_ text: String, _ values: [(String, String)]) -> String { Localized.tr(text, values) }
    static func N_(_ text: String) -> String { text }

    /// What each kind is to a person (`kindName` translates it).
    static let kindNames: [String: String] = ["wifi": N_("Wi-Fi"), "wwan": N_("cellular data"), "ethernet": N_("Ethernet"),
                                              "other": N_("other networks"), "metered": N_("metered networks"),
                                              "roaming": N_("data while roaming")]
    static func kindName(_ kind: String) -> String { kindNames[kind].map(tr) ?? kind }
    /// The daemon's labels of its choices (PromptChoice.label), for the catalogue: shown translated.
    static let choiceLabels = [N_("Allow"), N_("Allow once"), N_("Deny"), N_("Wi-Fi only"), N_("Not on Wi-Fi"),
                               N_("Not on Ethernet"), N_("Not on this network"), N_("Unmetered only"),
                               N_("Not while roaming"), N_("until netpermd restarts or its policy changes")]
    /// A link's kind, as a person calls it.
    static let linkKindNames: [String: String] = ["wifi": "Wi-Fi", "wwan": "cellular", "ethernet": "Ethernet",
                                                  "other": "other", "loopback": "loopback"]

    /// "cellular data and metered networks"; roaming is when, not what: "cellular data while roaming".
    static func kinds(_ p: JSON) -> String {
        var kinds = p["kinds"]?.arrayValue?.compactMap(\.stringValue) ?? [p["kind"]?.stringValue ?? "?"]
        let roaming = kinds.contains("roaming")
        kinds.removeAll { $0 == "roaming" }
        if roaming, kinds.isEmpty { kinds = [p["link"]?["kind"]?.stringValue ?? "wwan"] }
        let list = kinds.map(kindName).joined(separator: tr(" and "))
        return roaming ? tr("{kinds} while roaming", [("kinds", list)]) : list
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
        if let uid { who.append(tr("run by {user}", [("user", user(uid))])) }
        var text = who.joined(separator: ", ")
        if p["user_named"]?.boolValue == true, let uid {
            text += tr("; {user}'s own service manager named it {app}", [("user", user(uid)), ("app", p["app"]?.stringValue ?? "?")])
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
        var options = choices(p).map { Option(choice: $0.choice, everyone: false, label: tr($0.label)) }
        if privileged, p["for_uid"]?.intValue != nil {
            options.append(Option(choice: .allow, everyone: true, label: tr("Allow for everyone")))
        }
        return options
    }

    /// Whose an answer is, for a privileged agent: "Answers are for alice's own processes." when a user's process
    /// asked; nil otherwise (a user's agent answers for their own, an everyone's prompt for everyone).
    static func whose(_ p: JSON, privileged: Bool) -> String? {
        guard privileged, let uid = p["for_uid"]?.intValue else { return nil }
        return tr("Answers are for {user}'s own processes; “Allow for everyone” opens {app} for every user.",
                  [("user", user(uid)), ("app", app(p))])
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
        guard p["source"]?.stringValue == "blocked" else {
            return tr("{app} asks to use {kinds} via {link}", [("app", app), ("kinds", kinds(p)), ("link", link(p))])
        }
        guard let to = p["destination"]?.stringValue else {
            return tr("{app} was refused a connection over {kinds} via {link}", [("app", app), ("kinds", kinds(p)), ("link", link(p))])
        }
        return tr("{app} was refused a connection to {destination} over {kinds} via {link}",
                  [("app", app), ("destination", to), ("kinds", kinds(p)), ("link", link(p))])
    }

    /// "Unanswered, it expires in 30 s and maps stays off cellular data."
    static func expiry(_ p: JSON) -> String {
        guard let seconds = p["timeout_sec"]?.intValue else {
            return tr("Unanswered, it expires soon and {app} stays off {kinds}.", [("app", app(p)), ("kinds", kinds(p))])
        }
        return tr("Unanswered, it expires in {seconds} s and {app} stays off {kinds}.",
                  [("seconds", String(seconds)), ("app", app(p)), ("kinds", kinds(p))])
    }

    /// A notification's title: "Allow “Maps” to use cellular data?"
    static func summary(_ p: JSON) -> String { tr("Allow “{app}” to use {kinds}?", [("app", app(p)), ("kinds", kinds(p))]) }

    /// The daemon's choices with their labels (allow, deny, once), in its order.
    static func choices(_ p: JSON) -> [(choice: PromptChoice, label: String)] {
        let kinds = (p["kinds"]?.arrayValue?.compactMap(\.stringValue) ?? []).compactMap(PolicyDimension.init)
        return PromptChoice.allCases.map { c in
            let label = p["choices"]?.arrayValue?.first { $0["choice"]?.stringValue == c.rawValue }?["label"]?.stringValue
            return (c, label ?? c.label(kinds: kinds))
        }
    }

    /// "until netpermd restarts or its policy changes"
    static func onceUntil(_ p: JSON) -> String {
        let until = p["once_until"]?.stringValue ?? PromptChoice.onceUntil
        return tr(until)
    }

    /// How an answer went, for the agent's own output: "maps: Wi-Fi only (cellular data and metered networks denied,
    /// for everyone)".
    static func answered(_ reply: JSON, label: String) -> String {
        let a = reply["answered"]
        let kinds = (a?["kinds"]?.arrayValue ?? []).compactMap(\.stringValue).map(kindName).joined(separator: tr(" and "))
        let decision = a?["decision"]?.stringValue == "allow" ? "allowed" : "denied"
        let until = a?["once"]?.boolValue == true ? " " + PromptChoice.onceUntil : ""
        let whose = a?["for_uid"]?.intValue.map { "for \(user($0))'s own processes" } ?? "for everyone"
        return "\(a?["app"]?.stringValue ?? "?"): \(label) (\(kinds) \(decision)\(until), \(whose))"
    }
}
