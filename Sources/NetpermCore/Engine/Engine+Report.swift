// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// What the engine keeps of the privacy report (docs/PRIVACY.md): the book, its saves, and whether the edge's
/// readers are wanted. Its fields change only in this file.
struct ReportKeeper {
    fileprivate(set) var book: ReportBook
    /// A write of the file is away; another is wanted after it.
    fileprivate(set) var saving = false
    fileprivate(set) var saveAgain = false
    fileprivate(set) var timer: TimerID?
    /// The readers the edge was last told to keep (`Effect.watchReport`).
    fileprivate(set) var watching = false
    /// The file may be on disk: one was there at start (left by an earlier run), or the report was on since.
    fileprivate(set) var fileMayExist = false
    /// Events the kernel dropped (its buffer overran), and per app what was recorded: METRICS, never a destination.
    fileprivate(set) var lost: UInt64 = 0
    fileprivate(set) var perApp: [String: (connections: UInt64, refused: UInt64)] = [:]
    fileprivate(set) var stopping = false

    /// Changes are written at most this often (and at a stop); clearing is written at once.
    static let saveIntervalSec: UInt64 = 60

    init(book: ReportBook = ReportBook(), fileExists: Bool = false) {
        self.book = book
        fileMayExist = fileExists
    }
}

extension Engine {
    /// Called by every input's settle(): the policy's `[Report]` taken, the readers wanted or not, a save armed.
    func settleReport() {
        guard state.ready else { return }
        let now = Int(settings.wallClock())
        // Off with something kept (a file read at start whose policy now says off): forgotten too.
        let keptWhileOff = !state.config.report.enabled && (!report.book.entries.isEmpty || !report.book.people.isEmpty)
        if state.config.report != report.book.settings || keptWhileOff {
            let was = report.book.settings.enabled
            report.book.configure(state.config.report, now: now)
            if was != state.config.report.enabled {
                log(.info, "report: \(state.config.report.enabled ? "kept for \(state.config.report.days) days" : "off")")
            }
        }
        if !state.config.report.enabled {
            if let t = report.timer { cancelTimer(t); report.timer = nil }
            report.perApp = [:]
            if report.fileMayExist {
                // Off deletes what was kept, a file left by an earlier run included.
                report.fileMayExist = false
                out.append(.removeReport)
            }
        }
        let want = state.config.report.enabled && state.config.usage.count && !report.stopping
        if want != report.watching {
            report.watching = want
            out.append(.watchReport(want))
        }
        if report.book.dirty, state.config.report.enabled, report.timer == nil, !report.saving {
            report.timer = armTimer(.reportSave, microseconds: ReportKeeper.saveIntervalSec * 1_000_000)
        }
    }

    /// Whose a tagged connection is: its app, and the person it is recorded for when it is one person's own (an
    /// `[App]` whose `User=` is one uid other than root's, as USAGE reads a user's own apps).
    func reportOwner(app: String) -> ReportOwner {
        guard let a = state.config.app(named: app), a.units.isEmpty, let uid = a.uids.first,
              a.uids.allSatisfy({ $0 == uid }), uid != 0 else { return ReportOwner(app: app, uid: nil) }
        return ReportOwner(app: app, uid: uid)
    }

    /// What the kernel said, in one batch: each tagged connection's app found by its tag.
    func reportSighted(_ sightings: [ReportSighting], lost: Int) {
        report.lost &+= UInt64(lost)
        guard state.config.report.enabled else { return }
        let now = Int(settings.wallClock())
        // A batch is mostly one app's (a flood): its owner is looked up once, not once a connection.
        var last: (tag: UInt32, owner: ReportOwner)?
        for s in sightings {
            switch s {
            case let .opened(tag, address, port, proto, link, unit):
                guard let link else { continue }
                let owner: ReportOwner
                var namer: ReportOwner?
                if let unit {
                    // A user's own app: its uid's, by its unit's cgroup (ReportUnits), whatever its tag.
                    guard let user = usage.tagged.unitOwners[unit] else { continue }
                    owner = ReportOwner(app: user.app, uid: user.uid)
                    namer = reportNamer(tag: tag, uid: user.uid)
                } else if let last, last.tag == tag { owner = last.owner } else {
                    guard let app = usage.tagged.owners[tag] else { continue }
                    owner = reportOwner(app: app)
                    last = (tag, owner)
                }
                record(ReportConnection(owner: owner, address: address, port: port, proto: proto, link: link, time: now,
                                        namer: namer))
            case let .closed(tag, address, link, bytes, unit):
                guard let link, let owner = unit.map({ usage.tagged.unitOwners[$0].map { ReportOwner(app: $0.app, uid: $0.uid) } })
                        ?? usage.tagged.owners[tag].map(reportOwner) else { continue }
                let namer = unit == nil ? nil : owner.uid.flatMap { reportNamer(tag: tag, uid: $0) }
                report.book.add(ReportBytes(owner: owner, address: address, link: link, time: now, bytes: bytes, namer: namer))
            case let .refused(tag, address, port, proto, ifindex, reason, unit):
                // A user's own app's: its uid's, by its unit's cgroup (ReportUnits.mark), as its connections are.
                let owner: ReportOwner?
                if let unit {
                    owner = ReportUnits.unit(mark: unit, among: usage.tagged.unitOwners.keys)
                        .flatMap { usage.tagged.unitOwners[$0] }.map { ReportOwner(app: $0.app, uid: $0.uid) }
                } else {
                    owner = usage.tagged.owners[tag].map(reportOwner)
                }
                guard let owner, let link = reportLink(ifindex) else { continue }
                record(ReportConnection(owner: owner, address: address, port: port, proto: proto,
                                        link: link, time: now, outcome: .refused(reason)))
            case let .answer(tag, answer):
                guard let app = usage.tagged.owners[tag] else { continue }
                report.book.learn(ReportAnswer(owner: reportOwner(app: app), name: answer.name, addresses: answer.addresses,
                                               time: now))
            }
        }
    }

    /// Whose answers name a user's unit's connection: its tag's app, when that is the same person's own (the
    /// answers' rule knows the tag only: a unit's answers are its uid's app's).
    private func reportNamer(tag: UInt32, uid: UInt32) -> ReportOwner? {
        guard let app = usage.tagged.owners[tag] else { return nil }
        let o = reportOwner(app: app)
        return o.uid == uid ? o : nil
    }

    private func record(_ c: ReportConnection) {
        guard report.book.records(c.owner) else { return }
        report.book.record(c)
        var n = report.perApp[c.owner.app] ?? (0, 0)
        if case .allowed = c.outcome { n.connections &+= 1 } else { n.refused &+= 1 }
        report.perApp[c.owner.app] = n
    }

    /// A pending app's packet the rules refused and logged (the prompt's path): refused, waiting for an answer.
    /// `uid`: its socket's owner. The prompt's log names the app only: an app of no uid and no system unit of its
    /// own is refused there for a user's own unit alone (ReportUnits), so it is that uid's, as its connections are.
    func reportRefused(app: String, uid: UInt32?, ifindex: Int32?, destination: String?) {
        guard state.config.report.enabled, let destination, let (address, port) = Self.split(destination),
              let link = reportLink(ifindex) else { return }
        var owner = reportOwner(app: app)
        if owner.uid == nil, let uid, let a = state.config.app(named: app), a.uids.isEmpty, a.units.isEmpty,
           usage.tagged.unitOwners.values.contains(UserApp(uid: uid, app: app)) {
            owner = ReportOwner(app: app, uid: uid)
        }
        record(ReportConnection(owner: owner, address: address, port: port, proto: 0,
                                link: link, time: Int(settings.wallClock()), outcome: .refused(.ask)))
    }

    /// The class of the link a refused packet was to leave by, as the engine knows it now.
    private func reportLink(_ ifindex: Int32?) -> ReportLink? {
        guard let l = state.network.links.first(where: { $0.index == ifindex }) else { return nil }
        return ReportLink(kind: l.kind, metered: l.metered, roaming: l.roaming == true)
    }

    /// "192.0.2.1:443", "[2001:db8::1]:53", or an address alone.
    static func split(_ destination: String) -> (String, UInt16)? {
        if destination.hasPrefix("["), let close = destination.firstIndex(of: "]") {
            let address = String(destination[destination.index(after: destination.startIndex)..<close])
            let rest = destination[destination.index(after: close)...]
            return (address, rest.hasPrefix(":") ? UInt16(rest.dropFirst()) ?? 0 : 0)
        }
        let parts = destination.split(separator: ":")
        if parts.count == 2, let port = UInt16(parts[1]) { return (String(parts[0]), port) }
        return (destination, 0)
    }

    func reportSaveFired() {
        report.timer = nil
        saveReport()
    }

    /// Writes the file now, or after the write that is away.
    private func saveReport() {
        guard state.config.report.enabled else { return }
        if report.saving {
            report.saveAgain = true
            return
        }
        report.saving = true
        report.fileMayExist = true
        report.book.saved()
        out.append(.saveReport(report.book))
    }

    func reportSaved(error: EdgeError?) {
        report.saving = false
        if let error { log(.err, "report: \(error)") }
        if report.saveAgain {
            report.saveAgain = false
            saveReport()
        }
    }

    /// At a stop: what changed since the last write.
    func stopReport() {
        report.stopping = true
        if report.book.dirty, state.config.report.enabled, !report.saving { saveReport() }
    }
}

// MARK: - REPORT, RESET-REPORT, KEEP-REPORT

extension Engine {
    /// The owners a caller may read and clear: every one when privileged, else those of its own uid.
    private func reportVisible(_ caller: Caller, app: String?) -> (ReportOwner) -> Bool {
        let uid = caller.identity.uid, all = caller.privileged
        return { o in (app == nil || o.app == app) && (all || o.uid == uid) }
    }

    /// An app a caller names must be one whose entries it may see: the same answer whether the app exists or is
    /// another's, as USAGE gives.
    private func reportNamed(_ name: String?, _ session: Session) -> Bool {
        guard let name, !session.caller.privileged else { return true }
        let uid = session.caller.identity.uid
        // Their [App] of their own, or their own unit's app (ReportUnits) with entries.
        let own = (reportOwner(app: name).uid == uid && state.config.app(named: name) != nil)
            || report.book.entries.keys.contains { $0.owner == ReportOwner(app: name, uid: uid) }
        guard own else {
            replyError(session.id, ProtocolError(.notFound, "no [App \(name)] whose report you may see (root or members "
                + "of group \(ConfigError.quote(state.config.adminGroup)) see every app's; leave APP out for your own)"))
            return false
        }
        return true
    }

    func reportRequest(_ app: String?, session: Session) {
        guard reportNamed(app, session) else { return }
        let caller = session.caller
        let rows = ReportView.merge(report.book.rows(where: reportVisible(caller, app: app)))
        reply(session.id) { w in
            w.field("ok", true)
            w.field("enabled", state.config.report.enabled)
            w.field("days", state.config.report.days)
            // Whether the caller's own apps are recorded (they turned it on), for a face to offer the switch.
            w.field("yours", report.book.people.contains(caller.identity.uid))
            w.objects("apps", ReportView.byOwner(rows)) { w, group in
                w.field("app", group.owner.app)
                w.field("uid", group.owner.uid.map { Int($0) })
                w.objects("destinations", group.rows) { $1.write(to: &$0) }
            }
        }
    }

    func resetReportRequest(_ app: String?, session: Session) {
        guard reportNamed(app, session) else { return }
        report.book.clear(where: reportVisible(session.caller, app: app))
        // On disk at once: a person who clears expects it gone.
        if report.book.dirty { saveReport() }
        reply(session.id) { w in
            w.field("ok", true)
            w.field("cleared", app)
        }
    }

    /// Nothing is kept while the machine's report is off, a person's choice neither: `yours` then says false.
    func keepReportRequest(_ on: Bool, session: Session) {
        let uid = session.caller.identity.uid
        if state.config.report.enabled || !on { report.book.setPerson(uid, on: on) }
        if report.book.dirty { saveReport() }
        reply(session.id) { w in
            w.field("ok", true)
            w.field("yours", report.book.people.contains(uid))
            w.field("enabled", state.config.report.enabled)
        }
    }

    /// METRICS' report series: per app, connections and refusals recorded; events lost. Never a destination. The
    /// families are written whether the report is on or not (none of an app while it is off), as usage's are.
    func writeReportMetrics(to m: inout MetricsText) {
        let apps = report.perApp.keys.sorted()
        m.family("netpermd_report_connections_total", .counter, "Connections the privacy report recorded, per app.")
        for app in apps { m.sample(count: report.perApp[app]!.connections, ["app": app]) }
        m.family("netpermd_report_refused_total", .counter, "Refused connections the privacy report recorded, per app.")
        for app in apps { m.sample(count: report.perApp[app]!.refused, ["app": app]) }
        m.family("netpermd_report_events_lost_total", .counter, "Kernel events the report's reader lost (its buffer overran).")
        m.sample(count: report.lost)
        m.family("netpermd_report_entries", .gauge, "Entries the privacy report holds.")
        m.sample(report.book.entries.count)
    }
}
