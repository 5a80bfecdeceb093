// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// One `[App NAME]` section: who the app is and what it may use.
public struct AppPolicy: Equatable, Sendable {
    public var id: String
    /// Absolute paths or globs, matched against /proc/PID/exe.
    public var executables: [Glob] = []
    /// systemd unit names or globs, matched against the unit from /proc/PID/cgroup: `units` against the system
    /// manager's, `userUnits` against those of users' own managers.
    public var units: [Glob] = []
    public var userUnits: [Glob] = []
    public var uids: [UInt32] = []
    /// `DesktopId=`: desktop application IDs whose apps (DesktopAppID, in a user's manager) are this app. With
    /// `[Defaults] DesktopApps=yes` an app whose own id is a valid application ID is that desktop app too.
    public var desktopIDs: [String] = []
    /// Not from the policy: a desktop app found running or installed (`Config.addingDesktopApps`), with
    /// `[Defaults]`' permissions.
    public var discovered = false
    public var permissions = PartialPermissions()
    /// `MeteredBudget=`: nil when unset ([Defaults]' applies).
    public var meteredBudget: MeteredBudget?

    /// Its budget per period: its own `MeteredBudget=`, or `defaults` (`[Defaults]`') where it sets none; nil: none.
    public func meteredBudget(over defaults: UInt64?) -> UInt64? { Self.meteredBudget(meteredBudget, over: defaults) }

    /// The same of a `MeteredBudget=` read by itself: the engine reads it off the policy it holds field by field
    /// (a method called on an `[App]` in there ran on a copy of the whole section).
    public static func meteredBudget(_ own: MeteredBudget?, over defaults: UInt64?) -> UInt64? {
        switch own {
        case nil: return defaults
        case .unlimited?: return nil
        case let .bytes(n)?: return n
        }
    }
    /// Where the section was first defined, for error messages.
    public var path: String
    public var line: Int

    public init(id: String, path: String, line: Int) { self.id = id; self.path = path; self.line = line }

    public var hasIdentity: Bool {
        !executables.isEmpty || !units.isEmpty || !userUnits.isEmpty || !uids.isEmpty || !desktopIDs.isEmpty
    }

    /// A desktop app no policy line names: its id is its application ID, and `[Defaults]` decide for it.
    public init(discovered id: String) {
        self.init(id: id, path: "", line: 0)
        desktopIDs = [id]
        discovered = true
    }

    /// App ids start with a letter, then letters, digits, '.', '-', '_' (requests check them alike).
    public static func isValidID(_ s: String) -> Bool { AppName.isValid(s) }

    package static func isLetter(_ c: Unicode.Scalar) -> Bool { AppName.isLetter(c) }
}

/// Resolves user and group names; the daemon uses the system's databases, tests inject their own.
public protocol AccountResolver {
    func uid(forUser name: String) -> UInt32?
    func gid(forGroup name: String) -> UInt32?
}

/// An app's own `MeteredBudget=`.
public enum MeteredBudget: Equatable, Sendable {
    /// `infinity`: none, whatever `[Defaults]` say.
    case unlimited
    /// Bytes per period over metered links, both ways.
    case bytes(UInt64)
}
