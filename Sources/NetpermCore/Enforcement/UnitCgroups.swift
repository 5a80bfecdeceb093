// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// One cgroup of a unit that exists now: a service or scope of the system's manager, or (`user`) of a user's own
/// manager (`user@UID.service`).
public struct UnitCgroup: Equatable, Hashable, Sendable {
    /// Relative to the root of the cgroup v2 hierarchy, as /proc/PID/cgroup names it: `system.slice/cron.service`.
    public var path: String
    /// Its depth below the root (`system.slice/cron.service` is 2): what `socket cgroupv2 level N` matches at.
    public var level: Int
    /// The unit's name, the path's last component: what `Unit=` (or, for a user unit, `UserUnit=`) globs are
    /// matched against.
    public var unit: String
    /// A unit of a user's own service manager, below `user@UID.service`: its user named it as they liked, so its
    /// rules may only narrow what the uid may do (Ruleset).
    public var user: Bool
    /// The cgroup's id (its directory's inode number). nft turns a path into this id when the rules are loaded,
    /// so a cgroup removed and made again at the same path (a service restarted) needs the rules loaded again
    /// even though their text is the same.
    public var id: UInt64
    /// A descriptor of the cgroup's directory that the daemon holds open, nil when it has none: nft is then given
    /// `/proc/self/fd/N` instead of the path (`UnitCgroups.nftPath`). A path stops naming the cgroup the moment
    /// it is removed, and every load that named it failed as a whole (a scope gone between the scan and the load,
    /// 89 loads in 20 s of churn); a name that is not UTF-8 has no path the daemon can write (every load failed
    /// while one existed). The descriptor names the cgroup until it is closed, whatever its name, even once it is
    /// gone, so neither can fail a load.
    public var handle: Int32?

    /// The slice the unit is in (`app.slice`), nil when none.
    public var slice: String? {
        let parts = path.split(separator: "/")
        guard parts.count >= 2, parts[parts.count - 2].hasSuffix(".slice") else { return nil }
        return String(parts[parts.count - 2])
    }

    public init(path: String, level: Int, unit: String, id: UInt64 = 0, user: Bool = false, handle: Int32? = nil) {
        self.path = path; self.level = level; self.unit = unit; self.id = id; self.user = user; self.handle = handle
    }
}

/// The unit cgroups that exist, as the edge found them under the cgroup v2 hierarchy (docs/ENFORCEMENT.md).
public struct UnitCgroups: Equatable, Sendable {
    /// How nft names the hierarchy's root: nft resolves a cgroup path relative to /sys/fs/cgroup, so this is ""
    /// where the unified hierarchy is mounted there, "unified" on a hybrid system. nil: no cgroup v2 hierarchy
    /// was found, and no unit can be matched.
    public var nftRoot: String?
    /// Sorted by path.
    public var units: [UnitCgroup]

    public init(nftRoot: String? = nil, units: [UnitCgroup] = []) {
        self.nftRoot = nftRoot
        self.units = units.sorted { $0.path < $1.path }
    }

    /// The levels `socket cgroupv2 level N` rules exist for: units directly in a top-level slice
    /// (`system.slice/x.service`), in a slice below it (`system.slice/system-getty.slice/getty@tty1.service`) and in
    /// slices below that, down to `deepest` (`Slice=system-a-b.slice` puts a unit at level 4). A level costs a
    /// lookup per packet only while some unit of a policy's app is at it (Ruleset.lookups).
    public static let levels = Array(2...deepest)

    /// The deepest level a unit is followed at, the system's as the users' (`userLevels`): every level is one more
    /// map per kind, and no system or desktop was seen nesting deeper. A unit deeper still, or inside another
    /// unit's cgroup, is not followed (`isFollowed`).
    public static let deepest = 6

    /// The levels of users' own units, below `user.slice/user-UID.slice/user@UID.service` (level 3): units at its
    /// root (4: `Slice=-.slice`, the manager's `init.scope`), in its slices (5: `app.slice/app-gnome-firefox-1234.scope`,
    /// `session.slice/pipewire.service`, `background.slice/...`) and in one slice more (6: desktops' per-app slices,
    /// `app.slice/app-org.gnome.Terminal.slice/vte-spawn-X.scope`). Deeper units are not followed: each level is a
    /// lookup per packet in every kind's chain, and no desktop was seen nesting deeper.
    public static let userLevels = Array(4...deepest)

    /// The path nft is given for a cgroup: through the daemon's descriptor of it when it holds one (nft resolves a
    /// cgroup path as "/sys/fs/cgroup/" + path, and libnftables runs in the daemon, so `/proc/self` is the
    /// daemon), else its path below the hierarchy.
    public func nftPath(_ c: UnitCgroup) -> String? {
        guard let nftRoot else { return nil }
        if let fd = c.handle { return Self.handlePrefix + String(fd) }
        return nftRoot.isEmpty ? c.path : nftRoot + "/" + c.path
    }

    static let handlePrefix = "../../../proc/self/fd/"

    /// Whether nft is given this path through a descriptor (`nftPath`).
    static func isHandle(_ path: String) -> Bool { path.hasPrefix(handlePrefix) }

    /// Whether the rules follow the innermost unit of a cgroup path (as /proc/PID/cgroup names it:
    /// `/system.slice/cron.service`): a system unit with only slices above it, at one of `levels`, or a unit of a
    /// user's manager (`SLICE/SLICE/user@UID.service`, at level 3) with only slices between, at one of
    /// `userLevels`; what UnitCgroupScanner walks. A unit deeper, or inside another unit's cgroup (a service's
    /// delegated subtree), is not.
    public static func isFollowed(path: some StringProtocol) -> Bool {
        let parts = path.split(separator: "/")
        guard let i = parts.lastIndex(where: { isUnit($0) }) else { return false }
        if let m = parts[..<i].firstIndex(where: { isUserManager($0) }) {
            return m == 2 && parts[..<m].allSatisfy { isSlice($0) } && parts[(m + 1)..<i].allSatisfy { isSlice($0) }
                && userLevels.contains(i + 1)
        }
        return isMatchedUnit(parts[i]) && parts[..<i].allSatisfy { isSlice($0) } && levels.contains(i + 1)
    }

    /// Whether a directory name below a slice is a unit whose cgroup is matched: a service or scope of the system
    /// manager. `user@UID.service` is not one: what runs below it are a user's own units, which any user may name
    /// as they like (the daemon's `Unit=` does not match them either).
    public static func isMatchedUnit(_ name: some StringProtocol) -> Bool {
        isUnit(name) && !isUserManager(name)
    }

    /// A service or scope, of any manager.
    public static func isUnit(_ name: some StringProtocol) -> Bool { name.hasSuffix(".service") || name.hasSuffix(".scope") }

    /// A user's service manager, `user@UID.service`: its subtree holds that user's own units.
    public static func isUserManager(_ name: some StringProtocol) -> Bool {
        name.hasPrefix("user@") && name.hasSuffix(".service")
    }

    /// Slices walked for units: every top-level `*.slice`, and the slices in them (`system-getty.slice`), down to
    /// the deepest level followed.
    public static func isSlice(_ name: some StringProtocol) -> Bool { name.hasSuffix(".slice") }

    /// The mount point of the cgroup v2 hierarchy from /proc/self/mountinfo: the first `cgroup2` mount of the
    /// hierarchy's root (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid system).
    public static func unifiedMountPoint(mountinfo: String) -> String? {
        for line in mountinfo.split(separator: "\n") {
            // "36 35 0:30 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate"
            let halves = line.split(separator: " - ", maxSplits: 1)
            guard halves.count == 2, halves[1].split(separator: " ").first == "cgroup2" else { continue }
            let f = halves[0].split(separator: " ")
            guard f.count >= 5, f[3] == "/" else { continue }
            return unescapeMountinfo(String(f[4]))
        }
        return nil
    }

    /// nft resolves cgroup paths as "/sys/fs/cgroup/" + path: a hierarchy mounted elsewhere is reached from there.
    public static func nftRoot(forMountPoint mp: String) -> String {
        let base = "/sys/fs/cgroup"
        if mp == base { return "" }
        if mp.hasPrefix(base + "/") { return String(mp.dropFirst(base.count + 1)) }
        return "../../.." + mp
    }

    /// mountinfo writes space, tab, newline and backslash as octal escapes (`\040`).
    static func unescapeMountinfo(_ s: String) -> String {
        BackslashEscapes.decode(s, radix: 8, digits: 3, strict: false) ?? s
    }
}
