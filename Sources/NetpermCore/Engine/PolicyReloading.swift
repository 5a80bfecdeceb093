// SPDX-License-Identifier: LGPL-2.1-or-later
/// Policy loads and what the one being taken brought.
struct PolicyReloading {
    /// Policy loads run away from the event loop, one at a time: the files read while one is in flight may
    /// predate a request made meanwhile (an admin edits, then asks for a reload), so that request waits for the
    /// next load. Its waiters are the RELOAD requesters each load answers.
    var loads = InFlight<ConnectionID>()
    /// What the policy load being taken brought, made away from the loop (ReloadPreparation.swift): kept for the
    /// input that delivers it only.
    var prepared: PreparedReload?
}
