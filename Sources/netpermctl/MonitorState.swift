// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

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
    /// Events were lost (`why`; `dropped` of them when the monitor fell behind): the whole state came again, and
    /// `changes` is what differs from what the monitor knew.
    indirect case resync(seq: Int, why: String, dropped: Int?, changes: [MonitorChange])
    case overflow
    case other(seq: Int, name: String)
}

/// What the monitor last heard about each link, app and the policy, from the snapshot and the events since.
struct MonitorState {
    private var links: [Int: JSON] = [:]
    private var apps: [String: JSON] = [:]
    private var policy: JSON?

    /// Replaces what the monitor knew with a resync's state; returns the differences as the events that were
    /// lost would have told them (for the topics the resync carries).
    private mutating func resync(_ e: JSON, seq: Int) -> [MonitorChange] {
        var changes: [MonitorChange] = []
        if let links = e["links"]?.arrayValue {
            var fresh: [Int: JSON] = [:]
            for l in links { fresh[LinkView(l).index] = l }
            for (index, old) in self.links.sorted(by: { $0.key < $1.key }) where fresh[index] == nil {
                changes.append(.link(seq: seq, .removed, old: old, new: old))
            }
            for l in links {
                let index = LinkView(l).index
                if let old = self.links[index] {
                    if old != l { changes.append(.link(seq: seq, .changed, old: old, new: l)) }
                } else {
                    changes.append(.link(seq: seq, .added, old: nil, new: l))
                }
            }
            self.links = fresh
        }
        if let apps = e["apps"]?.arrayValue {
            for v in apps {
                let name = v["app"]?.stringValue ?? ""
                if let old = self.apps[name], old["available"] == v["available"], old["reason"] == v["reason"],
                   old["permissions"] == v["permissions"], old["denied_kinds"] == v["denied_kinds"],
                   old["pending_kinds"] == v["pending_kinds"] { continue }
                changes.append(.app(seq: seq, old: self.apps[name], new: v))
                self.apps[name] = v
            }
        }
        if let p = e["policy"], p != policy {
            changes.append(.policy(seq: seq, old: policy, new: p))
            policy = p
        }
        return changes
    }

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
        case .resync?:
            return .resync(seq: seq, why: e["why"]?.stringValue ?? "?", dropped: e["dropped"]?.intValue,
                           changes: resync(e, seq: seq))
        case .overflow?:
            return .overflow
        case .prompt?, .promptExpired?, .promptAnswered?, .promptWithdrawn?, .usage?, .unsubscribed?, .scopeWanted?, .counted?, nil:
            return .other(seq: seq, name: e["event"]?.stringValue ?? "?")
        }
    }
}
