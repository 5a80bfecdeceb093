// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermHost
import NetpermIO

/// The state files the engine has written (`Effect.persist`, `saveUsage`, `saveTags`, `saveReport`, `removeReport`),
/// each kind on a thread of its own: a write and two fsyncs can take long on a busy disk, and the engine holds only
/// the requester meanwhile (it waits for `stored`, `usageSaved`, `reportSaved`). At a stop the usage totals, the tags
/// and the report are written on the loop: the process ends right after.
final class FileWrites {
    private let decisions: DecisionSaving
    private let usage: UsageSaving
    private let tags: TagStore
    private let report: ReportStore
    private let decisionWriter: Worker<StoreOutcome>
    private let usageWriter: Worker<StoreOutcome>
    /// One write at a time, in order (a deletion never overtaken by a save begun before it); the latest waiting.
    private let tagWriter: Worker<StoreOutcome>
    private let reportWriter: Worker<StoreOutcome>
    private let feed: InputFeed

    init(loop: EventLoop, decisions: DecisionSaving, usage: UsageSaving, tags: TagStore, report: ReportStore,
         feed: InputFeed) {
        self.decisions = decisions; self.usage = usage; self.tags = tags; self.report = report; self.feed = feed
        decisionWriter = Worker(loop: loop, doing: "writing decisions")
        usageWriter = Worker(loop: loop, doing: "writing usage totals")
        tagWriter = Worker(loop: loop, doing: "writing connection tags")
        reportWriter = Worker(loop: loop, doing: "writing the privacy report")
    }

    /// The daemon stops: what is written from now on is written on the loop.
    func stopping() {
        for w in [usageWriter, tagWriter, reportWriter] { w.onLoopNow = true }
    }

    /// One write at a time: the engine starts the next only once this one is `stored`.
    func persist(_ d: Decisions) {
        let store = decisions
        decisionWriter.run({ store.save(d) }) { [unowned self] outcome in
            // Renamed into place: the decision is on disk and takes effect; only its durability is in doubt.
            feed(.stored(error: Self.error(of: outcome, written: "decisions written to \(decisions.path)",
                                           risk: "; a crash soon may lose the last decision")))
        }
    }

    func saveUsage(_ book: UsageBook) {
        let store = usage
        usageWriter.run({ store.save(book) }) { [unowned self] outcome in
            feed(.usageSaved(error: Self.error(of: outcome, written: "usage totals written to \(usage.path)")))
        }
    }

    func saveTags(_ table: TagTable) {
        let store = tags
        tagWriter.runLatest({ store.save(table) }) { outcome in
            switch outcome {
            case .stored: break
            case let .storedNotSynced(e): Log.warning("connection tags written, but not synced: \(e)")
            case let .failed(e): Log.err("cannot write the connection tags (kept in memory): \(e)")
            }
        }
    }

    func saveReport(_ book: ReportBook) {
        let store = report
        writeReport { store.save(book) }
    }

    func removeReport() {
        let store = report
        writeReport { store.remove() }
    }

    private func writeReport(_ job: @escaping @Sendable () -> StoreOutcome) {
        reportWriter.runLatest(job) { [unowned self] outcome in
            feed(.reportSaved(error: Self.error(of: outcome, written: "report written to \(report.path)")))
        }
    }

    /// What the engine hears of a write: a file renamed into place but not synced is written (logged).
    private static func error(of outcome: StoreOutcome, written what: String, risk: String = "") -> EdgeError? {
        switch outcome {
        case .stored: return nil
        case let .storedNotSynced(why):
            Log.warning("\(what), but syncing \(why)\(risk)")
            return nil
        case let .failed(why): return why
        }
    }
}
