// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol
/// Lasting decisions on their way to disk (DECIDE, FORGET, ANSWER: Engine+Requests.swift): one write at a time, and
/// the decision requests that come meanwhile wait their turn in order, each to start from the last one's result.
/// Not coalesced as policy loads are: each is its own change, checked when its turn comes (a reload meanwhile may
/// have taken its sender's privilege). Changed only through its methods, which log old -> new.
struct DecisionCommits {
    enum Phase: Equatable {
        case idle
        /// A write is away; `requester`: whom its outcome answers (nil once it has left: the decision still stands).
        case writing(requester: ConnectionID?)

        var name: String {
            switch self {
            case .idle: return "idle"
            case .writing: return "writing"
            }
        }
    }

    private(set) var phase = Phase.idle
    /// The write away, and what to do with its outcome.
    private var write = InFlight<Never>()
    private var pending: PendingStore?
    /// Decision requests that came during the write, in order.
    private(set) var queued: [(ConnectionID, Request)] = []

    var writing: Bool { write.running }

    /// Starts writing `store`'s decisions; the caller hands the candidate to the edge. Only when none is away.
    mutating func begin(_ store: PendingStore, log: (String) -> Void) {
        precondition(write.start(), "a decision write began while one was away")
        pending = store
        set(.writing(requester: store.requester), log: log)
    }

    /// The write's outcome came: what it was for. Nothing runs now; the queued requests are taken one at a time.
    mutating func finish(log: (String) -> Void) -> PendingStore? {
        guard write.running, let done = pending else { return nil }
        _ = write.finish()
        pending = nil
        set(.idle, log: log)
        return done
    }

    /// A decision request that must wait for the write away.
    mutating func enqueue(_ id: ConnectionID, _ request: Request) { queued.append((id, request)) }

    /// The next waiting request, while no write is away.
    mutating func next() -> (ConnectionID, Request)? {
        guard !write.running, !queued.isEmpty else { return nil }
        return queued.removeFirst()
    }

    /// A connection closed: its queued requests go; a write it asked for stands, answering nobody.
    mutating func forget(_ id: ConnectionID, log: (String) -> Void) {
        queued.removeAll { $0.0 == id }
        if case .writing(id) = phase {
            pending?.requester = nil
            set(.writing(requester: nil), log: log)
        }
    }

    private mutating func set(_ new: Phase, log: (String) -> Void) {
        guard new != phase else { return }
        if new.name != phase.name { log("decisions: \(phase.name) -> \(new.name)") }
        phase = new
    }
}

/// A DECIDE or FORGET whose lasting decisions are being written: what to change once they are on disk, and whom
/// to answer (nil once the requester has left).
struct PendingStore {
    var requester: ConnectionID?
    var change: (inout Decisions) -> Void
    var apply: () -> Void
    var reply: () -> Void
    /// The write failed (nothing changed).
    var failed: () -> Void
}
