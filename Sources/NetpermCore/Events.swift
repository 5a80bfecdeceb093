/// What a subscriber can ask to hear about.
public enum Topic: String, Sendable, CaseIterable {
    case links, apps, policy
    /// Prompts for undecided apps; privileged subscribers of this topic are the agents.
    case prompts

    /// What `SUBSCRIBE` alone means: prompts only for those who ask to be agents.
    public static let defaults: Set<Topic> = [.links, .apps, .policy]
}

/// A change the daemon tells subscribers about. Events mean change: they are derived by comparing
/// states, never from individual netlink messages.
public enum Event: Equatable, Sendable {
    public enum LinkChange: String, Sendable { case added, changed, removed }

    case link(LinkChange, Link)
    case app(Verdict)
    case policy(generation: Int, apps: Int, error: String?)
    case prompt(Prompt)
    /// No agent, or no answer in time: nothing is stored, the app stays awaiting a decision.
    case promptExpired(Prompt)
    case promptAnswered(Prompt, Permission, once: Bool)

    public var topic: Topic {
        switch self {
        case .link: return .links
        case .app: return .apps
        case .policy: return .policy
        case .prompt, .promptExpired, .promptAnswered: return .prompts
        }
    }

    public var name: String {
        switch self {
        case .link: return "link"
        case .app: return "app"
        case .policy: return "policy"
        case .prompt: return "prompt"
        case .promptExpired: return "prompt-expired"
        case .promptAnswered: return "prompt-answered"
        }
    }

    /// The fields after `event` and `seq`.
    public var fields: [(String, JSON)] {
        switch self {
        case .link, .app:
            var tree = JSONTreeSink(capacity: 12)
            writeFrequent(to: &tree)
            return tree.members
        case let .policy(generation, apps, error):
            return [("generation", .int(generation)), ("apps", .int(apps)), ("error", error.map { .string($0) } ?? .null)]
        case let .prompt(p):
            guard case let .object(members) = p.json else { return [] }
            return members
        case let .promptExpired(p):
            return [("id", .int(p.id)), ("app", .string(p.app)), ("kind", .string(p.kind.rawValue))]
        case let .promptAnswered(p, decision, once):
            return [("id", .int(p.id)), ("app", .string(p.app)), ("kind", .string(p.kind.rawValue)),
                    ("decision", .string(decision.rawValue)), ("once", .bool(once))]
        }
    }

    /// `,"key":value` per field, then `}\n`: encoded once for every subscriber, each of which only puts its own
    /// `{"event":...,"seq":N` in front.
    public func encodedTailBytes() -> [UInt8] {
        let buffer = ByteBuffer(capacity: 1024)
        switch self {
        case .link, .app:
            var sink = JSONByteSink(continuing: buffer)
            writeFrequent(to: &sink)
        case .policy, .prompt, .promptExpired, .promptAnswered:
            JSON.appendMembers(fields, to: buffer)
        }
        buffer.append(ascii: 0x0A7D, count: 2)   // }\n
        return Array(UnsafeBufferPointer(start: buffer.base, count: buffer.count))
    }

    /// The members of the events every link change sends (a link's, then its apps'), written once for the tree
    /// and for the bytes.
    private func writeFrequent<S: JSONSink>(to s: inout S) {
        switch self {
        case let .link(change, link):
            s.field("change", change.rawValue)
            s.object("link") { link.write(to: &$0) }
        case let .app(v):
            v.write(to: &s, matchedBy: false)
        case .policy, .prompt, .promptExpired, .promptAnswered:
            break
        }
    }

    public func encodedTail() -> String { String(decoding: encodedTailBytes(), as: UTF8.self) }

    /// Link events for every link whose reported fields differ between two pictures.
    public static func linkChanges(from old: NetworkState, to new: NetworkState) -> [Event] {
        var events: [Event] = []
        var oldByIndex: [Int32: Link] = [:]
        for l in old.links { oldByIndex[l.index] = l }
        for l in new.links {
            if let o = oldByIndex.removeValue(forKey: l.index) {
                if o != l { events.append(.link(.changed, l)) }
            } else {
                events.append(.link(.added, l))
            }
        }
        for o in old.links where oldByIndex[o.index] != nil { events.append(.link(.removed, o)) }
        return events
    }
}

extension Verdict {
    /// The verdict as an event carries it: who asked is not part of the app's state.
    var eventFields: [(String, JSON)] {
        var tree = JSONTreeSink(capacity: 9)
        write(to: &tree, matchedBy: false)
        return tree.members
    }
}

/// One subscriber's filter and sequence counter. `seq` counts the events sent to this subscriber, starting
/// with 1 for the snapshot, so a gap always means a lost event.
public struct Subscription: Sendable {
    public var topics: Set<Topic>
    public var privileged: Bool
    /// The subscriber's own app: the only one an unprivileged subscriber hears about.
    public var appID: String
    public private(set) var seq = 0

    public init(topics: Set<Topic>, privileged: Bool, appID: String) {
        self.topics = topics; self.privileged = privileged; self.appID = appID
    }

    /// Parses `SUBSCRIBE [TOPIC...]`; no topic means all of them.
    public static func topics(from args: [String]) -> Result<Set<Topic>, ProtocolError> {
        guard !args.isEmpty else { return .success(Topic.defaults) }
        var topics: Set<Topic> = []
        for a in args {
            guard let t = Topic(rawValue: a.lowercased()) else {
                return .failure(ProtocolError(.badArguments, "unknown topic '\(a)' (expected "
                    + Topic.allCases.map(\.rawValue).joined(separator: ", ") + ")"))
            }
            topics.insert(t)
        }
        return .success(topics)
    }

    public func wants(_ event: Event) -> Bool {
        guard topics.contains(event.topic) else { return false }
        switch event {
        case let .app(v): return privileged || v.app == appID
        case .prompt, .promptExpired, .promptAnswered: return privileged
        case .link, .policy: return true
        }
    }

    /// The full line for an event whose tail was encoded once by `Event.encodedTail()`.
    public mutating func line(event name: String, tail: String) -> String {
        seq += 1
        return "{\"event\":\"\(name)\",\"seq\":\(seq)" + tail
    }

    public mutating func snapshot(state: DaemonState, verdicts: [Verdict]) -> String {
        var fields: [(String, JSON)] = []
        if topics.contains(.links) { fields.append(("links", .array(state.network.links.map(\.json)))) }
        if topics.contains(.apps) {
            let visible = verdicts.filter { privileged || $0.app == appID }
            fields.append(("apps", .array(visible.map { .object($0.eventFields) })))
        }
        if topics.contains(.prompts) && privileged {
            fields.append(("prompts", .array(state.prompts.open.map(\.json))))
        }
        if topics.contains(.policy) {
            fields.append(("policy", .object([
                ("generation", .int(state.policyGeneration)),
                ("apps", .int(state.config.apps.count)),
                ("error", state.policyError.map { .string($0) } ?? .null),
            ])))
        }
        seq += 1
        return JSON.object([("event", "snapshot"), ("seq", .int(seq))] + fields).encoded() + "\n"
    }
}

/// The verdicts of every app someone may hear about (the policy's apps and the subscribers' and waiters' own),
/// and the events when they change. Verdicts depend only on the permission set, so they are computed once per
/// distinct set (at most 81), not once per app: a 10,000-app policy costs the same per link change.
public struct VerdictTracker: Sendable {
    private var matches: [String: AppMatch] = [:]
    private var order: [String] = []
    private var verdicts: [String: Verdict] = [:]
    private var appsBySet: [EffectivePermissions: [String]] = [:]
    private var templates: [EffectivePermissions: Verdict] = [:]

    public init() {}

    public func verdict(_ app: String) -> Verdict? { verdicts[app] }
    public var all: [Verdict] { order.compactMap { verdicts[$0] } }

    /// Rebuilds the set of apps after a policy load, keeping extra (derived) apps; returns app events.
    public mutating func reset(state: DaemonState, extra: [AppMatch]) -> [Event] {
        let old = verdicts
        matches = [:]; order = []; verdicts = [:]; appsBySet = [:]; templates = [:]
        for app in state.config.apps { add(AppMatch(id: app.id, matchedBy: .name, app: app), state: state) }
        for m in extra where matches[m.id] == nil { add(m, state: state) }
        return order.compactMap { id in
            guard let v = verdicts[id], let o = old[id], !o.sameState(as: v) else { return nil }
            return .app(v)
        }
    }

    /// Starts tracking one app (a subscriber's or waiter's own); no event.
    public mutating func track(_ match: AppMatch, state: DaemonState) {
        guard matches[match.id] == nil else { return }
        add(match, state: state)
    }

    /// Stops tracking an app nobody listens to any more (never a policy app: those are always tracked).
    public mutating func untrack(_ id: String, state: DaemonState) {
        guard let m = matches[id], state.config.app(named: id) == nil else { return }
        let perms = state.effectivePermissions(for: m)
        matches[id] = nil
        verdicts[id] = nil
        order.removeAll { $0 == id }
        appsBySet[perms]?.removeAll { $0 == id }
        if appsBySet[perms]?.isEmpty == true {
            appsBySet[perms] = nil
            templates[perms] = nil
        }
    }

    private mutating func add(_ match: AppMatch, state: DaemonState) {
        let perms = state.effectivePermissions(for: match)
        matches[match.id] = match
        order.append(match.id)
        let template = templates[perms]
            ?? Verdict.compute(app: "", matchedBy: .name, effective: perms, network: state.network, ready: state.ready)
        templates[perms] = template
        appsBySet[perms, default: []].append(match.id)
        verdicts[match.id] = template.renamed(match.id, match.matchedBy)
    }

    /// Recomputes after the network changed; events for the apps whose verdict changed.
    public mutating func refresh(state: DaemonState) -> [Event] {
        var events: [Event] = []
        for (perms, apps) in appsBySet {
            guard let old = templates[perms] else { continue }
            let new = Verdict.compute(app: "", matchedBy: .name, effective: perms, network: state.network,
                                      ready: state.ready)
            guard !old.sameState(as: new) else { continue }
            templates[perms] = new
            for id in apps {
                let v = new.renamed(id, matches[id]?.matchedBy ?? .name)
                verdicts[id] = v
                events.append(.app(v))
            }
        }
        return events
    }
}

extension Verdict {
    public func renamed(_ id: String, _ by: MatchedBy) -> Verdict {
        var v = self
        v.app = id
        v.matchedBy = by
        return v
    }

    /// Equal in what an app event reports: available, reason, via, kinds (and permissions).
    func sameState(as other: Verdict) -> Bool {
        available == other.available && reason == other.reason && permissions == other.permissions
            && sources == other.sources
            && via?.name == other.via?.name && via?.kind == other.via?.kind && via?.metered == other.via?.metered
            && deniedKinds == other.deniedKinds && pendingKinds == other.pendingKinds
    }
}
