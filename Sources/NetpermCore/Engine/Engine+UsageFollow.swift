// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// A person's settings window follows their apps' bytes as they move (docs/PROTOCOL.md, `counted`). The kernel's
/// counters say nothing as they grow, so while a `SUBSCRIBE mine` subscriber listens and counting is on, the daemon
/// reads them every `usageFollowMicroseconds` (one reading shared by all, on the usage thread, as every reading is),
/// and each such subscriber whose readable counts moved hears only its own apps' new totals. No subscriber: no
/// extra reading.
struct UsageFollow {
    fileprivate(set) var timer: TimerID?
}

extension Engine {
    /// How often the counters are read while someone follows them: within 1 s of a byte, with the event's way.
    static let usageFollowMicroseconds: UInt64 = 500_000

    /// From every input's settle: the follow timer runs exactly while a `mine` subscriber listens and counting is
    /// in force.
    func settleUsageFollow() {
        let wanted = state.config.usage.count && usage.counters.known && !usage.saving.stopping
            && clients.sessions.values.contains { $0.subscription?.topics.contains(.mine) == true }
        if wanted, usage.follow.timer == nil {
            usage.follow.timer = armTimer(.usageFollow, microseconds: Self.usageFollowMicroseconds)
        } else if !wanted, let t = usage.follow.timer {
            cancelTimer(t)
            usage.follow.timer = nil
        }
    }

    /// The follow timer fired: a reading (joining one in flight); settle arms the next.
    func usageFollowFired() {
        usage.follow.timer = nil
        requestUsageRead()
    }

    /// After a reading: each `mine` subscriber whose readable counts moved gets a `counted` event with the entries
    /// USAGE would give it of those that moved (its own apps, its uid's parts of desktop apps; root's: any).
    func tellCounted(_ apps: Set<String>, _ users: Set<UserApp>) {
        guard !apps.isEmpty || !users.isEmpty else { return }
        for session in orderedSessions(where: { $0.subscription?.topics.contains(.mine) == true }) {
            let caller = session.caller
            let own = apps.filter { state.config.app(named: $0).map { mayReadUsage(of: $0, caller) } ?? caller.privileged }.sorted()
            let parts = users.filter { mayReadUsage(of: $0, caller) }.sorted()
            guard !own.isEmpty || !parts.isEmpty else { continue }
            let range = out.write { b in
                session.subscription!.writeHead(.counted, into: b)
                var w = JSONWriter(continuing: b)
                w.objects("apps", own) { w, app in writeUsage(of: app, for: caller, to: &w) }
                w.objects("user_apps", parts) { w, u in writeUsage(of: u, to: &w) }
                w.close()
                b.append(0x0A)
            }
            out.append(.event(session.id, head: range, tail: range.upperBound..<range.upperBound))
        }
    }
}
