// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO
import NetpermNftables

/// The privacy report's edge (docs/PRIVACY.md): conntrack's events and the DNS answers' NFLOG group, read while the
/// engine wants them (`Effect.watchReport`), each pass handed on as one batch. Nothing is polled: both are
/// sockets the kernel writes to as connections are confirmed and answers arrive.
final class ReportWatcher {
    private let loop: EventLoop
    private var events: ConntrackEvents?
    private var answers: NflogReader?
    private var said = false
    /// Each pass's sightings and the events the kernel dropped.
    var sighted: ([ReportSighting], Int) -> Void = { _, _ in }

    init(loop: EventLoop) { self.loop = loop }

    func watch(_ on: Bool) {
        guard on else {
            events = nil
            answers = nil
            return
        }
        do {
            if events == nil {
                let e = try ConntrackEvents(loop: loop)
                e.seen = { [unowned self] found, lost in self.sighted(found, lost) }
                events = e
            }
            if answers == nil {
                // An app's answers come in bursts (a page's names at once): room for ~2,000 whole answers.
                let a = try NflogReader(loop: loop, group: UsageRules.reportLogGroup, copy: 1500, receiveBuffer: 4 << 20)
                a.overrun = { [unowned self] in self.sighted([], 1) }
                a.datagram = { [unowned self] b in
                    let found = ReportAnswers.sightings(in: b)
                    if !found.isEmpty { self.sighted(found, 0) }
                }
                answers = a
            }
            said = false
        } catch {
            if !said {
                Log.warning("report: cannot read the kernel's connection events or NFLOG group "
                    + "\(UsageRules.reportLogGroup) (\(error)); the report learns nothing new")
            }
            said = true
        }
    }
}
