import NetpermCore

/// One event as the monitor understood it, with the state it replaced: events carry only the new state.
enum MonitorChange {
    enum LinkChange: String {
        case added, changed, removed
    }

    case snapshot(seq: Int, links: [JSON], apps: [JSON], policy: JSON?)
    case link(seq: Int, LinkChange, old: JSON?, new: JSON)
    case app(seq: Int, old: JSON?, new: JSON)
    case policy(seq: Int, old: JSON?, new: JSON)
    case stopping(seq: Int)
    case overflow
    case other(seq: Int, name: String)
}

/// What the monitor last heard about each link, app and the policy, from the snapshot and the events since.
struct MonitorState {
    private var links: [Int: JSON] = [:]
    private var apps: [String: JSON] = [:]
    private var policy: JSON?

    mutating func apply(_ e: JSON) -> MonitorChange? {
        let seq = e["seq"]?.intValue ?? 0
        switch e["event"]?.stringValue.flatMap(EventName.init) {
        case .snapshot?:
            // A new connection: what came before it may be out of date.
            let links = e["links"]?.arrayValue ?? [], apps = e["apps"]?.arrayValue ?? []
            self.links = [:]
            for l in links { self.links[LinkView(l).index] = l }
            self.apps = [:]
            for v in apps { self.apps[v["app"]?.stringValue ?? ""] = v }
            policy = e["policy"]
            return .snapshot(seq: seq, links: links, apps: apps, policy: policy)
        case .link?:
            guard let l = e["link"], let change = e["change"]?.stringValue.flatMap(MonitorChange.LinkChange.init)
            else { return nil }
            let index = LinkView(l).index
            let old = links[index]
            switch change {
            case .added, .changed: links[index] = l
            case .removed: links[index] = nil
            }
            return .link(seq: seq, change, old: old, new: l)
        case .app?:
            let name = e["app"]?.stringValue ?? ""
            defer { apps[name] = e }
            return .app(seq: seq, old: apps[name], new: e)
        case .policy?:
            defer { policy = e }
            return .policy(seq: seq, old: policy, new: e)
        case .stopping?:
            return .stopping(seq: seq)
        case .overflow?:
            return .overflow
        case .prompt?, .promptExpired?, .promptAnswered?, nil:
            return .other(seq: seq, name: e["event"]?.stringValue ?? "?")
        }
    }
}
