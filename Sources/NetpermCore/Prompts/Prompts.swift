// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// The link a prompt asks about, as the question names it: a link's name, kind, whether it is metered or roaming
/// (as judged: unknown is home), and its carrier when stacked.
public struct PromptLink: Equatable, Sendable {
    public var name: String
    public var kind: LinkKind
    public var metered: Bool
    /// Roaming: the question is about using it abroad.
    public var roaming: Bool
    /// The link's carrier when it is stacked or a tunnel ("wwan0" for tun0 over wwan0).
    public var over: String?

    public init(name: String, kind: LinkKind, metered: Bool, roaming: Bool = false, over: String? = nil) {
        self.name = name; self.kind = kind; self.metered = metered; self.roaming = roaming; self.over = over
    }

    public init(_ link: Link) {
        self.init(name: link.name, kind: link.kind, metered: link.metered, roaming: link.roaming == true, over: link.over)
    }
}

/// A question to a person: may this app use the kinds of network it would use now (`kinds`: the link's kind and,
/// when the link is metered or roaming, `metered` and `roaming`)? One per app and scope while open, whatever asks again.
public struct Prompt: Equatable, Sendable {
    public var id: Int
    public var app: String
    /// Whose decision it asks for: nil, everyone's (a privileged process asked, or `UserDecisions=no`); else that
    /// uid's own, for its processes (its own agent may answer it, and privileged agents, for everyone).
    public var scope: UInt32?
    /// The uid of the process that asked, or the owner of the rejected packet's socket (nil: it had none).
    public var uid: UInt32?
    /// How the app was identified when it asked (nil when raised by a rejected packet).
    public var identity: PeerIdentity?
    /// Every pending dimension it asks about, in reporting order: an answer covers them all.
    public var kinds: [PolicyDimension]
    /// The link the app would use (or the rejected packet left by).
    public var link: PromptLink
    /// Raised (or joined) by a rejected packet of the app (Mode=block): `"source":"blocked"`.
    public var blocked = false
    /// Where the rejected packet that raised it was going ("203.0.113.5:443"), when the kernel said.
    public var destination: String?
    /// The app was recognised by a name its user's own service manager gave (a `UserUnit=` match): the user, not the
    /// policy's author, said which app it is, so an admin's answer is for that uid unless they answer for everyone.
    public var userNamed = false
    /// The app's name, names and icon from its desktop file, as the uid asked for sees them: "Allow “Maps” to use
    /// cellular data?" (in the agent's person's language), the notification's icon.
    public var face = AppFace()
    /// The processes that asked while it was open: once every one has exited it is withdrawn, unless the app's
    /// traffic was rejected too (no process is known to have given up then).
    public var askers: [Int32] = []
    public var timeoutSec = 60

    /// The first of `kinds`, for agents that answer one kind with DECIDE.
    public var kind: PolicyDimension { kinds[0] }

    /// The members of a PROMPTS entry and a `prompt` event.
    public func write(to s: inout JSONWriter) {
        s.field("id", id)
        s.field("app", app)
        face.write(to: &s)
        s.field("uid", uid.map { Int($0) })
        s.object("identity", identity) {
            $0.field("executable", $1.executable)
            $0.field("unit", $1.unit)
            $0.field("uid", Int($1.uid))
        }
        s.field("kind", kind.rawValue)
        s.field("kinds", strings: kinds.lazy.map(\.rawValue))
        s.object("link") {
            $0.field("name", link.name)
            $0.field("kind", link.kind.rawValue)
            $0.field("metered", link.metered)
            $0.field("roaming", link.roaming)
            $0.field("over", link.over)
        }
        if blocked { s.field("source", "blocked") }
        if let destination { s.field("destination", destination) }
        s.objects("choices", PromptChoice.allCases) {
            $0.field("choice", $1.rawValue)
            $0.field("label", $1.label(kinds: kinds))
        }
        s.field("once_until", PromptChoice.onceUntil)
        s.field("timeout_sec", timeoutSec)
        s.field("for_uid", scope.map { Int($0) })
        s.field("user_named", userNamed)
    }

    /// What every event about a prompt after it was raised starts with.
    public func writeHead(to s: inout JSONWriter) {
        s.field("id", id)
        s.field("app", app)
        s.field("uid", uid.map { Int($0) })
        s.field("kind", kind.rawValue)
        s.field("kinds", strings: kinds.lazy.map(\.rawValue))
    }
}

/// Open prompts: at most one per app and scope. Pure bookkeeping; the daemon owns the timers.
public struct PromptBook: Sendable {
    public private(set) var open: [Prompt] = []
    private var count: UInt32 = 0
    /// Ids are the count of prompts raised, permuted with this key (PromptIDs).
    private let idKey: PromptIDKey

    public init(idKey: PromptIDKey = .none) { self.idKey = idKey }

    /// The next id, never 0.
    private mutating func nextID() -> Int {
        while true {
            count &+= 1
            let x = PromptIDs.permuted(count & 0x7FFF_FFFF, key: idKey)
            if x != 0 { return Int(x) }
        }
    }

    public func find(app: String, scope: UInt32?) -> Prompt? { open.first { $0.app == app && $0.scope == scope } }

    /// The most prompts open at once for one scope (a uid, or everyone's), as decisions are bounded: a user's
    /// processes asking for 300 apps must not bury the agents (and other users' prompts) under 300 questions.
    public static let perScope = 256

    /// Whether `scope` may have another prompt open now.
    public func hasRoom(for scope: UInt32?) -> Bool {
        var n = 0
        for p in open where p.scope == scope {
            n += 1
            if n >= Self.perScope { return false }
        }
        return true
    }
    public func find(id: Int) -> Prompt? { open.first { $0.id == id } }

    /// The prompt for a verdict awaiting a decision (one for all its pending kinds, on the best link they keep the
    /// app off, or on `link`, the one a destination's traffic would leave by), unless one is open for the app and
    /// scope.
    public mutating func raise(for verdict: Verdict, scope: UInt32?, uid: UInt32?, identity: PeerIdentity?,
                               network: NetworkState, timeoutSec: Int, link given: Link? = nil,
                               destination: String? = nil, userNamed: Bool = false) -> Prompt? {
        guard verdict.reason == .awaitingDecision, !verdict.kinds.pending.isEmpty,
              find(app: verdict.app, scope: scope) == nil, hasRoom(for: scope) else { return nil }
        let pending = Set(verdict.kinds.pending)
        // The links a decision would open: usable, kept off only by pending kinds.
        let candidates = network.usableLinks.lazy.filter { l in
            let blocking = verdict.permissions.blocking(l)
            return !blocking.isEmpty && blocking.allSatisfy { pending.contains($0.0) }
        }
        guard let link = given ?? network.best(of: candidates) else { return nil }
        open.append(Prompt(id: nextID(), app: verdict.app, scope: scope, uid: uid, identity: identity,
                           kinds: verdict.kinds.pending, link: PromptLink(link), destination: destination, userNamed: userNamed,
                           askers: (identity?.pid).flatMap { $0 > 0 ? [$0] : nil } ?? [], timeoutSec: timeoutSec))
        return open[open.count - 1]
    }

    /// The prompt for a rejected packet of the app on a pending `kind`, out of `link` (nil: not known, the best
    /// usable link of that kind is taken, else any of it): it asks about every undecided `ask` of `permissions`
    /// that keeps the app off that link. Nil when one is open for the app and scope, or no such link exists.
    public mutating func raiseBlocked(app: String, kind: PolicyDimension, link given: Link?, permissions: PermissionSet,
                                      scope: UInt32?, uid: UInt32?, network: NetworkState, timeoutSec: Int,
                                      userNamed: Bool = false) -> Prompt? {
        guard find(app: app, scope: scope) == nil, hasRoom(for: scope) else { return nil }
        func ofKind(_ l: Link) -> Bool {
            switch kind {
            case .metered: return l.metered
            case .roaming: return l.roaming == true
            case .wifi, .wwan, .ethernet, .other: return kind.kind == l.kind
            }
        }
        guard let link = given ?? network.best(of: network.usableLinks.lazy.filter(ofKind))
                ?? network.links.first(where: { ofKind($0) && $0.kind != .loopback })
        else { return nil }
        var kinds = Set(permissions.blocking(link).filter { $0.1 == .ask }.map(\.0))
        kinds.insert(kind)
        open.append(Prompt(id: nextID(), app: app, scope: scope, uid: uid, identity: nil,
                           kinds: Verdict.reportedKinds.filter(kinds.contains), link: PromptLink(link), blocked: true,
                           userNamed: userNamed,
                           timeoutSec: timeoutSec))
        return open[open.count - 1]
    }

    /// The app's name, names and icon, once the prompt is raised.
    public mutating func name(id: Int, _ face: AppFace) {
        guard let i = open.firstIndex(where: { $0.id == id }) else { return }
        open[i].face = face
    }

    /// Another process of the app asks while its prompt is open: it joins the askers. Returns whether it is new.
    public mutating func join(id: Int, asker pid: Int32) -> Bool {
        guard pid > 0, let i = open.firstIndex(where: { $0.id == id }), !open[i].askers.contains(pid) else { return false }
        open[i].askers.append(pid)
        return true
    }

    /// The app's traffic was rejected while its prompt is open: no process's exit withdraws it any more.
    public mutating func markBlocked(id: Int, destination: String? = nil) {
        guard let i = open.firstIndex(where: { $0.id == id }) else { return }
        open[i].blocked = true
        if open[i].destination == nil { open[i].destination = destination }
    }

    /// A process has exited: the prompts it alone was asking for (and no rejected packet), which are closed.
    public mutating func askerExited(_ pid: Int32) -> [Prompt] {
        var gone: [Prompt] = []
        for i in open.indices where open[i].askers.contains(pid) {
            open[i].askers.removeAll { $0 == pid }
            if open[i].askers.isEmpty && !open[i].blocked { gone.append(open[i]) }
        }
        open.removeAll { p in gone.contains { $0.id == p.id } }
        return gone
    }

    @discardableResult
    public mutating func close(id: Int) -> Prompt? {
        guard let i = open.firstIndex(where: { $0.id == id }) else { return nil }
        return open.remove(at: i)
    }

    /// Closes the app's open prompts about any of `kinds` (nil: every kind), of one scope or (`everyone`) of all
    /// scopes: what a decision answers. Returns them.
    public mutating func close(app: String, kinds: [PolicyDimension]?, scope: UInt32?, everyone: Bool) -> [Prompt] {
        func answered(_ p: Prompt) -> Bool {
            p.app == app && (everyone || p.scope == scope) && (kinds.map { k in p.kinds.contains(where: k.contains) } ?? true)
        }
        let closing = open.filter(answered)
        open.removeAll(where: answered)
        return closing
    }
}
