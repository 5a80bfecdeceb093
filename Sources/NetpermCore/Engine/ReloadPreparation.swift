// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// A reload's large computations made away from the event loop. As a policy load starts, the edge takes a snapshot
/// of what they read (`Engine.reloadBasis()`); the thread that reads the files runs them on it with the new policy
/// (`prepare`), and the results come back with the policy (`Input.policy`). The engine takes each only where what
/// it would read now equals what the thread read, and computes it itself otherwise (a link, a decision or a
/// subscriber came meanwhile). Each is a pure function of those inputs, so the effects are the same bytes either
/// way: only the loop's time differs (10,001 apps: the rules, their change, the units' naming, what usage tags
/// connections by and every verdict held the loop 300-500 ms).
public struct ReloadBasis: Sendable {
    let state: DaemonState
    let running: Set<String>
    let installed: InstalledDesktopApps
    let tags: TagTable
    let tracker: VerdictTracker
    let extras: [(AppMatch, UInt32?)]
    let cgroups: UnitCgroups
    let lookedUp: Set<String>
    /// The rules last handed to the kernel: what the next change of them starts from.
    let handedOver: Ruleset?

    /// What the engine will compute on taking the policy, as it would if nothing else came first (the order of
    /// Engine.applyPolicy and settle()).
    public func prepare(_ result: ConfigParseResult) -> PreparedReload? {
        guard let parsed = result.config else { return nil }
        let p = PreparedReload()
        let change = Prepared(PolicyChange(policy: parsed, config: state.config)) { $0.changed }
        let apps = Prepared(AppsInputs(policy: parsed, running: running, installed: installed, config: state.config,
                                         tags: tags)) { $0.adopt() }
        var s = state
        s.config = apps.output.config
        if change.output { s.decisions.dropOnce() }
        p.change = change
        p.apps = apps
        if s.ready, s.config.enforcement != .off {
            let permissions = EnforcedPermissions(config: s.config, decisions: s.decisions, exhausted: s.exhausted)
            let inputs = RulesetInputs(permissions: permissions, links: s.network.links, cgroups: cgroups,
                                       tags: apps.output.tags, lookedUp: change.output ? [] : lookedUp)
            let rules = Prepared(inputs) { $0.build() }
            p.ruleset = rules
            if let handedOver {
                p.update = Prepared(RulesetChange(ruleset: rules.output, previous: handedOver)) { $0.ruleset.update(from: $0.previous) }
            }
            if s.config.enforcement == .block {
                p.naming = Prepared(NamingInputs(permissions: permissions, tags: apps.output.tags)) { $0.naming() }
            }
        }
        if s.ready, s.config.usage.count {
            p.tagging = Prepared(TaggingInputs(apps: s.config.apps, cgroups: cgroups, tags: apps.output.tags,
                                                     installed: s.config.installedDesktopApps)) { $0.tagging() }
        }
        p.tracker = Prepared(TrackerInputs(state: s, extras: extras, tracker: tracker.changes)) { _ in
            var t = tracker
            // Sorted as settle() sorts one change's app events (a stable sort: sorting again keeps this order).
            let events = t.reset(state: s, extra: extras).sorted(by: Event.byApp)
            return TrackerReset(tracker: t, events: events)
        }
        return p
    }
}

/// What `ReloadBasis.prepare` made, each beside its inputs. Made by the thread, then handed to the loop, which
/// alone touches it from then on: the engine takes each part out (the input that carried it then holds nothing of
/// it, so 10,001 events are moved, not copied, and nothing of them is left for the input's release).
public final class PreparedReload: @unchecked Sendable {
    var change: Prepared<PolicyChange, Bool>?
    var apps: Prepared<AppsInputs, AppsAdoption>?
    var ruleset: Prepared<RulesetInputs, Ruleset>?
    var update: Prepared<RulesetChange, Ruleset.Update?>?
    var naming: Prepared<NamingInputs, UnitNaming>?
    var tagging: Prepared<TaggingInputs, UsageTagging>?
    var tracker: Prepared<TrackerInputs, TrackerReset>?
}

/// One pure computation's result beside the inputs it was made from: given only for equal inputs, where it is the
/// result the computation would give again.
struct Prepared<Inputs: Equatable & Sendable, Output: Sendable>: Sendable {
    let inputs: Inputs
    let output: Output
    init(_ inputs: Inputs, _ make: (Inputs) -> Output) {
        self.inputs = inputs
        output = make(inputs)
    }

    func output(for actual: Inputs) -> Output? { actual == inputs ? output : nil }
}

/// Whether a policy read differs from the one in force (which has the desktop apps running added): a change ends
/// every `--once` decision.
struct PolicyChange: Equatable, Sendable {
    var policy: Config
    var config: Config
    var changed: Bool { policy != config.policyOnly }
}

/// The apps judged: a policy with the desktop apps running that no `[App]` names, and their tags.
struct AppsInputs: Equatable, Sendable {
    var policy: Config
    var running: Set<String>
    /// The desktop entries installed (`Config.installedDesktopApps`).
    var installed: InstalledDesktopApps
    /// The apps judged now, and their tags.
    var config: Config
    var tags: TagTable

    func adopt() -> AppsAdoption {
        var new = policy.addingDesktopApps(running)
        new.installedDesktopApps = installed
        guard new.apps != config.apps || new.installedDesktopApps != config.installedDesktopApps else { return AppsAdoption(config: new, appsChanged: false, tags: tags, tagsChanged: false) }
        let assigned = tags.assigning(new.apps.map(\.id))
        return AppsAdoption(config: new, appsChanged: true, tags: assigned, tagsChanged: assigned != tags)
    }
}

struct AppsAdoption: Sendable {
    var config: Config
    var appsChanged: Bool
    var tags: TagTable
    var tagsChanged: Bool
}

/// New rules beside those handed over: the change from one to the other (`Ruleset.update(from:)`).
struct RulesetChange: Equatable, Sendable {
    var ruleset: Ruleset
    var previous: Ruleset
}

/// What `VerdictTracker.reset` reads: the parts of the state verdicts depend on, the apps tracked beside the
/// policy's, and the tracker it starts from (by its count of changes).
struct TrackerInputs: Equatable, Sendable {
    var config: Config
    var decisions: Decisions
    var agents: Int
    var userAgents: [UInt32: Int]
    var exhausted: Set<String>
    var network: NetworkState
    var ready: Bool
    var extraApps: [AppMatch]
    var extraUIDs: [UInt32?]
    var tracker: Int

    init(state: DaemonState, extras: [(AppMatch, UInt32?)], tracker: Int) {
        config = state.config; decisions = state.decisions; agents = state.agents; userAgents = state.userAgents
        exhausted = state.exhausted; network = state.network; ready = state.ready
        extraApps = extras.map(\.0); extraUIDs = extras.map(\.1)
        self.tracker = tracker
    }
}

/// The tracker after a reset, and its events (sorted by app).
struct TrackerReset: Sendable {
    var tracker: VerdictTracker
    var events: [Event]
}
