// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// One subscriber's filter and sequence counter. `seq` counts the events sent to this subscriber, starting
/// with 1 for the snapshot, so a gap always means a lost event.
public struct Subscription: Sendable {
    public var topics: Set<Topic>
    public var privileged: Bool
    /// The subscriber's own app: the only one an unprivileged subscriber hears about.
    public var appID: String
    /// An unprivileged subscriber's uid when users decide for their own apps (`[Defaults] UserDecisions=yes`): it
    /// hears its app as its uid's processes have it, and (subscribed to prompts) its uid's prompts.
    public var ownUID: UInt32?
    /// Hears prompts without answering them: the bus face's own subscriber, whose prompt events become signals.
    /// Nobody is asked through it, so it is no agent: an `ask` with no agent stays a deny (docs/DBUS.md).
    public let observer: Bool
    /// Under `mine`: the ids of the apps `APPS` lists for the subscriber, and the uid whose verdicts it hears of
    /// them (nil when privileged: everyone's). The engine keeps them current (`Engine.relist`).
    public var listed: Set<String> = []
    public var listedUID: UInt32?
    public private(set) var seq = 0

    /// `continuing`: the connection's earlier subscription, whose count goes on.
    public init(topics: Set<Topic>, privileged: Bool, appID: String, ownUID: UInt32? = nil,
                observer: Bool = false, continuing earlier: Subscription? = nil) {
        self.topics = topics; self.privileged = privileged; self.appID = appID; self.ownUID = ownUID
        self.observer = observer
        seq = earlier?.seq ?? 0
        listed = earlier?.listed ?? []
        listedUID = earlier?.listedUID
    }

    /// Agents are subscribers of prompts: privileged ones answer for everyone, a user's for its own uid.
    public var isAgent: Bool { topics.contains(.prompts) && (privileged || ownUID != nil) && !observer }

    /// Whether it may see (and answer) a prompt: every one when privileged, else its own uid's.
    public func mayAnswer(_ p: Prompt) -> Bool { privileged || (ownUID != nil && p.scope == ownUID) }

    /// Whether the subscriber hears of a verdict: its own app's under `apps` or `self` (as its uid has it, when it
    /// decides for its own uid), any other's under `apps` only when privileged (everyone's), and under `mine` each
    /// app listed for it, as `listedUID` has it.
    public func hears(_ v: Verdict) -> Bool {
        if topics.contains(.mine), v.uid == listedUID, listed.contains(v.app) { return true }
        return v.app == appID ? (topics.contains(.apps) || topics.contains(.own)) && v.uid == ownUID
                       : privileged && topics.contains(.apps) && v.uid == nil
    }

    public func wants(_ event: Event) -> Bool {
        if case let .app(v) = event { return hears(v) }
        if case let .usage(n) = event {
            return topics.contains(.usage) && (n.app == appID || privileged)
        }
        guard let topic = event.topic else { return true }
        guard topics.contains(topic) else { return false }
        switch event {
        case .app, .usage: return false
        case let .prompt(p), let .promptExpired(p), let .promptAnswered(p, _, _, _), let .promptWithdrawn(p, _):
            return mayAnswer(p)
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
