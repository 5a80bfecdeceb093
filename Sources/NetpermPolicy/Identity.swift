// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// Who is on the other end of a connection, from the kernel's word only (SO_PEERCRED/pidfd, /proc/PID/exe,
/// /proc/PID/cgroup), never from argv or comm, which any process can set.
public struct PeerIdentity: Equatable, Sendable {
    public var pid: Int32
    public var uid: UInt32
    /// Primary and supplementary groups.
    public var gids: [UInt32]
    /// Resolved /proc/PID/exe; nil when it could not be read (see `problem`).
    public var executable: String?
    /// The innermost systemd service or scope the process runs in.
    public var unit: String?
    /// `unit` belongs to a user's own service manager (it runs inside `user@UID.service`), whose user names it:
    /// it matches `UserUnit=`, never `Unit=`.
    public var userUnit: Bool
    /// The rules can follow `unit`'s cgroup (`UnitCgroups.isFollowed`): not when it is deeper than the levels they
    /// look up, or inside another unit's cgroup.
    public var unitFollowed: Bool
    /// The slice `unit` is in (`app.slice`), nil when none: a desktop's own units run in `session.slice` and
    /// `background.slice` (DesktopAppID).
    public var slice: String?
    /// Why something could not be read, e.g. "cannot read /proc/1234/exe: Permission denied".
    public var problem: String?
    /// When `unit` is inside another unit's cgroup (a terminal's tab scope inside the terminal's own, a browser's
    /// sandbox scopes), the unit the rules follow around it, and its slice: the kernel holds the process to that
    /// unit's app, so the answers do too when an app is that unit's (`enclosed`).
    public var enclosing: (unit: String, slice: String?)?
    /// Which transport brought the request, and so what may make it privileged besides uid 0 and the daemon's uid.
    public var via: Transport

    /// The socket takes `AdminGroup=` membership; the system bus takes polkit's word for the one call instead
    /// (docs/DBUS.md), so that a desktop's administrator is one in every panel, and a group no panel knows of
    /// grants nothing there.
    public enum Transport: Equatable, Sendable {
        case socket
        /// `authorized`: polkit allowed the call's action for this caller.
        case bus(authorized: Bool)
        /// The bus face's own subscriber, whose events become broadcast signals: it hears prompts to signal them and
        /// is never asked through, so it is no agent (a caller's own `Subscribe` to prompts over the bus is one).
        case busSignals
    }

    public init(pid: Int32, uid: UInt32, gids: [UInt32], executable: String?, unit: String?, userUnit: Bool = false,
                unitFollowed: Bool = true, slice: String? = nil, problem: String? = nil,
                enclosing: (unit: String, slice: String?)? = nil, via: Transport = .socket) {
        self.pid = pid; self.uid = uid; self.gids = gids
        self.executable = executable; self.unit = unit; self.userUnit = userUnit; self.unitFollowed = unitFollowed
        self.slice = slice; self.problem = problem; self.enclosing = enclosing; self.via = via
    }

    public static func == (a: PeerIdentity, b: PeerIdentity) -> Bool {
        a.pid == b.pid && a.uid == b.uid && a.gids == b.gids && a.executable == b.executable && a.unit == b.unit
            && a.userUnit == b.userUnit && a.unitFollowed == b.unitFollowed && a.slice == b.slice
            && a.problem == b.problem && a.enclosing?.unit == b.enclosing?.unit && a.enclosing?.slice == b.enclosing?.slice
            && a.via == b.via
    }

    /// The same process seen as in its enclosing unit (followed by the rules), when it has one.
    public var enclosed: PeerIdentity? {
        guard let enclosing else { return nil }
        var p = self
        p.unit = enclosing.unit
        p.slice = enclosing.slice
        p.unitFollowed = true
        p.enclosing = nil
        return p
    }

    public func write(to s: inout JSONWriter) {
        s.field("pid", Int(pid))
        s.field("uid", Int(uid))
        s.field("executable", executable)
        s.field("unit", unit)
        if userUnit { s.field("user_unit", true) }
        if let problem { s.field("problem", problem) }
    }
}

/// How an app was recognised.
public enum MatchedBy: String, Sendable {
    case executable, unit, user
    /// A desktop app, by the application ID in its unit's name (DesktopAppID).
    case desktop
    /// No `[App]` matched: `[Defaults]` under an id derived from the executable.
    case defaults = "default"
    /// A privileged caller named the app.
    case name
}

public struct AppMatch: Equatable, Sendable {
    public var id: String
    public var matchedBy: MatchedBy
    /// nil for an app that only `[Defaults]` covers.
    public var app: AppPolicy?

    public init(id: String, matchedBy: MatchedBy, app: AppPolicy?) { self.id = id; self.matchedBy = matchedBy; self.app = app }
}
