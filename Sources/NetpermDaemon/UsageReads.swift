// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO

/// Reads the usage counters the engine asks for (`Effect.readUsage`) on a thread of its own, one reading at a time
/// (the engine asks for the next once one is back); at a stop on the loop: the process ends right after.
final class UsageReads {
    private let counters: UsageCounting
    /// The wall clock the engine reads (its test offset is read again before each reading).
    private let clock: WallClock
    private let reader: Worker<Result<UsageReading?, Errno>>
    private let feed: InputFeed

    init(loop: EventLoop, counters: UsageCounting, clock: WallClock, feed: InputFeed) {
        self.counters = counters; self.clock = clock; self.feed = feed
        reader = Worker(loop: loop, doing: "reading usage counters")
    }

    /// A reading runs (start-up is settled only once it is back).
    var busy: Bool { reader.busy }

    func stopping() { reader.onLoopNow = true }

    func read() {
        clock.refresh()
        let counters = self.counters
        reader.run({ counters.read() }) { [feed] result in
            switch result {
            case let .success(reading): feed(.usageRead(reading, error: nil))
            case let .failure(e): feed(.usageRead(nil, error: EdgeError(.readUsage, errno: e.code, "\(e)")))
            }
        }
    }
}
