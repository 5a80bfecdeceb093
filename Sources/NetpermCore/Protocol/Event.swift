// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// A change the daemon tells subscribers about. Events mean change: they are derived by comparing
/// states, never from individual netlink messages.
public enum Event: Equatable, Sendable {
    public enum LinkChange: String, Sendable { case added, changed, removed }

    case link(LinkChange, Link)
    case app(Verdict)
    case policy(generation: Int, apps: Int, error: String?)
    case prompt(Prompt)
    /// No answer in time: nothing is stored, the app stays awaiting a decision.
    case promptExpired(Prompt)
    /// `uid` nil: answered for everyone; else for that uid's processes.
    case promptAnswered(Prompt, Permission, once: Bool, uid: UInt32?)
    /// Closed unanswered before its time: every process that asked has exited (and no packet of the app was
    /// rejected), or the person dismissed it.
    case promptWithdrawn(Prompt, why: WithdrawReason)
    /// An app crossed 80% or 100% of its metered budget.
    case usage(BudgetNotice)
    /// The daemon is stopping (SIGTERM).
    case stopping

    public var topic: Topic? {
        switch self {
        case .link: return .links
        case .app: return .apps
        case .policy: return .policy
        case .prompt, .promptExpired, .promptAnswered, .promptWithdrawn: return .prompts
        case .usage: return .usage
        // Every subscriber hears it, whatever its topics.
        case .stopping: return nil
        }
    }

    public var name: EventName {
        switch self {
        case .link: return .link
        case .app: return .app
        case .policy: return .policy
        case .prompt: return .prompt
        case .promptExpired: return .promptExpired
        case .promptAnswered: return .promptAnswered
        case .promptWithdrawn: return .promptWithdrawn
        case .usage: return .usage
        case .stopping: return .stopping
        }
    }

    /// The members after `event` and `seq`: written once, shared by every subscriber.
    public func writeMembers(to s: inout JSONWriter) {
        switch self {
        case let .link(change, link):
            s.field("change", change.rawValue)
            s.object("link") { link.write(to: &$0) }
        case let .app(v):
            v.write(to: &s, matchedBy: false)
        case let .policy(generation, apps, error):
            s.field("generation", generation)
            s.field("apps", apps)
            s.field("error", error)
        case let .prompt(p):
            p.write(to: &s)
        case let .promptExpired(p):
            p.writeHead(to: &s)
        case let .promptAnswered(p, decision, once, uid):
            p.writeHead(to: &s)
            s.field("decision", decision.rawValue)
            s.field("once", once)
            s.field("for_uid", uid.map { Int($0) })
        case let .promptWithdrawn(p, why):
            p.writeHead(to: &s)
            s.field("why", why.rawValue)
        case let .usage(n):
            n.write(to: &s)
        case .stopping:
            break
        }
    }

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

/// What a `usage` event says: an app's metered bytes this period reached `percent` (80 or 100) of its budget.
public struct BudgetNotice: Equatable, Sendable {
    public var app: String
    public var percent: Int
    public var budget: BudgetFact

    public init(app: String, percent: Int, budget: BudgetFact) { self.app = app; self.percent = percent; self.budget = budget }

    func write(to w: inout JSONWriter) {
        w.field("app", app)
        w.field("percent", percent)
        w.object("budget") { budget.write(to: &$0) }
    }
}
