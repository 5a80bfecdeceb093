// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// How a person sees an app: its name, the names in other languages and its icon, from its desktop file as one uid
/// sees it. What a verdict and a prompt say of their app beside its id, filled in together by the engine.
public struct AppFace: Equatable, Sendable {
    /// `Name=`: what the daemon's own messages call the app.
    public var name: String?
    /// `Icon=`: a theme's icon name, or an absolute path.
    public var icon: String?
    /// `Name[LOCALE]=`, by locale: each face shows the name in its person's language.
    public var names: [String: String]

    public init(name: String? = nil, icon: String? = nil, names: [String: String] = [:]) {
        self.name = name; self.icon = icon; self.names = names
    }

    /// What a desktop file says of its app.
    public init(_ entry: DesktopEntry) {
        self.init(name: entry.name, icon: entry.icon, names: entry.localizedNames)
    }

    /// The members `name`, `names` and `icon` of a verdict or a prompt, each only when known.
    func write(to s: inout JSONWriter) {
        if let name { s.field("name", name) }
        if !names.isEmpty { s.field("names", map: names) }
        if let icon { s.field("icon", icon) }
    }
}
