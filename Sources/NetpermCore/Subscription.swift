/// One subscriber's filter and sequence counter. `seq` counts the events sent to this subscriber, starting
/// with 1 for the snapshot, so a gap always means a lost event.
public struct Subscription: Sendable {
    public var topics: Set<Topic>
    public var privileged: Bool
    /// The subscriber's own app: the only one an unprivileged subscriber hears about.
    public var appID: String
    public private(set) var seq = 0

    /// `continuing`: the connection's earlier subscription, whose count goes on.
    public init(topics: Set<Topic>, privileged: Bool, appID: String, continuing earlier: Subscription? = nil) {
        self.topics = topics; self.privileged = privileged; self.appID = appID
        seq = earlier?.seq ?? 0
    }

    /// Parses `SUBSCRIBE [TOPIC...]`; no topic means the default ones.
    public static func topics(from args: [String]) -> Result<Set<Topic>, ProtocolError> {
        guard !args.isEmpty else { return .success(Topic.defaults) }
        var topics: Set<Topic> = []
        for a in args {
            guard let t = Topic(rawValue: a.lowercased()) else {
                return .failure(ProtocolError(.badArguments, "unknown topic \(ConfigError.quote(a)) (expected "
                    + Topic.allCases.map(\.rawValue).joined(separator: ", ") + ")"))
            }
            topics.insert(t)
        }
        return .success(topics)
    }

    /// Agents are privileged subscribers of prompts.
    public var isAgent: Bool { privileged && topics.contains(.prompts) }

    /// Whether the subscriber hears of `app`'s verdict: its own under `apps` or `self`, any other under `apps` only
    /// when privileged.
    public func hears(app: String) -> Bool {
        app == appID ? topics.contains(.apps) || topics.contains(.own) : privileged && topics.contains(.apps)
    }

    public func wants(_ event: Event) -> Bool {
        if case let .app(v) = event { return hears(app: v.app) }
        if case let .usage(n) = event {
            return topics.contains(.usage) && (n.app == appID || privileged)
        }
        guard let topic = event.topic else { return true }
        guard topics.contains(topic) else { return false }
        switch event {
        case .app, .usage: return false
        case .prompt, .promptExpired, .promptAnswered: return privileged
        case .link, .policy, .stopping: return true
        }
    }

    /// Writes this subscriber's start of an event line, `{"event":"NAME","seq":N`, counting the event.
    public mutating func writeHead(_ name: EventName, into out: ByteBuffer) {
        seq += 1
        var w = JSONWriter(out)
        w.field("event", name.rawValue)
        w.field("seq", seq)
    }
}
