// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore

/// Mode=steer in the kernel (`Effect.steer`): the plan the engine gives put in place by the steerer, its marks handed
/// to the route lookups, and the main table's changes followed into steering's tables.
final class SteeringEdge {
    private let steerer: SteeringLoading
    private let feed: InputFeed
    /// Mode=steer's marks in use, for the route lookups (NetlinkWatcher.marks).
    var marks: ([UInt32]) -> Void = { _ in }

    init(steerer: SteeringLoading, feed: InputFeed) {
        self.steerer = steerer
        self.feed = feed
    }

    func apply(_ plan: SteeringPlan?) {
        feed(.steered(error: steerer.apply(plan)))
        marks(plan?.allowances.map(\.mark) ?? [])
    }

    /// Steering's tables copy the main table's routes: any change of it is followed here.
    func follow() {
        switch steerer.follow() {
        case .unchanged: break
        case .recovered: feed(.steered(error: nil))
        case let .failed(error): feed(.steered(error: error))
        }
    }
}
