// SPDX-License-Identifier: LGPL-2.1-or-later
/// One job of a kind away from the engine at a time (a policy read, a usage reading, a save), and at most one more
/// after it: what is asked while one runs is coalesced into that next one, whose waiters it answers. The job in flight
/// may have started before what they asked for (a file edited, bytes counted since), so it never answers them.
/// networkd keeps one request queue for all its kinds of work (networkd-queue.c); here each kind owns one of these.
struct InFlight<Waiter> {
    /// Where the kind of job stands, for the log.
    enum Phase: Equatable {
        case idle, running, runningThenAgain

        var name: String {
            switch self {
            case .idle: return "idle"
            case .running: return "running"
            case .runningThenAgain: return "running, another asked for"
            }
        }
    }

    var phase: Phase { running ? (again ? .runningThenAgain : .running) : .idle }

    /// Runs `change` on this, logging `what: old -> new` when the phase moved: the one place its owners' changes
    /// are logged.
    mutating func logged<T>(_ what: String, log: (String) -> Void, _ change: (inout InFlight) -> T) -> T {
        let was = phase
        let result = change(&self)
        if phase != was { log("\(what): \(was.name) -> \(phase.name)") }
        return result
    }

    /// A job is away (asked of the edge, not answered yet).
    private(set) var running = false
    /// Another was asked for while it ran.
    private(set) var again = false
    /// Those the job in flight answers, and those the next one does.
    private(set) var waiters: [Waiter] = []
    private(set) var nextWaiters: [Waiter] = []

    /// Asks for a job for `waiter` (nil: nobody waits for its answer). True when it is to start now; else it is
    /// coalesced into the one after the job in flight.
    mutating func request(_ waiter: Waiter? = nil) -> Bool {
        if let waiter {
            if running { nextWaiters.append(waiter) } else { waiters.append(waiter) }
        }
        return start()
    }

    /// Starts a job now, unless one runs (then one more is wanted after it). True when the caller is to start it.
    mutating func start() -> Bool {
        guard !running else {
            again = true
            return false
        }
        running = true
        return true
    }

    /// The job in flight answered: its waiters, and whether another was asked for meanwhile. Nothing runs now; the
    /// waiters of the next are those it will answer, once the caller starts it (`start`, or a `request`).
    mutating func finish() -> (waiters: [Waiter], again: Bool) {
        let done = waiters, wanted = again
        waiters = nextWaiters
        nextWaiters = []
        again = false
        running = false
        return (done, wanted)
    }

    /// Adds `waiter` to the job that will carry what is asked now: the one after the job away when another is wanted,
    /// else the job away. Only while one runs (when none does, the caller answers at once).
    mutating func wait(_ waiter: Waiter) {
        assert(running, "nothing away to wait for")
        if again { nextWaiters.append(waiter) } else { waiters.append(waiter) }
    }

    /// Whether another job is wanted after the one away: what its owner asks for now differs from what is away (or,
    /// no longer: it came back to it). Only while one runs.
    mutating func want(_ another: Bool) {
        guard running else { return }
        again = another
    }

    /// Whether `waiter`s matching `match` wait for the job away or the next.
    func contains(where match: (Waiter) -> Bool) -> Bool {
        waiters.contains(where: match) || nextWaiters.contains(where: match)
    }

    /// No job is away, none is wanted and nobody waits: `finish` and `drain` would do nothing.
    var idle: Bool { !running && !again && waiters.isEmpty && nextWaiters.isEmpty }

    /// Nothing is away: the waiters left for a job that will not start now (what they waited for is what the last
    /// job carried), to be answered at once.
    mutating func drain() -> [Waiter] {
        assert(!running, "a job is away: its waiters wait for it")
        defer { waiters = []; nextWaiters = []; again = false }
        return waiters + nextWaiters
    }

    /// Waiters that went (a connection closed): nobody is answered for them.
    mutating func removeWaiters(where gone: (Waiter) -> Bool) {
        waiters.removeAll(where: gone)
        nextWaiters.removeAll(where: gone)
    }

    /// Forgets a job that will never answer (a stop, a mode turned off): nothing runs, nobody waits.
    mutating func reset() { self = InFlight() }
}
