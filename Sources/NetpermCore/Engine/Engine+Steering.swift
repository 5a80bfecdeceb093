// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// Mode=steer in the engine: the plan follows the ruleset (same owners, same permissions) and the links that are
/// up; the edge puts it in the kernel. A steered app's verdict says where its marked sockets really go.
extension Engine {
    /// Hands the edge a new plan when it differs from the last one; `ruleset` nil (or a mode other than steer)
    /// removes whatever steering put in the kernel.
    func settleSteering(_ ruleset: Ruleset?) {
        guard state.config.enforcement == .steer, let ruleset else {
            switch enforcement.steering.phase {
            case .unchecked:
                // At start-up in another mode, what a killed steer daemon left is removed, quietly (as the nft table).
                setSteering(.absent)
                handOutSteering(nil)
            case .absent: break
            case .steering:
                setSteering(.absent)
                caches.forgetSteered()
                log(.notice, "steering: removing the program, rules and tables")
                handOutSteering(nil)
            }
            return
        }
        let inputs = enforcedPermissions
        let plan = SteeringPlan.build(ruleset: ruleset, apps: state.config.apps, permissions: inputs.permissions,
                                      ownPermissions: inputs.ownPermissions, links: state.network.links)
        guard plan != enforcement.steering.plan else { return }
        log(.debug, "steering: \(plan.uidMarks.count) uids and \(plan.cgroupMarks.count) unit cgroups, "
            + "\(plan.allowances.count) tables")
        // The edge's last error stands until it answers this plan.
        setSteering(.steering(plan, error: enforcement.steering.error))
        caches.forgetSteered()
        handOutSteering(plan)
    }

    /// The step that puts `plan` in the kernel (nil: removes steering), once the step out is answered.
    private func handOutSteering(_ plan: SteeringPlan?) {
        if let step = enforcement.steering.kernel.apply(plan) { out.append(.steer(step)) }
    }

    /// The kernel's picture changed: steering's tables follow the main table (a plan that did not go in is
    /// installed again).
    func followSteering() {
        if let step = enforcement.steering.kernel.follow() { out.append(.steer(step)) }
    }

    /// The Steerer's answer to the step `id`: what the engine hears of it, and the step that waited, if any.
    func steered(_ id: UInt64, _ outcome: SteeringOutcome) {
        let (heard, next) = enforcement.steering.kernel.answered(id, outcome)
        switch heard {
        case nil, .change(.unchanged)?: break
        case let .answer(error)?: steered(error: error)
        case .change(.recovered)?: steered(error: nil)
        case let .change(.failed(error))?: steered(error: error)
        }
        if let next { out.append(.steer(next)) }
    }

    /// The one setter of steering's phase (SteeringMachine): logs old -> new.
    func setSteering(_ new: SteeringMachine.Phase) {
        enforcement.steering.set(new) { log(.debug, $0) }
    }

    /// What the engine hears of the Steerer's answers: the answer to its plan, or a changed outcome of following.
    private func steered(error: EdgeError?) {
        guard let plan = enforcement.steering.plan else { return }
        let was = enforcement.steering.error
        guard error != was else { return }
        if let error {
            log(.err, "steering: \(error)")
        } else {
            log(.notice, "steering: in force again")
        }
        enforcement.steering.moved = true
        setSteering(.steering(plan, error: error))
        if was != nil, error == nil { steeringTookEffect() }
    }

    /// Steered verdicts hold from now on (the rules are in force, steering works again): a steered app's verdict
    /// can be available where its main-table verdict is not (routed elsewhere), so held WAITs are looked at again.
    func steeringTookEffect() {
        guard state.config.enforcement == .steer, enforcement.steering.error == nil else { return }
        answerWaiters()
    }

    /// An enforced app kept off some links, in Mode=steer: its sockets are marked and routed by its table, so its
    /// verdict's `egress` and `via` are that table's answer, not the main table's (no `routed-elsewhere`).
    func steered(_ v: Verdict) -> Verdict {
        guard state.config.enforcement == .steer, v.enforcement.isEnforced, let plan = enforcement.steering.plan else { return v }
        let allowance = SteeringPlan.Allowance(v.permissions)
        guard allowance != .everything else { return v }
        let key = Verdict.SteeringKey(effective: EffectivePermissions(permissions: v.permissions, sources: v.sources),
                                      notEnforced: nil)
        if let cached = caches.steeredVerdict(key) { return cached.renamed(v.app, v.matchedBy, uid: v.uid) }
        // The kernel's answer for the mark once it has been asked (a moment after the plan is in force); until then
        // what the table holds says the same.
        let egress = state.network.markedEgress[allowance.mark] ?? plan.egress(for: allowance, network: state.network)
        let network = NetworkState(links: state.network.links, egress: egress)
        var s = Verdict.compute(app: v.app, matchedBy: v.matchedBy,
                                effective: EffectivePermissions(permissions: v.permissions, sources: v.sources),
                                network: network, ready: state.ready)
        s.enforcement = v.enforcement
        s.uid = v.uid
        caches.keepSteered(s, for: key)
        return s
    }

    /// `steered` in place: most verdicts are not steered, and returning one unchanged copied it (a retain and a
    /// release of each of its dozen references, ~1,500 instructions a QUERY).
    func steer(_ v: inout Verdict) {
        guard state.config.enforcement == .steer, v.enforcement.isEnforced, enforcement.steering.plan != nil else { return }
        v = steered(v)
    }

    /// The mark a steered app's sockets carry (as `steered` takes it), for a route lookup of one destination; nil
    /// when it is not steered.
    func steeringMark(_ v: Verdict) -> UInt32? {
        guard state.config.enforcement == .steer, v.enforcement.isEnforced, enforcement.steering.plan != nil else { return nil }
        let allowance = SteeringPlan.Allowance(v.permissions)
        return allowance == .everything ? nil : allowance.mark
    }

    /// App events the tracker cannot see: in Mode=steer an enforced app's verdict is its mark's, which changes with the
    /// marked lookups and with steering's standing while its main-table verdict stays. Each tracked app's verdict as
    /// shown is compared with the last one; steered verdicts are computed once per permission set.
    func steeredVerdictEvents() -> [Event] {
        enforcement.steering.moved = false
        guard state.config.enforcement == .steer else {
            enforcement.steering.shown = [:]
            return []
        }
        let pending = Set(work.events.compactMap { e -> String? in
            if case let .app(v) = e { return v.app }
            return nil
        })
        var events: [Event] = []
        var shown: [String: Verdict] = [:]
        for v in tracker.all {
            let s = withEnforcement(v, .name)
            if let last = enforcement.steering.shown[v.app], !last.sameState(as: s) || last.enforcement != s.enforcement,
               !pending.contains(v.app) {
                events.append(.app(v))
            }
            shown[v.app] = s
        }
        enforcement.steering.shown = shown
        return events
    }

    /// STATUS's steering members (Mode=steer).
    func writeSteering(to w: inout JSONWriter) {
        guard state.config.enforcement == .steer, let plan = enforcement.steering.plan else { return }
        w.object("steering") {
            $0.field("state", enforcement.steering.error == nil ? "steering" : "failed")
            $0.field("tables", plan.allowances.count)
            $0.field("marked_uids", plan.uidMarks.count)
            $0.field("marked_unit_cgroups", plan.cgroupMarks.values.filter { $0 != 0 }.count)
            if let e = enforcement.steering.error { $0.field("error", e.description) }
        }
    }
}

extension Verdict {
    /// What a steered verdict depends on besides the network: the app's permissions, where they come from, and
    /// whether it is enforced.
    struct SteeringKey: Hashable {
        var effective: EffectivePermissions
        /// nil: enforced; else why not.
        var notEnforced: Enforcement.Why?
    }
}
