// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore

/// Processes a user's `netpermctl scopes` says own an installed app's well-known name on their session bus
/// (Effect.checkClaim; docs/APPS.md, "Apps known by what they run"): taken as that app only where the kernel agrees
/// the process is that user's and runs where a desktop starts apps without a unit of their own (SessionPlace), and
/// only if it is alive after those reads, so that nothing read was another process's with a reused pid. A few small
/// reads of /proc, on the loop, at the pace of the user's bus names.
public struct NameClaims {
    private let proc: ProcessReading

    public init(proc: ProcessReading = ProcFiles()) { self.proc = proc }

    /// The process as found, or nil: gone, another uid's (its cgroup's user manager or session), or in a unit of its
    /// own already.
    public func check(_ claim: ProcessClaim) -> ExecFound? {
        guard let pin = proc.pin(claim.pid) else { return nil }
        defer { proc.release(pin) }
        guard let text = proc.cgroup(claim.pid), let (uid, place) = SessionPlace.of(cgroup: text), uid == claim.uid
        else { return nil }
        let path = proc.executablePath(claim.pid)
        guard proc.isAlive(pin) else { return nil }
        return ExecFound(pid: claim.pid, uid: uid, app: claim.app, place: place, executable: path)
    }
}
