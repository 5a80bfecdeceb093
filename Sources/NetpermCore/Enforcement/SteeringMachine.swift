// SPDX-License-Identifier: LGPL-2.1-or-later
/// Mode=steer's standing (Engine+Steering.swift): whether a killed steer daemon's leftovers were looked for, the
/// plan last handed to the edge and the edge's last error (changed only by `Engine.setSteering`), and what the
/// kernel holds of steering and the Steerer does next (`kernel`: the steps it hands out, the answers it takes).
struct SteeringMachine {
    enum Phase: Equatable {
        /// At start-up: nothing handed to the edge yet, leftovers not looked for.
        case unchecked
        /// Nothing of steering may be in the kernel.
        case absent
        /// A plan handed to the edge; `error`: its last failure (nil: in force, or on its way).
        case steering(SteeringPlan, error: EdgeError?)

        var name: String {
            switch self {
            case .unchecked: return "unchecked"
            case .absent: return "absent"
            case let .steering(_, error): return error == nil ? "steering" : "failed"
            }
        }
    }

    private(set) var phase = Phase.unchecked
    /// The standing shown in verdicts changed (the edge's errors, the rules in force): settle() shows them again.
    var moved = false
    /// Each app's verdict as last shown (steered or not), so an app whose steered verdict changes gets its event
    /// though its main-table verdict, which the tracker compares, did not.
    var shown: [String: Verdict] = [:]
    /// What steering keeps in the kernel: each `Effect.steer` is its step, each `Input.steered` its answer.
    var kernel = SteeringUpkeep()

    var plan: SteeringPlan? {
        if case let .steering(plan, _) = phase { return plan }
        return nil
    }

    var error: EdgeError? {
        if case let .steering(_, error) = phase { return error }
        return nil
    }

    /// The one setter: logs old -> new when the phase's name changes.
    mutating func set(_ new: Phase, log: (String) -> Void) {
        guard new != phase else { return }
        if new.name != phase.name { log("steering: \(phase.name) -> \(new.name)") }
        phase = new
    }
}
