// SPDX-License-Identifier: LGPL-2.1-or-later
/// A clock that moves only when a test says so: timers armed for `now + after` fire as `advance` passes their
/// deadline, earliest first (two due at once in the order of their ids). The engine's fake world (`FakeWorld`: the
/// engine tests' harness and the fuzz target, which compiles this file with its own) and the test loop keep their
/// timers here.
public final class FakeClock<ID: Hashable & Comparable> {
    /// Microseconds since the clock was made.
    public private(set) var now: UInt64 = 0
    private var deadlines: [ID: UInt64] = [:]

    public init() {}

    public func arm(_ id: ID, after microseconds: UInt64) { deadlines[id] = now + microseconds }

    /// Whether it was armed.
    @discardableResult
    public func cancel(_ id: ID) -> Bool { deadlines.removeValue(forKey: id) != nil }

    public func isArmed(_ id: ID) -> Bool { deadlines[id] != nil }

    public var armedCount: Int { deadlines.count }

    /// Moves the clock by `microseconds`, calling `fire` for each timer that falls due (which may arm others).
    public func advance(by microseconds: UInt64, fire: (ID) -> Void) {
        let until = now + microseconds
        while let (id, at) = deadlines.filter({ $0.value <= until }).min(by: { ($0.value, $0.key) < ($1.value, $1.key) }) {
            now = at
            deadlines[id] = nil
            fire(id)
        }
        now = until
    }
}
