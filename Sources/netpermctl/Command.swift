// SPDX-License-Identifier: LGPL-2.1-or-later
/// The commands netpermctl knows and the arguments each takes: the one table that usage errors, `help` and
/// the dispatch in main.swift are all derived from.
enum Command: String, CaseIterable {
    case status, links, query, apps, reload, check, monitor, wait, run, prompts, decide, forget, decisions, agent, scopes, metrics,
         usage, report, ping, help

    /// Positional arguments that must be given, then those that may follow.
    var arguments: (required: [String], optional: [String]) {
        switch self {
        case .status, .apps, .reload, .prompts, .decisions, .agent, .scopes, .metrics, .ping, .wait, .run: return ([], [])
        case .links: return ([], ["IFACE"])
        case .query, .monitor: return ([], ["APP"])
        case .check: return ([], ["PATH"])
        case .decide: return (["APP", "KIND", "allow|deny"], [])
        case .forget: return (["APP"], ["KIND"])
        case .usage: return ([], ["reset", "APP"])
        case .report: return ([], ["clear|on|off", "APP"])
        case .help: return ([], ["COMMAND"])
        }
    }

    /// Options that belong to this command alone.
    var ownOptions: String? {
        switch self {
        case .wait: return "[--app APP] [--timeout SECONDS] [-- COMMAND [ARGS...]]"
        case .run: return "--app APP -- COMMAND [ARGS...]"
        case .decide: return "[--once]"
        case .agent: return "[--notify]"
        case .metrics: return "[--output FILE]"
        case .status, .links, .query, .apps, .reload, .check, .monitor, .prompts, .forget, .decisions, .usage, .report, .ping,
             .help, .scopes:
            return nil
        }
    }

    /// "decide APP KIND allow|deny [--once]"
    var synopsis: String {
        let (required, optional) = arguments
        return ([rawValue] + required + optional.map { "[\($0)]" } + (ownOptions.map { [$0] } ?? []))
            .joined(separator: " ")
    }

    var summary: String {
        switch self {
        case .status: return "readiness, links, network, agents, policy (warnings, error), enforcement"
        case .links: return "the links table; with IFACE one link in detail"
        case .query: return "may APP (default: this program's app) use the network now, and if not, why"
        case .apps: return "every app with its verdict and name (a user: their own and installed ones)"
        case .reload: return "reload the policy now (privileged)"
        case .check: return "validate a policy file and its drop-ins offline"
        case .monitor: return "follow what changes: links, apps (or only APP), the policy"
        case .wait: return "wait until the app may use the network, then run COMMAND (or exit 0)"
        case .run: return "run COMMAND as APP, in a scope of its own the kernel's rules match"
        case .prompts: return "the open prompts (privileged; a user sees their own)"
        case .decide: return "answer for an app and a kind set to ask (privileged; a user for their own)"
        case .forget: return "remove an app's decisions (privileged; a user their own)"
        case .decisions: return "every decision, for everyone and per user (privileged; a user: their own)"
        case .agent: return "answer prompts here, one key each, or as desktop notifications (--notify)"
        case .scopes: return "make the scopes of your apps found by what they run (a user unit runs it)"
        case .metrics: return "the daemon's metrics for Prometheus, or into FILE atomically (privileged)"
        case .usage: return "data used per app and kind of link, budgets; reset counts anew (privileged)"
        case .report: return "where each app went and what was refused; on, off or clear yours"
        case .ping: return "check that the daemon answers"
        case .help: return "all commands, or one command's usage and description"
        }
    }
}
