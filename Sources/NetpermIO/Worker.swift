// SPDX-License-Identifier: LGPL-2.1-or-later

/// Where one kind of an edge's slow work runs (writing a file, reading a policy, loading rules, scanning cgroups):
/// on a thread of its own (`OffLoop`) when it is free, on the loop only where its owner says so (`Fallback`). Every
/// edge's "off the loop if a thread is free" and "one job in flight, the latest waiting" is this one type.
public final class Worker<Result: Sendable> {
    /// What becomes of a job the thread cannot take (busy, or none could be had).
    public enum Fallback {
        /// Done on the loop, at once: the work is short enough, or must be done whatever it costs.
        case onLoop
        /// Not done: the work is too slow for the loop, and its owner does without (it asks again later).
        case skipped
    }

    private let thread: OffLoop<Result>?
    /// What the log calls the work ("writing decisions").
    private let what: String
    private let fallback: Fallback
    /// The thread's job, and what waits for its end (`after`).
    private var turns = OnceMore<() -> Void>()
    /// Every job from now on runs on the loop, as the process is about to end (a stop's last writes).
    public var onLoopNow = false

    /// `background`: the thread runs at nice 10 (`OffLoop`), yielding the CPU to the loop. When no thread can be had
    /// the log says so once, here.
    public init(loop: EventLoop, doing what: String, background: Bool = false, fallback: Fallback = .onLoop) {
        self.what = what
        self.fallback = fallback
        do { thread = try OffLoop(loop: loop, background: background) } catch {
            Log.warning("cannot set up \(what) off the loop (\(error)); " + Self.otherwise(fallback))
            thread = nil
        }
    }

    private static func otherwise(_ fallback: Fallback) -> String {
        switch fallback {
        case .onLoop: "it is done on the loop"
        case .skipped: "it is not done"
        }
    }

    /// A job runs on the thread (its result not yet handed back).
    public var busy: Bool { turns.running }
    /// Whether a thread could be had at all.
    public var threaded: Bool { thread != nil }

    /// Runs `work` on the thread if it is free, and `then` on the loop's thread with its result; otherwise (the
    /// thread busy or missing, or `onLoopNow`) as the fallback says: on the loop (`instead`, when given: a cheaper
    /// way of the same work), `then` within this call.
    public func run(_ work: @escaping @Sendable () -> Result, instead: (() -> Result)? = nil,
                    then: @escaping (Result) -> Void) {
        if let thread, !onLoopNow, !turns.running {
            do {
                try thread.run(work) { [unowned self] result in
                    // Free before `then`, which may give the thread its next job.
                    let next = turns.finished()
                    then(result)
                    next?()
                }
                _ = turns.ask({})
                return
            } catch {
                Log.warning("cannot start a thread for \(what) (\(error)); " + Self.otherwise(fallback))
            }
        }
        switch fallback {
        case .onLoop: then((instead ?? work)())
        case .skipped: break
        }
    }

    /// Once the job on the thread has handed back its result, `next` runs, once, on the loop: true. The latest given
    /// while it runs replaces any given before. Nothing runs on the thread: false, and `next` is not kept.
    public func after(_ next: @escaping () -> Void) -> Bool {
        guard turns.running else { return false }
        _ = turns.ask(next)
        return true
    }

    /// One job at a time, in order: `work` runs now (`run`) if none does, else once the one that does has ended,
    /// unless another is given before then (the latest waiting replaces any other, whose `then` never runs).
    public func runLatest(_ work: @escaping @Sendable () -> Result, then: @escaping (Result) -> Void) {
        guard !after({ [unowned self] in runLatest(work, then: then) }) else { return }
        run(work, then: then)
    }
}
