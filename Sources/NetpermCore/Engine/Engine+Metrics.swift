// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// What happened since the daemon started, counted as it happens; everything else METRICS reports is read from the
/// state when asked. Every series is bounded by the policy (its apps, the kinds, the reasons), never by processes,
/// connections or addresses (docs/METRICS.md).
struct MetricCounters {
    var connections = 0
    /// Prompts raised because the app asked (QUERY, WAIT) and because the kernel rejected its packet (NFLOG).
    var promptsRaised = 0, promptsRaisedByPackets = 0
    var promptsAnswered: [Permission: Int] = [:]
    var promptsExpired = 0
    /// Prompts whose askers had all exited before an answer.
    var promptsWithdrawn = 0
    var reloadFailures = 0
    /// A reload's computations taken as the policy's thread made them, and those made again on the loop because what
    /// they read changed meanwhile (ReloadPreparation.swift).
    var reloadWorkPrepared = 0, reloadWorkRedone = 0
    var ruleLoads = 0, ruleLoadFailures = 0
    /// Wall-clock seconds: when the daemon became ready, and when the rules now in force took effect.
    var startedAt: Double?
    var rulesInForceSince: Double?

    /// Counted from the events, the one place every prompt and every policy load passes.
    mutating func count(_ events: [Event]) {
        for e in events {
            switch e {
            case let .prompt(p): if p.blocked { promptsRaisedByPackets += 1 } else { promptsRaised += 1 }
            case let .promptAnswered(_, decision, _, _): promptsAnswered[decision, default: 0] += 1
            case .promptExpired: promptsExpired += 1
            case .promptWithdrawn: promptsWithdrawn += 1
            case let .policy(_, _, error): if error != nil { reloadFailures += 1 }
            case .link, .app, .usage, .stopping: break
            }
        }
    }
}

extension Engine {
    /// METRICS: the exposition text, as one JSON string (every reply is one JSON line).
    func writeMetrics(to w: inout JSONWriter) {
        w.field("ok", true)
        w.field("metrics", metricsText().text)
    }

    func metricsText() -> MetricsText {
        var m = MetricsText()
        writeDaemonMetrics(to: &m)
        writePolicyMetrics(to: &m)
        writePromptMetrics(to: &m)
        writeEnforcementMetrics(to: &m)
        writeConnectionMetrics(to: &m)
        writeExecMetrics(to: &m)
        writeUsageMetrics(to: &m)
        writeReportMetrics(to: &m)
        return m
    }

    /// The daemon itself and the links it sees.
    private func writeDaemonMetrics(to m: inout MetricsText) {
        let c = counters
        m.family("netpermd_build_info", .gauge, "Always 1; the version of the running daemon is its label.")
        m.sample(1, ["version": DaemonState.version])
        m.family("netpermd_ready", .gauge, "1 once the first look at the links is taken and the policy loaded.")
        m.sample(state.ready)
        m.family("netpermd_start_time_seconds", .gauge, "When the daemon became ready, in seconds since the epoch.")
        m.sample(seconds: c.startedAt ?? 0)

        let net = state.network
        m.family("netpermd_links", .gauge, "Links the kernel has, by kind, metered and usable (admin up, carrier, default route).")
        for kind in LinkKind.allCases {
            for metered in [false, true] {
                for usable in [false, true] {
                    let n = net.links.reduce(0) { $0 + ($1.kind == kind && $1.metered == metered && $1.usable == usable ? 1 : 0) }
                    m.sample(n, ["kind": kind.rawValue, "metered": String(metered), "usable": String(usable)])
                }
            }
        }
        m.family("netpermd_network_available", .gauge, "1 while a link other than loopback is usable.")
        m.sample(net.available)
    }

    /// The policy in force, its loads, and the apps' verdicts.
    private func writePolicyMetrics(to m: inout MetricsText) {
        let c = counters
        m.family("netpermd_policy_apps", .gauge, "Apps the policy in force defines ([App] sections).")
        m.sample(state.config.apps.count)
        var reasons: [Verdict.Reason: Int] = [:]
        for app in state.config.apps {
            reasons[verdict(for: AppMatch(id: app.id, matchedBy: .name, app: app)).reason, default: 0] += 1
        }
        m.family("netpermd_apps", .gauge, "Apps of the policy by the reason of their verdict now (ok: may use the network).")
        for r in Verdict.Reason.allCases { m.sample(reasons[r] ?? 0, ["reason": r.rawValue]) }
        m.family("netpermd_policy_generation", .gauge, "Successful policy loads since the daemon started (1 after start-up).")
        m.sample(state.policyGeneration)
        m.family("netpermd_policy_last_reload_successful", .gauge, "0 while the last reload failed and an older policy is in force.")
        m.sample(state.policyError == nil)
        m.family("netpermd_policy_reload_failures_total", .counter, "Policy loads that failed (the last good policy stayed).")
        m.sample(c.reloadFailures)
        m.family("netpermd_policy_reload_work_total", .counter,
                 "A reload's computations (the rules, the units' naming, usage's tagging, the verdicts) by where they were made: "
                 + "off the loop by the thread that read the policy, or again on the loop as what they read changed meanwhile.")
        m.sample(c.reloadWorkPrepared, ["made": "off-loop"])
        m.sample(c.reloadWorkRedone, ["made": "loop"])
    }

    /// Prompts, agents and stored decisions.
    private func writePromptMetrics(to m: inout MetricsText) {
        let c = counters
        m.family("netpermd_prompts_raised_total", .counter,
                 "Prompts sent to agents, by what raised them: the app asking, or a packet the kernel rejected (NFLOG).")
        m.sample(c.promptsRaised, ["trigger": "request"])
        m.sample(c.promptsRaisedByPackets, ["trigger": "rejected-packet"])
        m.family("netpermd_prompts_answered_total", .counter, "Prompts answered, by the decision.")
        for p in [Permission.allow, .deny] { m.sample(c.promptsAnswered[p] ?? 0, ["decision": p.rawValue]) }
        m.family("netpermd_prompts_expired_total", .counter, "Prompts that expired unanswered.")
        m.sample(c.promptsExpired)
        m.family("netpermd_prompts_withdrawn_total", .counter, "Prompts withdrawn: every process that asked had exited.")
        m.sample(c.promptsWithdrawn)
        m.family("netpermd_prompts_open", .gauge, "Prompts waiting for an answer now.")
        m.sample(state.prompts.open.count)
        m.family("netpermd_agents", .gauge, "Agents subscribed to prompts now: privileged ones, for everyone, and users' own.")
        m.sample(state.agents, ["for": "everyone"])
        m.sample(state.userAgents.values.reduce(0, +), ["for": "user"])
        m.family("netpermd_decisions", .gauge, "Stored decisions (an app and a kind each), lasting or until the policy changes (once), by decision.")
        let entries = state.decisions.entries()
        for (source, once, users) in [("lasting", false, false), ("once", true, false), ("user-lasting", false, true),
                                      ("user-once", true, true)] {
            for p in [Permission.allow, .deny] {
                let n = entries.reduce(0) { $0 + ($1.once == once && ($1.uid != nil) == users && $1.decision == p ? 1 : 0) }
                m.sample(n, ["source": source, "decision": p.rawValue])
            }
        }
    }

    private func writeConnectionMetrics(to m: inout MetricsText) {
        let c = counters
        let subscribers = clients.sessions.values.reduce(0) { $0 + ($1.subscription != nil ? 1 : 0) }
        let waiters = clients.sessions.values.reduce(0) { $0 + ($1.waiting != nil ? 1 : 0) }
        // Not `netpermd_connections`: OpenMetrics takes that as the counter `netpermd_connections_total`'s own name.
        m.family("netpermd_connections_open", .gauge, "Client connections open now.")
        m.sample(clients.sessions.count)
        m.family("netpermd_connections_total", .counter, "Client connections accepted since the daemon started.")
        m.sample(c.connections)
        m.family("netpermd_subscribers", .gauge, "Connections following events (SUBSCRIBE) now.")
        m.sample(subscribers)
        m.family("netpermd_waiters", .gauge, "Connections whose WAIT is held now.")
        m.sample(waiters)
    }

    private func writeEnforcementMetrics(to m: inout MetricsText) {
        let c = counters
        m.family("netpermd_enforcement_mode", .gauge, "1 for the [Enforcement] Mode= in force.")
        for mode in EnforcementMode.allCases { m.sample(mode == state.config.enforcement, ["mode": mode.rawValue]) }
        m.family("netpermd_enforcement_state", .gauge, "1 for where the rules stand in the kernel.")
        for name in EnforcementState.names { m.sample(name == enforcement.state.name, ["state": name]) }
        m.family("netpermd_enforcement_apps", .gauge, "Apps of the policy whose permissions the rules in force enforce.")
        let enforced = enforcement.state == .enforcing && state.config.enforcement != .off
            ? enforcement.ruleset.map { state.config.apps.count - $0.notEnforced.count } ?? 0 : 0
        m.sample(enforced)
        m.family("netpermd_enforcement_rules_in_force_since_seconds", .gauge,
                 "When the rules in force took effect, in seconds since the epoch (0: none in force).")
        m.sample(seconds: enforcement.state == .enforcing ? c.rulesInForceSince ?? 0 : 0)
        m.family("netpermd_enforcement_rule_loads_total", .counter, "Rule loads the kernel accepted (whole tables and changes).")
        m.sample(c.ruleLoads)
        m.family("netpermd_enforcement_rule_load_failures_total", .counter, "Rule loads the kernel or libnftables refused.")
        m.sample(c.ruleLoadFailures)
    }

    /// Apps known by what they run (docs/APPS.md): the kernel's execs as the edge counted them (up to half a second
    /// late), the processes found running an installed app's program, and the scopes asked for them.
    private func writeExecMetrics(to m: inout MetricsText) {
        let c = appBooks.execs.counted
        m.family("netpermd_process_execs_total", .counter,
                 "Execs the kernel told of (process events), of every process of the system; counted up to 0.5 s late.")
        m.sample(c.execs)
        m.family("netpermd_process_exec_app_programs_total", .counter,
                 "Of those, execs of a program some installed app runs (looked at further: where the process runs).")
        m.sample(c.candidates)
        m.family("netpermd_process_events_overruns_total", .counter, "Times the kernel dropped process events (the socket's buffer overran).")
        m.sample(c.overruns)
        m.family("netpermd_process_exec_apps_found_total", .counter,
                 "Processes of a person's session with no app unit of their own found running an installed app's program.")
        m.sample(appBooks.execs.found)
        m.family("netpermd_process_exec_scopes_total", .counter,
                 "Scopes asked of users' managers for apps found by what they run, by outcome: made, failed.")
        m.sample(appBooks.execs.scopesMade, ["outcome": "made"])
        m.sample(appBooks.execs.scopesFailed, ["outcome": "failed"])
        m.family("netpermd_process_exec_scopes_by_users_total", .counter,
                 "Of those, scopes a user's own netpermctl scopes was asked to make (the rest the daemon made itself).")
        m.sample(appBooks.execs.scopesByUsers)
    }

    /// Per-app usage (docs/USAGE.md): bytes each app of the policy (and, as `(other)`, everything else) sent and
    /// received since its last reset, per class of link: every class a link has now or that was ever counted, for
    /// every app, so each series is there from the start. Budgets as gauges.
    private func writeUsageMetrics(to m: inout MetricsText) {
        m.family("netpermd_usage_counting", .gauge, "1 while [Usage] Count=yes.")
        m.sample(state.config.usage.count)
        m.family("netpermd_usage_state", .gauge, "1 for where the counting rules stand: off, applying, counting, failed.")
        for name in UsageTableState.names { m.sample(name == usage.state.name, ["state": name]) }
        var classes = Set(state.network.links.compactMap(UsageClass.init(link:)))
        let book = usage.book
        for u in book.apps.values { classes.formUnion(u.sinceReset.entries.map(\.usageClass)) }
        classes.formUnion(book.other.sinceReset.entries.map(\.usageClass))
        let sorted = classes.sorted()
        // Every app while the policy is small; past `MetricsApps=`, the apps with a budget and the rest as one.
        var rows: [(String, AppUsage)]
        if state.config.apps.count <= state.config.usage.metricsApps {
            rows = state.config.apps.map { ($0.id, book[$0.id]) }
        } else {
            rows = []
            var rest = AppUsage()
            for app in state.config.apps {
                if state.config.meteredBudget(for: app) != nil { rows.append((app.id, book[app.id])) }
                else { rest.sinceReset = rest.sinceReset + book[app.id].sinceReset }
            }
            rows.append(("(unbudgeted)", rest))
        }
        rows.append(("(other)", book.other))
        for (unit, help) in [("bytes", "Bytes (IP headers included)"), ("packets", "IP packets")] {
            for direction in UsageDirection.allCases {
                m.family("netpermd_app_\(direction.rawValue)_\(unit)_total", .counter, "\(help) \(direction.rawValue) by each "
                    + "app over links of a kind, metered or not (roaming=\"true\" while roaming), since its last reset; (other): every other process, and "
                    + "forwarded traffic.")
                for (app, u) in rows {
                    for c in sorted {
                        let counts = u.sinceReset[c]
                        let n = switch (direction, unit == "bytes") {
                        case (.sent, true): counts.sentBytes
                        case (.sent, false): counts.sentPackets
                        case (.received, true): counts.receivedBytes
                        case (.received, false): counts.receivedPackets
                        }
                        // `roaming` only on roaming classes: the series of a machine that never roams stay as they were.
                        if c.roaming {
                            m.sample(count: n, ["app": app, "kind": c.kind.rawValue, "metered": String(c.metered), "roaming": "true"])
                        } else {
                            m.sample(count: n, ["app": app, "kind": c.kind.rawValue, "metered": String(c.metered)])
                        }
                    }
                }
            }
        }
        let budgeted = state.config.apps.compactMap { app in budgetFact(for: app.id).map { (app.id, $0) } }
        m.family("netpermd_app_metered_budget_bytes", .gauge, "Each app's MeteredBudget= per period.")
        for (app, b) in budgeted { m.sample(count: b.limit, ["app": app]) }
        m.family("netpermd_app_metered_used_bytes", .gauge, "Bytes each app with a budget moved over metered links this period.")
        for (app, b) in budgeted { m.sample(count: b.used, ["app": app]) }
    }
}
