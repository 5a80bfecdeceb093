// SPDX-License-Identifier: LGPL-2.1-or-later
/// The engine's armed timers and what each is for: ids are never reused, so a timer that fired or was cancelled
/// cannot be mistaken for a later one.
struct TimerBook {
    private(set) var purposes: [TimerID: Engine.TimerPurpose] = [:]
    private var next: TimerID = 1

    mutating func add(_ purpose: Engine.TimerPurpose) -> TimerID {
        let id = next
        next += 1
        purposes[id] = purpose
        return id
    }

    /// The purpose of a timer still armed, which is no longer.
    mutating func remove(_ id: TimerID) -> Engine.TimerPurpose? { purposes.removeValue(forKey: id) }
}
