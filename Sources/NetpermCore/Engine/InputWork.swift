// SPDX-License-Identifier: LGPL-2.1-or-later
/// The input being handled: its effects, its events not yet sent, and what `settle()` must redo for it. Reset
/// by `settle()` (and `handle` for the effects), so nothing of one input reaches the next.
struct InputWork {
    /// The effects of the input being handled.
    var effects = Effects()
    /// What settle() must redo: the permissions of some apps (decisions) or of every app (policy, agents, budgets),
    /// or only the network's effect.
    var permissions = PermissionChange.none
    var network = false
    /// Events of this input not yet sent, in order.
    var events: [Event] = []
    /// Kernel messages were lost: every subscriber gets a `resync` once this input's events are out.
    var resyncAll = false
    /// An input that may change which apps `APPS` lists came: `mine` subscribers' lists are made again in `settle`.
    var listingStale = false
}
