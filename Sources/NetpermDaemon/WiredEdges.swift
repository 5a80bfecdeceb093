// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO

/// The edges the daemon wires in after making the interpreter (each owned by an object of its own there): what the
/// interpreter calls for their effects. The defaults do nothing, as in the tests that give none.
struct WiredEdges {
    /// Tells the service manager (sd_notify).
    var notify: (NotifyMessage) -> Void
    /// REACH's route lookups (NetlinkWatcher.egress(toward:)): the destination's egress, or why the kernel could not
    /// be asked.
    var lookUpRoute: (RouteQuestion) -> Result<Egress?, EdgeError> = { _ in .success(nil) }
    /// Looks for new units now rather than after the scan's pause (CgroupWatcher.scanSoon).
    var scanCgroupsSoon: () -> Void = {}
    /// Processes found by the bus names they own (Effect.checkClaim).
    var claims = NameClaims()
    /// Which programs the exec watcher looks for (ExecWatcher.use).
    var watchExecs: (ExecIndex) -> Void = { _ in }
    /// Makes a scope of a user's manager for a process (ScopeMaker.make): `done` gets nil, or why not, on the loop's
    /// thread, never inside this call.
    var makeScope: (ScopeRequest, @escaping (EdgeError?) -> Void) -> Void = { request, done in
        done(EdgeError(.makeScope, "no way to reach user managers"))
    }
    /// Where units are named as they are made (UnitNamer.use).
    var nameUnits: (UnitNaming?) -> Void = { _ in }
}
