// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// Events out to subscribers, and prompts to agents.
extension Engine {
    /// Each event's members are written once (twice for an app's verdict with a budget: with its bytes, for those
    /// who may see its usage, and without); every subscriber that wants it gets its own head before them.
    func push(_ events: [Event]) {
        let subscribers = orderedSessions { $0.subscription != nil }
        guard !subscribers.isEmpty else { return }
        for event in events {
            var tails: [Bool: Range<Int>] = [:]
            var budgeted: AppPolicy?
            if case let .app(v) = event, v.budget != nil { budgeted = state.config.app(named: v.app) }
            for s in subscribers where s.subscription!.wants(event) {
                let hide = budgeted.map { !mayReadUsage(of: $0, s.caller) } ?? false
                let shared = tails[hide] ?? out.write { b in
                    var w = JSONWriter(continuing: b)
                    var e = event
                    if hide, case let .app(v) = event { e = .app(forCaller(v, s.caller)) }
                    e.writeMembers(to: &w)
                    w.close()
                    b.append(0x0A)
                }
                tails[hide] = shared
                let head = out.write { s.subscription!.writeHead(event.name, into: $0) }
                out.append(.event(s.id, head: head, tail: shared))
            }
        }
    }

    /// Each subscriber a reload made another app hears that app's verdict (`SUBSCRIBE self`: its own app, whatever its
    /// name): without it, it kept the old app's verdict until the new one changed.
    func tellOwnAppMoved() {
        let ids = clients.ownAppMoved
        clients.ownAppMoved = []
        for id in ids {
            guard let s = clients.sessions[id], s.subscription != nil else { continue }
            var v = forCaller(verdict(for: s.caller.match, uid: s.caller.ownUID), s.caller)
            v.enforcement = ownEnforcement(v.enforcement, s.caller)
            let event = Event.app(v)
            let tail = out.write { b in
                var w = JSONWriter(continuing: b)
                event.writeMembers(to: &w)
                w.close()
                b.append(0x0A)
            }
            let head = out.write { s.subscription!.writeHead(event.name, into: $0) }
            out.append(.event(id, head: head, tail: tail))
        }
    }
}

extension Event {
    /// App events in the order of their apps' ids (what one change's app events are sorted by).
    static func byApp(_ a: Event, _ b: Event) -> Bool {
        guard case let .app(x) = a, case let .app(y) = b else { return false }
        return x.app < y.app
    }

    /// Whether `events` are in `byApp`'s order already.
    static func sorted(_ events: ArraySlice<Event>) -> Bool {
        var i = events.startIndex
        while i + 1 < events.endIndex {
            if byApp(events[i + 1], events[i]) { return false }
            i += 1
        }
        return true
    }
}
