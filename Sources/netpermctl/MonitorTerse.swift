// SPDX-License-Identifier: LGPL-2.1-or-later

/// Monitor events for scripts: SEQ:EVENT:SUBJECT, then FIELD:OLD:NEW for each field that changed, with the
/// keys of `links -t IFACE`, `query -t` and `status -t`. `help monitor` documents it.
enum MonitorTerse {
    static func describe(_ change: MonitorChange, app filter: String?) -> String? {
        switch change {
        case let .snapshot(seq, links, apps, policy):
            var out = links.map { line(seq, "link", LinkView($0).name, old: [], new: Terse.link(LinkView($0))) }
            out += apps.filter { filter == nil || $0["app"]?.stringValue == filter }.map {
                line(seq, "app", $0["app"]?.stringValue ?? "", old: [], new: Terse.verdictState($0))
            }
            if let policy { out.append(line(seq, "policy", "", old: [], new: Terse.policy(policy))) }
            return out.joined(separator: "\n")
        case let .link(seq, .added, _, new):
            return line(seq, "link-added", LinkView(new).name, old: [], new: Terse.link(LinkView(new)))
        case let .link(seq, .removed, _, new):
            return Terse.fields([String(seq), "link-removed", LinkView(new).name])
        case let .link(seq, .changed, old, new):
            return line(seq, "link", LinkView(new).name, old: old.map { Terse.link(LinkView($0)) } ?? [],
                        new: Terse.link(LinkView(new)))
        case let .app(seq, old, new):
            let name = new["app"]?.stringValue ?? ""
            if let filter, name != filter { return nil }
            return line(seq, "app", name, old: old.map(Terse.verdictState) ?? [], new: Terse.verdictState(new))
        case let .policy(seq, old, new):
            return line(seq, "policy", "", old: old.map(Terse.policy) ?? [], new: Terse.policy(new))
        case let .stopping(seq):
            return "\(seq):stopping"
        case let .resync(seq, why, dropped, changes):
            return ([Terse.fields([String(seq), "resync", why] + (dropped.map { [String($0)] } ?? []))]
                + changes.compactMap { describe($0, app: filter) }).joined(separator: "\n")
        case .overflow:
            return ":overflow"
        case let .other(seq, name):
            return Terse.fields([String(seq), name])
        }
    }

    /// With no old fields, every field is new; otherwise only those that differ.
    static func line(_ seq: Int, _ event: String, _ subject: String, old: [(String, String)],
                     new: [(String, String)]) -> String {
        var values = [String(seq), event, subject]
        for (key, value) in new {
            let before = old.first { $0.0 == key }?.1
            guard before != value else { continue }
            values += [key, before ?? "", value]
        }
        return Terse.fields(values)
    }
}
