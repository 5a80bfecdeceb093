// SPDX-License-Identifier: LGPL-2.1-or-later

/// The calls of one bus connection, bounded in flight. A bus lets a connection wait for only so many replies
/// (dbus-daemon's `max_replies_per_connection`, 128 on a system bus) and refuses the calls past that at once: a
/// reader that sent every device's GetAll together read the refused ones as gone. Here at most `limit` calls are out
/// and the rest wait in order. A call the bus refused goes back to the head of the queue and the limit comes down to
/// the calls still out (the bus's own bound is lower than ours); with none out it is held `backoff` first, as nothing
/// else would release it. Each call is tried at most `attempts` times, then its refusal is its answer. The limit
/// stays down for the connection's life (a new connection starts a new window). Pure: SystemBus sends the calls and
/// says how each ended.
struct CallWindow<Call> {
    /// Tries per call, the first included.
    static var attempts: Int { 5 }

    private(set) var limit: Int
    /// Sent and not answered yet.
    private(set) var inFlight = 0
    /// Each waiting call with the tries it has had.
    private var waiting: [(call: Call, tries: Int)?] = []
    private var head = 0
    /// A refused call waits out its back-off with nothing out: nothing is sent until `release()`.
    private(set) var held = false

    enum Refusal: Equatable {
        /// Back at the head of the queue: it goes when a call out is answered.
        case queued
        /// Nothing is out: call `release()` after this long.
        case held(microseconds: UInt64)
        /// Tried `attempts` times: the refusal is its answer.
        case givenUp
    }

    init(limit: Int) { self.limit = max(1, limit) }

    var waitingCount: Int { waiting.count - head }

    mutating func add(_ call: Call) { waiting.append((call, 0)) }

    /// The next call to send, and which try it is (1 first), while the limit allows; it counts as out.
    mutating func next() -> (call: Call, attempt: Int)? {
        guard !held, inFlight < limit, head < waiting.count, let w = waiting[head] else { return nil }
        waiting[head] = nil
        head += 1
        // The queue's front is dropped once it is most of the array: adding stays O(1) amortised.
        if head > 64 && head * 2 > waiting.count {
            waiting.removeFirst(head)
            head = 0
        }
        inFlight += 1
        return (w.call, w.tries + 1)
    }

    /// A call out was answered (or failed for a reason of its own): its place goes to the next.
    mutating func answered() { inFlight = max(0, inFlight - 1) }

    /// The bus refused `call` at its `attempt`.
    mutating func refused(_ call: Call, attempt: Int) -> Refusal {
        inFlight = max(0, inFlight - 1)
        guard attempt < Self.attempts else { return .givenUp }
        if head > 0 {
            head -= 1
            waiting[head] = (call, attempt)
        } else {
            waiting.insert((call, attempt), at: 0)
        }
        limit = max(1, min(limit, inFlight))
        guard inFlight == 0 else { return .queued }
        held = true
        return .held(microseconds: Self.backoff(attempt: attempt))
    }

    /// 50 ms after a first refusal, doubling: 50, 100, 200, 400 ms before the fifth and last try.
    static func backoff(attempt: Int) -> UInt64 { 50_000 << UInt64(max(0, min(attempt - 1, 10))) }

    /// The back-off is over.
    mutating func release() { held = false }

    /// Every call still waiting, in order; the window is left empty (the connection went).
    mutating func drain() -> [Call] {
        let out = waiting[head...].compactMap { $0?.call }
        waiting = []
        head = 0
        inFlight = 0
        held = false
        return out
    }
}
