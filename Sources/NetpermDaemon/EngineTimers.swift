// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO

/// The engine's timers (`Effect.armTimer`, `cancelTimer`) as the loop's: each fires once, as `Input.timer`.
final class EngineTimers {
    private let loop: EventLoop
    private let feed: InputFeed
    private var timers: [TimerID: TimerSource] = [:]

    init(loop: EventLoop, feed: InputFeed) {
        self.loop = loop
        self.feed = feed
    }

    func arm(_ id: TimerID, afterMicroseconds usec: UInt64) {
        do {
            timers[id] = try loop.addTimer(afterMicroseconds: usec) { [unowned self] in
                timers[id] = nil
                feed(.timer(id))
            }
        } catch {
            Log.err("cannot arm a timer: \(error)")
        }
    }

    func cancel(_ id: TimerID) { timers.removeValue(forKey: id)?.cancel() }
}
