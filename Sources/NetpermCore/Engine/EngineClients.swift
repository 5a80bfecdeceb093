// SPDX-License-Identifier: LGPL-2.1-or-later
/// The engine's connections and what it counts of them: kept together as every change of one moves the others
/// (`changeSession` keeps `listeners` in step with the sessions).
struct EngineClients {
    var sessions: [ConnectionID: Session] = [:]
    /// How many connections listen to or wait for each app (see `changeSession`).
    private(set) var listeners: [TrackedApp: Int] = [:]
    /// Subscribers of their own app that a reload made another app (renamed, or an [App] added for them): told their
    /// new app's verdict once the reload has settled, even if it equals the old one's.
    var ownAppMoved: [ConnectionID] = []
    /// REACHes held for a person's answer (those with a time-out armed).
    var reachesHeld = 0

    /// A session stops (`by` -1) or starts (1) listening to `keys`: an app nobody listens to any more has no entry.
    mutating func count(_ keys: [TrackedApp], by d: Int) {
        for key in keys {
            let n = listeners[key, default: 0] + d
            listeners[key] = n > 0 ? n : nil
        }
    }
}
