// SPDX-License-Identifier: LGPL-2.1-or-later
/// The desktop IDs installed, as each uid sees them (the Desktop Entry spec as GLib reads it): everyone's entries,
/// and a user's own, which come first for that user and may delete everyone's of the same ID (`Hidden=true`, or a
/// `TryExec=` naming a missing program). A unit named for an ID that is not reverse-DNS (`firefox-esr`) is an app
/// only where its user has that ID installed (DesktopAppID): the name alone would make any word an app.
public struct InstalledDesktopApps: Equatable, Sendable {
    /// IDs installed for everyone.
    public var system: Set<String>
    /// Each user's own installed IDs.
    public var users: [UInt32: Set<String>]
    /// IDs a user's own file deletes for them, whatever everyone's says.
    public var deleted: [UInt32: Set<String>]

    public init(system: Set<String> = [], users: [UInt32: Set<String>] = [:], deleted: [UInt32: Set<String>] = [:]) {
        self.system = system; self.users = users; self.deleted = deleted
    }

    /// Whether `id` is installed for `uid` (nil: everyone's view).
    public func contains(_ id: String, uid: UInt32?) -> Bool {
        guard let uid else { return system.contains(id) }
        if users[uid]?.contains(id) == true { return true }
        if deleted[uid]?.contains(id) == true { return false }
        return system.contains(id)
    }

    /// Whether any user, or everyone, has `id` installed.
    public func containsAnywhere(_ id: String) -> Bool {
        system.contains(id) || users.values.contains { $0.contains(id) }
    }
}
