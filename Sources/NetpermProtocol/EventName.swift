// SPDX-License-Identifier: LGPL-2.1-or-later
/// What a subscriber can ask to hear about.
public enum Topic: String, Sendable, CaseIterable {
    case links, apps, policy
    /// Prompts for undecided apps; privileged subscribers of this topic are the agents.
    case prompts
    /// The subscriber's own app only, whatever its privilege: what a process that wants its own verdict (the GLib
    /// module) listens to, without a privileged one hearing every app's events.
    case own = "self"
    /// Apps crossing 80% and 100% of their metered budget (docs/USAGE.md): the subscriber's own app, or (privileged)
    /// every app.
    case usage
    /// Every app `APPS` lists for the subscriber, as its uid has them (a privileged one: as everyone has them):
    /// what a person's settings window follows (their own decisions, others' answers, reloads, budgets), where
    /// `apps` gives an unprivileged subscriber its own app alone.
    case mine
    /// Scopes wanted for the subscriber's own uid's apps found by what they run (docs/APPS.md): the user's own
    /// `netpermctl scopes` makes them through that user's manager, which a daemon without root cannot reach.
    case scopes

    /// What `SUBSCRIBE` alone means: prompts only for those who ask to be agents.
    public static let defaults: Set<Topic> = [.links, .apps, .policy]
}

/// The `event` member of an event line: what the daemon writes and what clients match on.
public enum EventName: String, Sendable, CaseIterable {
    case snapshot, link, app, policy, prompt, usage
    case promptExpired = "prompt-expired"
    case promptAnswered = "prompt-answered"
    case promptWithdrawn = "prompt-withdrawn"
    /// To one subscriber of `scopes`: make this scope for a process of its uid, then say `SCOPE ID made|failed`.
    case scopeWanted = "scope-wanted"
    case stopping
    /// To a `mine` subscriber: what its apps sent and received moved (their USAGE entries, as it may read them).
    case counted
    /// The whole state again, as in the snapshot, after events were lost: the kernel's messages (a netlink
    /// overrun) or the subscriber's own (it fell too far behind and its backlog was dropped).
    case resync
    /// Written by the transport itself, last, to a subscriber it drops for not reading at all.
    case overflow
    /// A topic the subscriber may no longer have, taken off its subscription: a user's agent when a reload turns
    /// `UserDecisions=` off.
    case unsubscribed
}

/// Why a subscriber gets a `resync` event.
public enum ResyncReason: String, Sendable {
    /// The daemon's netlink socket overran: kernel messages were lost and everything was read again, so the
    /// events since the last picture are only the net change.
    case netlinkOverrun = "netlink-overrun"
    /// The subscriber fell too far behind: the events it had not read were dropped (`dropped` counts them).
    case fellBehind = "fell-behind"
    /// The apps `APPS` lists for a `mine` subscriber changed (a reload, a desktop app installed, started or gone):
    /// no app event says that an app left the list, so the whole list comes again.
    case listed
}

/// Why a prompt closed unanswered before it expired.
public enum WithdrawReason: String, Sendable {
    /// Every process that asked has exited: nobody waits for the answer.
    case askerExited = "asker-exited"
    /// The person closed the question without answering it (`ANSWER ID dismiss`): not now.
    case dismissed
}
