// SPDX-License-Identifier: LGPL-2.1-or-later
/// What persons' answers go through: the prompts' desk (Engine+Prompts.swift) and the lasting decisions being
/// written (DecisionCommits.swift).
struct Answering {
    /// What prompting keeps beside the open prompts (`state.prompts`).
    var prompting = PromptDesk()
    /// Lasting decisions being written, and decision requests that came meanwhile.
    var commits = DecisionCommits()
}
