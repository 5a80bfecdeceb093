// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// What the engine keeps of enforcement: the unit cgroups that exist, the ruleset last built, the text last
/// handed to the kernel and how that went.
/// Its fields change only in this file (fileprivate(set)), but the units made's and steering's, each of which
/// changes only in its own.
struct EnforcementBook {
    fileprivate(set) var cgroups = UnitCgroups()
    /// Units named to the kernel as they were made (Engine+FreshUnits.swift, whose own they are).
    var units = UnitsMade()
    /// The units' maps the rules have looked up since the policy was loaded (`Ruleset.unitLookups`): they stay
    /// looked up, empty or not, so that a unit made at a level where its app's units were can be named alone.
    fileprivate(set) var lookedUp: Set<String> = []
    /// Something the rules depend on changed outside the permission and network flags (cgroups, start-up).
    fileprivate(set) var dirty = true
    /// The links' names and kinds the last build saw: a carrier or address change does not rebuild.
    fileprivate(set) var links: [LinkKey] = []
    /// The last build (Mode=block); nil in Mode=off.
    fileprivate(set) var ruleset: Ruleset?
    /// How many times the whole ruleset was built (every app's maps); a change of links alone builds only their
    /// sets. Counted for the tests.
    fileprivate(set) var fullBuilds = 0
    /// What was last handed to the kernel, and what it took.
    fileprivate(set) var handover = Handover()
    fileprivate(set) var inForce = InForce()

    /// What was last handed to the kernel.
    struct Handover {
        /// The script (`Ruleset.removal` once the table is to be gone); nil before any.
        var text: String?
        /// The ids of the cgroups it names, as nft resolved them.
        var unitIDs: [UInt64] = []
        /// The ruleset `text` is of (Mode=block and steer): what a change of only what differs starts from.
        var ruleset: Ruleset?
    }

    /// The rules in force (the handover's once the kernel took them) and the ids of the cgroups they name: what the
    /// verdicts say is enforced while a load is in flight.
    struct InForce {
        var unitIDs: Set<UInt64> = []
        var ruleset: Ruleset?
    }

    fileprivate(set) var loaded: String? { get { handover.text } set { handover.text = newValue } }
    fileprivate(set) var loadedUnitIDs: [UInt64] { get { handover.unitIDs } set { handover.unitIDs = newValue } }
    fileprivate(set) var handedOver: Ruleset? { get { handover.ruleset } set { handover.ruleset = newValue } }
    fileprivate(set) var inForceUnitIDs: Set<UInt64> { get { inForce.unitIDs } set { inForce.unitIDs = newValue } }
    fileprivate(set) var inForceRuleset: Ruleset? { get { inForce.ruleset } set { inForce.ruleset = newValue } }
    /// Loads run off the loop, one at a time (docs/ENFORCEMENT.md, "Loads off the loop"): the one away (while the
    /// lifecycle's phase awaits an answer), and whether the state asks for rules not yet handed over (handed over
    /// when its answer comes). Its waiters are the replies that promise rules (RELOAD, DECIDE, FORGET; READY=1): the
    /// connection (none for READY=1) and the reply, held until the load that carries them ends.
    fileprivate(set) var loads = InFlight<HeldReply>()
    typealias HeldReply = (id: ConnectionID?, reply: () -> Void)
    /// Elements of unit cgroups that went, left in the kernel's maps by changes of elements only
    /// (`Ruleset.UpdateSize.stale`); none after a load of the whole table.
    fileprivate(set) var stale = 0
    /// Where the rules stand (EnforcementLifecycle.swift): changed only by `Engine.setEnforcement`.
    fileprivate(set) var lifecycle = EnforcementLifecycle()
    var state: EnforcementState { lifecycle.phase.shown }
    /// A policy load settled enforcement before its reply; the input's settle() need not build again.
    fileprivate(set) var settledEarly = false
    /// Mode=steer (SteeringMachine.swift): changed only by `Engine.setSteering`.
    var steering = SteeringMachine()
    /// The nftables tables' loads and repairs (Engine+Tables.swift, the only file that changes it).
    var tables = TableMachine()

    /// What the rules say of a link: its chain (kind, metered, roaming). `index`, `up`, `addresses`: Mode=steer
    /// only (its tables follow links up, down and re-created, its source rules their addresses).
    struct LinkKey: Equatable {
        var name: String; var kind: LinkKind; var metered: Bool; var roaming: Bool
        var index: Int32 = 0; var up = false; var addresses: [String] = []
    }

    /// Failed loads are tried again after 1, 2, 4 and 8 s, then left until the next change.
    static let maxAttempts = 5
    /// Past this many stale elements the whole table is loaded, which clears them: a host starting and stopping
    /// scopes all day must not grow its maps for good.
    static let maxStale = 1024
}

extension Engine {
    // MARK: - What other machines tell enforcement

    /// The system units' cgroups now (`Input.cgroups`): true if they changed, and the rules are built again.
    func setUnitCgroups(_ c: UnitCgroups) -> Bool {
        guard c != enforcement.cgroups else { return false }
        enforcement.cgroups = c
        enforcement.dirty = true
        return true
    }

    /// The apps judged changed (a desktop app came or went): the rules are built again.
    func appsChanged() { enforcement.dirty = true }

    /// A new policy: the units' maps looked up under the old one need not stay looked up.
    func forgetLookups() { enforcement.lookedUp = [] }

    /// A policy load settles enforcement before its reply (the rules follow the new policy before RELOAD is answered);
    /// the input's `settle()` then does not build again (`settleEnforcementOnce`).
    func settleEnforcementEarly() {
        settleEnforcement(permissionsChanged: true, networkChanged: true)
        enforcement.settledEarly = true
    }

    /// `settle()`'s turn of enforcement, unless the input settled it early.
    func settleEnforcementOnce(permissionsChanged: Bool, networkChanged: Bool) {
        guard !enforcement.settledEarly else {
            enforcement.settledEarly = false
            return
        }
        settleEnforcement(permissionsChanged: permissionsChanged, networkChanged: networkChanged)
    }

    /// A connection closed: the replies it waited for the rules for are not sent.
    func forgetHeldReplies(of id: ConnectionID) { enforcement.loads.removeWaiters { $0.id == id } }

    /// Builds the rules when what they depend on changed, and hands them to the kernel when they differ from
    /// the last ones handed over: links appearing, going or changing kind, the policy, decisions (lasting and
    /// once), agents (an undecided `ask` is rejected either way, so no new text), unit cgroups.
    /// Called by every input's settle(): a request that changed nothing costs one test.
    func settleEnforcement(permissionsChanged: Bool, networkChanged: Bool) {
        guard state.ready, enforcement.dirty || permissionsChanged || networkChanged else { return }
        let steer = state.config.enforcement == .steer
        let links = state.network.links.map {
            steer ? EnforcementBook.LinkKey(name: $0.name, kind: $0.kind, metered: $0.metered, roaming: $0.roaming == true,
                                            index: $0.index, up: $0.status.adminUp && $0.status.carrier, addresses: $0.addresses)
                  : EnforcementBook.LinkKey(name: $0.name, kind: $0.kind, metered: $0.metered, roaming: $0.roaming == true)
        }
        guard enforcement.dirty || permissionsChanged || links != enforcement.links else { return }
        let onlyLinks = !enforcement.dirty && !permissionsChanged
        enforcement.dirty = false
        enforcement.links = links
        switch state.config.enforcement {
        case .off:
            publishNaming(whole: false)
            enforcement.ruleset = nil
            enforcement.handedOver = nil
            guard enforcement.loaded != Ruleset.removal else { return }
            handOver()
            settleSteering(nil)
        case .block, .steer:
            // An undecided `ask` is logged (and rejected) whether or not an agent listens: agents coming and going
            // load nothing, and with none the log says once that a prompt could not be raised.
            // Only links changed (apps, permissions and cgroups are as the last build saw them): only the links
            // map is made again, not the maps of every app.
            let r: Ruleset
            if onlyLinks, let last = enforcement.ruleset {
                r = last.withLinks(state.network.links)
            } else {
                enforcement.fullBuilds += 1
                r = prepared(\.ruleset, for: rulesetInputs) { $0.build() }
                enforcement.lookedUp = r.unitLookups
            }
            if r.skipped != enforcement.ruleset?.skipped, !r.skipped.isEmpty {
                log(.warning, "enforcement: not enforced on names nft cannot be given: "
                    + r.skipped.prefix(10).joined(separator: ", ") + (r.skipped.count > 10 ? ", ..." : ""))
            }
            enforcement.ruleset = r
            settleSteering(r)
            handOver()
            if !onlyLinks { freshUnitsAfterBuild() }
        }
    }

    /// Hands the rules the state asks for (`ruleset`, or the removal in Mode=off) to the kernel when they differ from
    /// the last handed over, unless a load is in flight: then they are handed over when its answer comes
    /// (`rulesLoaded`), so that loads stay in the engine's order and each answer is its load's.
    func handOver() {
        let r = enforcement.ruleset
        let text = state.config.enforcement == .off ? Ruleset.removal : r?.text
        guard let text else { return }
        // The same text names new cgroups when one was made again at the same path (new id).
        let differs = text != enforcement.loaded || (r.map { $0.unitIDs != enforcement.loadedUnitIDs } ?? false)
        if enforcement.lifecycle.phase.awaitsAnswer {
            enforcement.loads.logged("rule loads", log: debugLog) { $0.want(differs) }
            return
        }
        guard differs else { return }
        guard let r, state.config.enforcement != .off else {
            // At start-up a table a killed daemon left is removed; quietly, as a daemon that never enforces may
            // lack the privilege even to look.
            let first = enforcement.loaded == nil
            if !first { log(.notice, "enforcement: Mode=off, removing the rules") }
            load(Ruleset.removal, report: !first)
            return
        }
        enforcement.loadedUnitIDs = r.unitIDs
        // The last rules are in force: change just what differs (the links map, map elements, pending chains).
        var update: Ruleset.Update?
        if case .enforcing = enforcement.lifecycle.phase, let previous = enforcement.handedOver,
           previous.text == enforcement.loaded {
            // Units named as they were made are in the kernel already: not added again.
            let fresh = enforcement.units.fresh.sorted { $0.key < $1.key }.map { (id: $0.key, elements: $0.value.elements) }
            let base = fresh.isEmpty ? previous : previous.with(fresh: fresh, as: r)
            update = prepared(\.update, for: RulesetChange(ruleset: r, previous: base)) { $0.ruleset.update(from: $0.previous) }
            if let u = update, enforcement.stale + u.size.stale > EnforcementBook.maxStale { update = nil }
        }
        enforcement.handedOver = r
        if let update, update.changes.isEmpty {
            // Nothing the kernel can be told (a cgroup no element names came or went; a cgroup's elements left
            // stale): the rules in force are these.
            enforcement.loaded = r.text
            enforcement.inForceUnitIDs = Set(r.unitIDs)
            enforcement.inForceRuleset = r
            enforcement.stale += update.size.stale
            return
        }
        enforcement.stale = update.map { enforcement.stale + $0.size.stale } ?? 0
        log(.debug, "enforcement: loading rules for \(r.uids) uids, \(r.cgroups) unit cgroups, \(r.links) links"
            + (update.map { u in
                u.size.elements + u.size.chains == 0 ? " (links map only)"
                    : " (changes only: \(u.size.links ? "the links map, " : "")\(u.size.elements) elements, "
                    + "\(u.size.chains) chains" + (u.size.stale > 0 ? ", \(u.size.stale) left stale" : "") + ")"
            } ?? ""))
        load(r.text, transactions: update?.changes, report: true)
    }

    /// What the rules hold each app to now.
    var enforcedPermissions: EnforcedPermissions {
        EnforcedPermissions(config: state.config, decisions: state.decisions, exhausted: state.exhausted)
    }

    /// What the rules are made from now.
    var rulesetInputs: RulesetInputs {
        RulesetInputs(permissions: enforcedPermissions, links: state.network.links, cgroups: enforcement.cgroups,
                      tags: appBooks.tags, lookedUp: enforcement.lookedUp)
    }

    /// `text` is the whole ruleset (what a retry or a repair loads); `transactions`, when given, the smaller scripts
    /// that get there from the rules in force.
    /// A removal handed over quietly (`report` false: at start-up) hears nothing back, so it is `off` at once.
    private func load(_ text: String, transactions: [RuleTransaction]? = nil, report: Bool) {
        enforcement.loaded = text
        // A removal handed over quietly is answered by nothing: replies do not wait for it.
        if report { startLoad() }
        if text == Ruleset.removal {
            setEnforcement(report ? .removing(failures: 0) : .off)
        } else {
            switch enforcement.lifecycle.phase {
            case .enforcing, .changing, .repairing: setEnforcement(.changing(partial: transactions != nil))
            case .off, .removing, .loading, .failed: setEnforcement(.loading(failures: 0))
            }
        }
        askRulesLoad(transactions ?? [RuleTransaction(whole: text)], report: report, inForce: text, handles: handedOverHandles)
    }

    /// The one setter of enforcement's lifecycle: logs old -> new, cancels the retry of a `failed` phase it leaves,
    /// and in Mode=steer marks the verdicts to be shown again when what they say of enforcement changed.
    func setEnforcement(_ new: EnforcementPhase) {
        let was = enforcement.state
        if let retry = enforcement.lifecycle.set(new, log: { log(.debug, $0) }) { cancelTimer(retry) }
        if state.config.enforcement == .steer, was != enforcement.state { enforcement.steering.moved = true }
    }

    /// The kernel's answer to the last `loadRules` that asked for one (or the edge's own repair failing); then what
    /// the state asked for meanwhile is handed over, and the replies that waited for rules now in force go.
    func rulesLoaded(error: EdgeError?) {
        outcome(error: error)
        // Still away: a change refused is being loaded whole, its replies wait for it.
        guard !enforcement.lifecycle.phase.awaitsAnswer else { return }
        // The load away is in force, or failed: its replies go; those that waited for the next go with it, or now
        // when nothing more is handed over (failed rules: the replies go, and STATUS and the verdicts say so).
        var done = enforcement.loads.running ? enforcement.loads.logged("rule loads", log: debugLog) { $0.finish().waiters } : []
        handOver()
        if !enforcement.loads.running { done += enforcement.loads.drain() }
        release(done)
    }

    /// The cgroup descriptors the rules handed over name (none for the removal).
    private var handedOverHandles: Set<Int32> { enforcement.loaded == Ruleset.removal ? [] : enforcement.handedOver?.handles ?? [] }

    /// A load is away: its answer is awaited (`rulesLoaded`).
    private func startLoad() {
        let started = enforcement.loads.logged("rule loads", log: debugLog) { $0.start() }
        assert(started, "a load handed over while one was away")
    }

    private func outcome(error: EdgeError?) {
        let removal = enforcement.loaded == Ruleset.removal
        let phase = enforcement.lifecycle.phase
        guard let error else {
            // The edge's own repair reports only failures: a success answers a load in flight.
            guard phase.awaitsAnswer else { return }
            let was = enforcement.state
            let partial = phase == .changing(partial: true)
            counters.ruleLoads += 1
            enforcement.inForceUnitIDs = removal ? [] : Set(enforcement.loadedUnitIDs)
            enforcement.inForceRuleset = removal ? nil : enforcement.handedOver
            if !removal, was != .enforcing { counters.rulesInForceSince = settings.wallClock() }
            setEnforcement(removal ? .off : .enforcing)
            freshUnitsAfterLoad(whole: !partial)
            if !removal, was != .enforcing, let r = enforcement.handedOver {
                log(.notice, "enforcement: rules in force (\(r.appsEnforced) apps "
                    + "enforced, \(r.uids) uids, \(r.cgroups) unit cgroups, \(r.links) links)")
                steeringTookEffect()
            }
            return
        }
        counters.ruleLoadFailures += 1
        let failures: Int
        switch phase {
        case .changing(partial: true) where !removal:
            // The kernel's table is not what the change was made against (another tool's change not yet repaired,
            // a cgroup gone since the scan): the whole table, at once, as a repair would.
            guard let text = enforcement.loaded else { return }
            enforcement.stale = 0
            log(.notice, "enforcement: changing only what differs failed (\(error)); loading the whole table")
            setEnforcement(.repairing)
            askRulesLoad([RuleTransaction(whole: text)], report: true, inForce: text, handles: handedOverHandles)
            return
        case let .removing(n), let .loading(n), let .failed(_, n, _): failures = n + 1
        // A whole change or a repair refused, or the edge's own repair after another tool's change.
        case .off, .enforcing, .changing, .repairing: failures = 1
        }
        let retry = retryLater("enforcement: loading the rules", attempt: failures, of: EnforcementBook.maxAttempts,
                               error: error, timer: .rulesRetry)
        setEnforcement(.failed(error, failures: failures, retry: retry))
        publishNaming(whole: false)
    }

    /// Sends `reply` (and resumes `id` if `resume`) once the rules the state asks for now are in force, or at once
    /// if they are or no load is in flight: a client told that its DECIDE or RELOAD took meets the rules it asked
    /// for. Holds `id` meanwhile and returns true.
    @discardableResult
    func answerOnceInForce(_ id: ConnectionID, resume: Bool, _ reply: @escaping () -> Void) -> Bool {
        guard onceInForce(id, reply) else {
            if resume { out.append(.resume(id)) }
            return false
        }
        out.append(.hold(id))
        return true
    }

    /// Runs `action` once the rules the state asks for now are in force, or at once (then returns false); for
    /// `id`, while its connection lasts.
    @discardableResult
    func onceInForce(_ id: ConnectionID?, _ action: @escaping () -> Void) -> Bool {
        guard enforcement.lifecycle.phase.awaitsAnswer else {
            action()
            return false
        }
        enforcement.loads.wait((id, action))
        return true
    }

    /// Runs `action` once every rule the state asks for now is in force: the enforcement table's, then the usage
    /// table's (a budget's quota). For `id` only while its connection lasts; `action` resumes it if it must.
    func onceRulesInForce(_ id: ConnectionID?, _ action: @escaping () -> Void) {
        onceInForce(nil) { [unowned self] in
            if let id, clients.sessions[id] == nil { return }
            onceUsageInForce(id, action)
        }
    }

    /// Whether `id`'s reply waits for rules.
    func heldForRules(_ id: ConnectionID) -> Bool { enforcement.loads.contains { $0.id == id } }

    /// Sends the replies whose rules are in force (or failed), in the order they were held.
    private func release(_ held: [EnforcementBook.HeldReply]) {
        for h in held {
            guard let id = h.id else { h.reply(); continue }
            guard clients.sessions[id] != nil else { continue }
            h.reply()
            out.append(.resume(id))
        }
    }

    /// The `n`th failure in a row of a load: tried again after 1, 2, 4... s, until `max` attempts. Returns the retry's
    /// timer (nil: given up until the next change).
    func retryLater(_ what: String, attempt n: Int, of max: Int, error: EdgeError, timer: TimerPurpose) -> TimerID? {
        guard n < max else {
            log(.err, "\(what) failed \(n) times, giving up until the next change: \(error)")
            return nil
        }
        log(.err, "\(what) failed (attempt \(n)), retrying in \(1 << (n - 1)) s: \(error)")
        return armTimer(timer, microseconds: 1_000_000 << UInt64(n - 1))
    }

    /// The retry timer of a `failed` phase fired: the whole ruleset (or the removal) again.
    func retryRules() {
        guard case let .failed(_, failures, _) = enforcement.lifecycle.phase, let text = enforcement.loaded else { return }
        enforcement.stale = 0
        setEnforcement(text == Ruleset.removal ? .removing(failures: failures) : .loading(failures: failures))
        startLoad()
        askRulesLoad([RuleTransaction(whole: text)], report: true, inForce: text, handles: handedOverHandles)
    }

    /// Whether an app's permissions are in force in the kernel.
    func enforcementFact(for match: AppMatch) -> Enforcement {
        switch state.config.enforcement {
        case .off: return .notEnforced(.modeOff)
        case .block: break
        case .steer: if enforcement.steering.error != nil { return .notEnforced(.rulesFailed) }
        }
        // The index, not `app(named:)`: that method, on the policy this class holds, ran on a copy of it.
        guard match.matchedBy != .defaults, state.config.appIndex[match.id] != nil else {
            // A desktop app that does not run: the rules name it once a unit of it exists.
            return match.matchedBy == .desktop && state.config.desktopApps ? .notEnforced(.cgroupAbsent) : .notEnforced(.notInPolicy)
        }
        switch enforcement.lifecycle.phase {
        case .off, .removing, .loading: return .notEnforced(.starting)
        case .failed: return .notEnforced(.rulesFailed)
        case .enforcing, .changing, .repairing: break
        }
        if let why = (enforcement.inForceRuleset ?? enforcement.ruleset)?.notEnforced[match.id] { return .notEnforced(why) }
        return .enforced
    }

    /// What a process asking about its own app from a unit's cgroup hears: whether that cgroup is in the rules in
    /// force. Its app may be enforced through other cgroups (or not yet at all, executable-only) while the asker's,
    /// just made, is not yet: `netpermctl run` starts its command only once its scope is in the rules.
    func ownEnforcement(_ e: Enforcement, _ caller: Caller) -> Enforcement {
        // Known by its executable, which the kernel cannot see: held to its app only where its unit or uid is that
        // app's too (AppResolver); otherwise the kernel judges it as another app, or as none.
        if caller.match.matchedBy == .executable, e.isEnforced, !caller.heldToMatch {
            return .notEnforced(.executableOnly)
        }
        guard caller.match.matchedBy == .unit || caller.match.matchedBy == .desktop, let unit = caller.identity.unit
        else { return e }
        if case let .notEnforced(why) = e {
            switch why {
            case .executableOnly, .cgroupAbsent, .cgroupPending, .cgroupUnfollowed: break
            // Nothing in force, or nothing of this app: the asker's cgroup changes none of these.
            case .modeOff, .starting, .rulesFailed, .notInPolicy, .shadowed: return e
            }
        }
        guard caller.identity.unitFollowed else { return .notEnforced(.cgroupUnfollowed) }
        let user = caller.identity.userUnit
        func named(_ c: UnitCgroup) -> Bool {
            c.unit == unit && c.user == user && (!user || Ruleset.UnitOwner.userUID(path: c.path) == caller.identity.uid)
        }
        // A unit named as it was made has only its restrictions in force until its load: not yet enforced.
        let inForce = enforcement.cgroups.units.contains { named($0) && enforcement.inForceUnitIDs.contains($0.id) }
        return inForce ? .enforced : .notEnforced(.cgroupPending)
    }

    /// The verdict with its app's enforcement.
    func withEnforcement(_ v: Verdict, _ matchedBy: MatchedBy) -> Verdict {
        var v = v
        v.enforcement = enforcementFact(for: AppMatch(id: v.app, matchedBy: matchedBy, app: nil))
        var s = steered(v)
        if matchedBy != .defaults { s.budget = budgetFact(for: v.app) }
        named(&s)
        return s
    }

    /// STATUS's `enforcement` member. What the rules name is what is in force in the kernel: while a change is
    /// being loaded, what was in force before it (a unit whose rules were only handed over is not counted).
    func writeEnforcement(to w: inout JSONWriter) {
        w.field("mode", state.config.enforcement.rawValue)
        w.field("state", enforcement.state.name)
        if let r = enforcement.inForceRuleset, state.config.enforcement != .off {
            w.field("apps", r.appsEnforced)
            w.field("uids", r.uids)
            w.field("unit_cgroups", r.cgroups)
            // Units named as they were made: what they must not do is in force, the rest comes with their load.
            w.field("units_restricted", enforcement.units.fresh.count)
            w.field("links", r.links)
        }
        if case let .failed(error, failures, _) = enforcement.lifecycle.phase {
            w.field("error", error.description)
            w.field("attempts", failures)
        }
        writeSteering(to: &w)
    }

    /// What STATUS= says of enforcement: nothing in Mode=off.
    var enforcementStatus: String? {
        switch state.config.enforcement {
        case .off: return nil
        case .block: break
        case .steer:
            if let e = enforcement.steering.error?.description {
                return "steering failed: " + (e.utf8.count > 200 ? String(decoding: e.utf8.prefix(200), as: UTF8.self) + "..." : e)
            }
        }
        switch enforcement.lifecycle.phase {
        case .off, .removing, .loading: return "enforcement starting"
        case .enforcing, .changing, .repairing: return "enforcing"
        case let .failed(error, _, _):
            let e = error.description
            return "enforcement failed: " + (e.utf8.count > 200 ? String(decoding: e.utf8.prefix(200), as: UTF8.self) + "..." : e)
        }
    }
}

extension Engine {
    /// A stop leaves the rules in force (and steering's rules and tables; its program goes with the process): a
    /// restart or an upgrade must not open them, and the next process takes the table over in one handover
    /// (docs/ENFORCEMENT.md, "Stop, restart and crash"). Only Mode=off and `netpermd --remove-rules` remove them.
    func stopEnforcing() {
        guard let loaded = enforcement.loaded, loaded != Ruleset.removal else { return }
        log(.notice, "enforcement: stopping; the rules stay in force until the next start "
            + "(Mode=off or netpermd --remove-rules removes them)")
    }
}
