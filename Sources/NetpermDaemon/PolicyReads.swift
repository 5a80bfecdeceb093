// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO
import NetpermPolicy

/// Reads the policy the engine asks for (`Effect.loadPolicy`) on a thread of its own (a file of many megabytes must
/// not stop the loop), which also makes what the engine will compute with it (ReloadPreparation.swift); and frees
/// what the engine replaced on a thread of its own too. On the loop, unprepared, only when no thread can be had.
final class PolicyReads {
    private let load: @Sendable () -> ConfigParseResult
    private let reader: Worker<Input>
    private let dropper: Worker<Void>
    private let feed: InputFeed

    init(loop: EventLoop, load: @escaping @Sendable () -> ConfigParseResult, feed: InputFeed) {
        self.load = load
        self.feed = feed
        reader = Worker(loop: loop, doing: "reading the policy")
        dropper = Worker(loop: loop, doing: "freeing memory")
    }

    /// The engine has one load in flight at a time. `basis` holds what the engine is about to replace (the policy,
    /// verdicts and rules of every app): once it has taken the new policy it holds their last references.
    func read(basis: LastReference<ReloadBasis>) {
        let read: @Sendable () -> Input = { [load] in
            let result = load()
            return .policy(result, prepared: basis.value?.prepare(result))
        }
        reader.run(read, instead: { [load] in
            let result = load()
            Heap.releaseFree()
            return .policy(result)
        }) { [unowned self] input in
            feed(input)
            // The files' text is gone, and the old policy once the new one is in force.
            drop(basis)
        }
    }

    /// Drops `value` on a thread of its own, then gives the free pages back to the kernel: a reload's old policy,
    /// verdicts and rules of 10,001 apps took the loop 15 ms to free, and the trim some more. On the loop when the
    /// thread is busy with the last one or cannot be had.
    private func drop<T>(_ value: LastReference<T>) {
        dropper.run({
            value.drop()
            Heap.releaseFree()
        }) { _ in }
    }
}
