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
    /// Why something could not be read, e.g. "cannot read /proc/1234/exe: Permission denied".
    public var problem: String?

    public init(pid: Int32, uid: UInt32, gids: [UInt32], executable: String?, unit: String?, problem: String? = nil) {
        self.pid = pid; self.uid = uid; self.gids = gids
        self.executable = executable; self.unit = unit; self.problem = problem
    }

    /// The innermost service or scope in a /proc/PID/cgroup text (cgroup v2 line "0::/path", or the
    /// name=systemd line on hybrid hierarchies).
    public static func unit(fromCgroup text: String) -> String? {
        var path: Substring?
        for line in text.split(separator: "\n") {
            // "hierarchy-ID:controllers:path"
            let f = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard f.count == 3 else { continue }
            if f[0] == "0" && f[1].isEmpty { path = f[2]; break }
            if f[1] == "name=systemd" { path = f[2] }
        }
        guard let path else { return nil }
        for part in path.split(separator: "/").reversed() where part.hasSuffix(".service") || part.hasSuffix(".scope") {
            return String(part)
        }
        return nil
    }

    public func write(to s: inout JSONWriter) {
        s.field("pid", Int(pid))
        s.field("uid", Int(uid))
        s.field("executable", executable)
        s.field("unit", unit)
        if let problem { s.field("problem", problem) }
    }
}

/// How an app was recognised.
public enum MatchedBy: String, Sendable {
    case executable, unit, user
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
