// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// Monitor events for people: what changed, old -> new.
enum MonitorText {
    static func describe(_ change: MonitorChange, app filter: String?) -> String? {
        switch change {
        case let .snapshot(seq, links, apps, policy):
            var out = "[\(seq)] snapshot:"
            for l in links.map(LinkView.init) { out += "\n  \(subject(l)): " + summary(l) }
            for v in apps where filter == nil || v["app"]?.stringValue == filter {
                out += "\n  app \(v["app"]?.stringValue ?? "?"): \(Render.because(v))"
            }
            if let policy { out += "\n  " + policySummary(policy) }
            return out
        case let .link(seq, .added, _, new):
            return "[\(seq)] link added: \(subject(LinkView(new))): " + summary(LinkView(new))
        case let .link(seq, .removed, _, new):
            return "[\(seq)] link removed: \(subject(LinkView(new)))"
        case let .link(seq, .changed, old, new):
            let l = LinkView(new)
            guard let old else { return "[\(seq)] \(subject(l)): " + summary(l) }
            let changes = differences(LinkView(old), l)
            return "[\(seq)] \(subject(l)): "
                + (changes.isEmpty ? "no visible change" : changes.joined(separator: ", "))
        case let .app(seq, old, new):
            let name = new["app"]?.stringValue ?? "?"
            if let filter, name != filter { return nil }
            guard let old else { return "[\(seq)] app \(name): \(Render.because(new))" }
            let (before, after) = (Render.because(old), Render.because(new))
            var parts = [before == after ? "still " + after : "\(before) -> \(after)"]
            for kind in ["wifi", "wwan", "ethernet", "other", "metered"] where permission(old, kind) != permission(new, kind) {
                parts.append("\(kind) \(permission(old, kind)) -> \(permission(new, kind))")
            }
            // The verdict's words name only the kinds that decided it; the others can change underneath.
            for (key, label) in [("denied_kinds", "denied kinds"), ("pending_kinds", "pending kinds")]
            where before == after && kinds(old, key) != kinds(new, key) {
                parts.append("\(label) \(kinds(old, key)) -> \(kinds(new, key))")
            }
            return "[\(seq)] app \(name): " + parts.joined(separator: "; ")
        case let .policy(seq, old, new):
            let generation = new["generation"]?.intValue ?? 0
            if let error = new["error"]?.stringValue {
                return "[\(seq)] policy reload failed (still generation \(generation)): \(error)"
            }
            guard let old else { return "[\(seq)] " + policySummary(new) }
            let oldGeneration = old["generation"]?.intValue ?? 0
            let apps = new["apps"]?.intValue ?? 0, oldApps = old["apps"]?.intValue ?? 0
            return "[\(seq)] policy: generation \(oldGeneration) -> \(generation), "
                + (apps == oldApps ? counted(apps, "app") : "apps \(oldApps) -> \(apps)")
                + (old["error"]?.stringValue == nil ? "" : ", error cleared")
        case let .stopping(seq):
            return "[\(seq)] netpermd is stopping"
        case let .resync(seq, why, dropped, changes):
            let lost = why == ResyncReason.fellBehind.rawValue
                ? "this monitor fell behind and \(dropped ?? 0) events were dropped"
                : why == ResyncReason.netlinkOverrun.rawValue ? "netpermd lost kernel messages and read everything again"
                : why
            let lines = changes.compactMap { describe($0, app: filter) }
            return "[\(seq)] resync: \(lost); " + (lines.isEmpty ? "nothing differs" : "what differs:")
                + lines.map { "\n  " + $0 }.joined()
        case .overflow:
            return "netpermd dropped this monitor: it fell too far behind"
        case let .other(seq, name):
            return "[\(seq)] \(name)"
        }
    }

    static func subject(_ l: LinkView) -> String { "\(l.name) (\(l.kind)\(l.over.map { " over " + $0 } ?? ""))" }

    /// The fields a link event may change, in people's words, in the order they are told.
    static func fields(_ l: LinkView) -> [(String, String)] {
        let families = l.defaultRouteFamilies
        return [
            ("name", l.name), ("kind", l.kind), ("classified by", l.classifiedBy), ("over", l.over ?? "-"),
            ("metered", LinkText.yesNo(l.metered)), ("metered by", l.meteredBy), ("admin", l.adminUp ? "up" : "down"),
            ("carrier", l.carrier ? "on" : "off"), ("operstate", l.operstate),
            ("default route", families.isEmpty ? "none"
                : families.joined(separator: ",") + (l.metric.map { " metric \($0)" } ?? "")),
            ("usable", LinkText.yesNo(l.usable)),
        ]
    }

    static func summary(_ l: LinkView) -> String {
        let addresses = l.addresses
        return fields(l).dropFirst(4).map { "\($0.0) \($0.1)" }.joined(separator: ", ")
            + (addresses.isEmpty ? ", no addresses" : ", addresses " + addresses.joined(separator: ","))
    }

    /// "carrier on -> off", and addresses as "+added -removed".
    static func differences(_ old: LinkView, _ new: LinkView) -> [String] {
        let added = new.addresses.filter { !old.addresses.contains($0) }
        let removed = old.addresses.filter { !new.addresses.contains($0) }
        var out: [String] = []
        for ((label, before), (_, after)) in zip(fields(old), fields(new)) {
            // Addresses before the default route: the route usually comes through an address just added.
            if label == "default route" && !(added.isEmpty && removed.isEmpty) {
                out.append("addresses " + (added.map { "+" + $0 } + removed.map { "-" + $0 }).joined(separator: " "))
            }
            if before != after { out.append("\(label) \(before) -> \(after)") }
        }
        return out
    }

    static func kinds(_ v: JSON, _ key: String) -> String {
        let list = (v[key]?.arrayValue ?? []).compactMap(\.stringValue)
        return list.isEmpty ? "none" : list.joined(separator: ",")
    }

    /// "allow", or "allow (decision)" when it does not come from the policy file.
    static func permission(_ v: JSON, _ kind: String) -> String {
        let p = v["permissions"]?[kind]?.stringValue ?? "?"
        let source = v["sources"]?[kind]?.stringValue ?? "policy"
        return source == "policy" ? p : "\(p) (\(source))"
    }

    static func policySummary(_ p: JSON) -> String {
        "policy: generation \(p["generation"]?.intValue ?? 0), " + counted(p["apps"]?.intValue ?? 0, "app")
            + (p["error"]?.stringValue.map { "; the last reload failed: \($0)" } ?? "")
    }
}
