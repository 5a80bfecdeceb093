// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore

/// Mode=steer in the kernel (`Effect.steer`): each step the engine hands out carried out by the steerer and
/// answered, the plan's marks handed to the route lookups. What to do when (a plan, the main table's changes
/// followed, a failed install tried again) is the engine's.
final class SteeringEdge {
    private let steerer: SteeringLoading
    private let feed: InputFeed
    /// Mode=steer's marks in use, for the route lookups (NetlinkWatcher.marks).
    var marks: ([UInt32]) -> Void = { _ in }

    init(steerer: SteeringLoading, feed: InputFeed) {
        self.steerer = steerer
        self.feed = feed
    }

    func carryOut(_ step: SteeringStep) {
        feed(.steered(id: step.id, steerer.carryOut(step.action)))
        marks(step.plan?.allowances.map(\.mark) ?? [])
    }
}
