// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// One connection as the engine keeps it: who is on the other end, what it listens to, what it waits for.
final class Session {
    let id: ConnectionID
    /// The process that sent the connection's latest request.
    var identity: PeerIdentity
    /// Redone when the policy changes (the match and the privilege depend on it).
    var caller: Caller
    /// Set by SUBSCRIBE: the connection is a subscriber (an agent if privileged and subscribed to prompts).
    var subscription: Subscription?
    /// Under `SUBSCRIBE mine`: the apps `APPS` lists for it (`Engine.listing`), kept current by `Engine.relist`.
    var listedApps: [AppMatch] = []
    /// A WAIT whose reply is deferred.
    var waiting: Waiting?
    /// A REACH whose reply waits for the kernel's route, or for a person's answer.
    var reaching: Reaching?
    /// The last plain reply: clients that poll (QUERY in a loop) get the same bytes while nothing changed.
    var cache = ReplyCache()

    init(id: ConnectionID, identity: PeerIdentity, caller: Caller) {
        self.id = id; self.identity = identity; self.caller = caller
    }

    var isAgent: Bool { subscription?.isAgent ?? false }

    /// What the connection is to the engine, changed only through `Engine.changeSession`, which logs it old -> new.
    struct Role: Equatable {
        enum Listens: Equatable { case nothing, ownApp, prompts }
        /// Subscribed (to its own app's verdict and events), or as an agent (it answers prompts too).
        var listens: Listens
        /// Its reply is held: a WAIT for a verdict, a REACH for a route or an answer.
        var waiting: Bool
        var reaching: Bool

        var name: String {
            var parts: [String] = []
            switch listens {
            case .nothing: break
            case .ownApp: parts.append("subscriber")
            case .prompts: parts.append("agent")
            }
            if waiting { parts.append("waiting") }
            if reaching { parts.append("reaching") }
            return parts.isEmpty ? "client" : parts.joined(separator: "+")
        }
    }

    var role: Role {
        Role(listens: subscription == nil ? .nothing : isAgent ? .prompts : .ownApp, waiting: waiting != nil, reaching: reaching != nil)
    }

    /// The apps this connection listens to (its own app, as a subscriber) or waits for: everyone's verdict of each
    /// (what privileged subscribers hear), and its uid's own when it has one.
    var listened: [TrackedApp] {
        var apps: [TrackedApp] = []
        func add(_ id: String, _ uid: UInt32?) {
            apps.append(TrackedApp(id))
            if let uid { apps.append(TrackedApp(id, uid: uid)) }
        }
        if subscription != nil { add(caller.match.id, caller.ownUID) }
        if let w = waiting { add(w.match.id, w.uid) }
        if let sub = subscription, sub.topics.contains(.mine) {
            apps += listedApps.map { TrackedApp($0.id, uid: sub.listedUID) }
        }
        return apps
    }
}

/// A held `WAIT`: for which app, until when, and whether the app waits for itself (then it is asking, and may
/// raise prompts).
struct Waiting {
    var match: AppMatch
    var timer: TimerID?
    var own: Bool
    /// Its own app as its uid's processes have it (`Caller.ownUID`); nil for everyone's.
    var uid: UInt32? = nil
}

/// A connection's last plain reply, and the request and state version it answered. Kept in place: a request it
/// does not answer replaces its bytes in the same buffer, not in an array made (and the last one freed) for each
/// uncached QUERY.
struct ReplyCache {
    private var line: [UInt8] = []
    private(set) var reply: [UInt8] = []
    private var version: Int?

    /// Whether `bytes` in the state of `version` get `reply`.
    func answers(_ bytes: [UInt8], at version: Int) -> Bool { self.version == version && line == bytes }

    mutating func keep(_ bytes: [UInt8], at version: Int, reply: UnsafeRawBufferPointer) {
        line = bytes
        self.version = version
        self.reply.removeAll(keepingCapacity: true)
        // Typed, so the copy is one memcpy (a raw buffer is appended a byte at a time).
        self.reply.append(contentsOf: reply.assumingMemoryBound(to: UInt8.self))
    }

    /// Forgets it (another process now speaks on the connection).
    mutating func drop() { self = ReplyCache() }
}
