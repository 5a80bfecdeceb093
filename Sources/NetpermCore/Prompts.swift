/// A question to the user: may this app use this kind of network, or (kind `metered`) metered links?
public struct Prompt: Equatable, Sendable {
    public var id: Int
    public var app: String
    /// How the app was identified when it asked (nil when a privileged caller named it).
    public var identity: PeerIdentity?
    public var kind: PolicyDimension
    /// The link the app would use (for `metered`: the metered link it would use).
    public var link: String
    public var metered: Bool
    /// The link's carrier when it is stacked or a tunnel ("wwan0" for tun0 over wwan0).
    public var over: String? = nil
    /// Raised by a rejected packet of the app (Mode=block), not by the app asking: `"source":"blocked"`.
    public var blocked = false

    /// The members of a PROMPTS entry and a `prompt` event.
    public func write(to s: inout JSONWriter) {
        s.field("id", id)
        s.field("app", app)
        s.object("identity", identity) {
            $0.field("executable", $1.executable)
            $0.field("unit", $1.unit)
            $0.field("uid", Int($1.uid))
        }
        s.field("kind", kind.rawValue)
        s.object("link") {
            $0.field("name", link)
            $0.field("metered", metered)
            $0.field("over", over)
        }
        if blocked { s.field("source", "blocked") }
    }
}

/// Open prompts: at most one per app and kind. Pure bookkeeping; the daemon owns the timers.
public struct PromptBook: Sendable {
    public private(set) var open: [Prompt] = []
    private var nextID = 1

    public init() {}

    public func find(app: String, kind: PolicyDimension) -> Prompt? { open.first { $0.app == app && $0.kind == kind } }
    public func find(id: Int) -> Prompt? { open.first { $0.id == id } }

    /// Prompts to raise for a verdict awaiting a decision: one per pending kind not already asked about.
    public mutating func raise(for verdict: Verdict, identity: PeerIdentity?, network: NetworkState) -> [Prompt] {
        guard verdict.reason == .awaitingDecision else { return [] }
        var raised: [Prompt] = []
        for kind in verdict.pendingKinds {
            if let p = raise(app: verdict.app, kind: kind, identity: identity, network: network) { raised.append(p) }
        }
        return raised
    }

    /// A prompt for one app and kind, unless one is open or no usable link of that kind exists.
    public mutating func raise(app: String, kind: PolicyDimension, identity: PeerIdentity?, network: NetworkState,
                               blocked: Bool = false) -> Prompt? {
        guard find(app: app, kind: kind) == nil else { return nil }
        // The best link of that kind (or metered) is the one the app would use. A rejected packet left by a link
        // of that kind even if none is usable (no default route: the app chose the link or a route of its own).
        func ofKind(_ l: Link) -> Bool { kind.kind.map { $0 == l.kind } ?? l.metered }
        let usable = network.best(of: network.usableLinks.lazy.filter(ofKind))
        guard let link = usable ?? (blocked ? network.links.first { ofKind($0) && $0.kind != .loopback } : nil)
        else { return nil }
        let p = Prompt(id: nextID, app: app, identity: identity, kind: kind, link: link.name,
                       metered: link.metered, over: link.over, blocked: blocked)
        nextID += 1
        open.append(p)
        return p
    }

    @discardableResult
    public mutating func close(id: Int) -> Prompt? {
        guard let i = open.firstIndex(where: { $0.id == id }) else { return nil }
        return open.remove(at: i)
    }

    /// Closes every open prompt for the app (and kind); returns them.
    public mutating func close(app: String, kind: PolicyDimension?) -> [Prompt] {
        let closing = open.filter { $0.app == app && (kind == nil || $0.kind == kind) }
        open.removeAll { $0.app == app && (kind == nil || $0.kind == kind) }
        return closing
    }
}
