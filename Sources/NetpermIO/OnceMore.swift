// SPDX-License-Identifier: LGPL-2.1-or-later

/// One job in flight, and at most one more asked for meanwhile: the latest asked for, however many came. The edge's
/// counterpart of the engine's `InFlight`, as a value with no I/O: `Worker` keeps its thread's turns with it, and a
/// reading over the bus (`FollowedService`) its own.
public struct OnceMore<Job> {
    public private(set) var running = false
    /// What runs once the job in flight ends.
    public private(set) var waiting: Job?

    public init() {}

    /// `job` is asked for: returned when it may start now (it is in flight then), else kept to run next, in place
    /// of any kept before (nil).
    public mutating func ask(_ job: Job) -> Job? {
        guard !running else {
            waiting = job
            return nil
        }
        running = true
        return job
    }

    /// The job in flight ended: nothing runs, and what waited (if anything) is handed back to be asked for again.
    public mutating func finished() -> Job? {
        running = false
        defer { waiting = nil }
        return waiting
    }
}
