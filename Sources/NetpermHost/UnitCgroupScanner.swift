// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO
import NetpermProtocol

/// Finds the units' cgroups under the cgroup v2 hierarchy: every system `*.service` and `*.scope` in a top-level
/// slice (level 2) or in the slices below it, down to `UnitCgroups.deepest`; and below each user manager
/// (`user@UID.service`, level 3) that user's own units at its root (4), in its slices (5) and in their slices (6):
/// `UnitCgroups.levels`, `UnitCgroups.userLevels`.
///
/// It walks the hierarchy by descriptors and the names' bytes, never by paths built from decoded names (a name
/// need not be UTF-8), and keeps a descriptor of every unit cgroup it found and every directory it walked, by the
/// cgroup's id (its inode number, which the kernel never gives again). nft is given a unit's descriptor
/// (`UnitCgroup.handle`), so the rules name a cgroup however it is named and however soon it goes; a directory's
/// descriptor is what its watch follows, so a slice removed and made again is a new one, watched again.
///
/// Unchecked Sendable: a scan may run on a thread of its own (CgroupWatcher), one at a time, and nothing else
/// touches the scanner until its result is back.
public final class UnitCgroupScanner: @unchecked Sendable {
    /// A user's delegated tree is theirs to fill: units past this many in one user manager are left out (each
    /// costs the daemon a descriptor; users' units only narrow what their uid may do, so the user loses only
    /// their own narrowing).
    public static let maxUnitsPerUser = 1024

    /// Where the hierarchy is mounted (from /proc/self/mountinfo); nil when there is none.
    public let mountPoint: String?

    struct Held {
        var fd: Int32
        var unit: Bool
    }
    /// Every directory the last scan found, by cgroup id.
    private var held: [UInt64: Held] = [:]
    /// Descriptors of unit cgroups that are gone, kept until no rules that may be loaded again name them
    /// (`release(keeping:)`): closed, their numbers would be another file's.
    private var retired: [Int32] = []
    /// The user managers whose units are over the limit, said once until they are under it again.
    private var crowded: Set<String> = []
    private var problems = RateLimitedLog(intervalMicroseconds: 60_000_000)

    public init(mountinfo: String? = FD.readText("/proc/self/mountinfo")) {
        mountPoint = mountinfo.flatMap(UnitCgroups.unifiedMountPoint(mountinfo:))
    }

    deinit {
        if let top { FD.close(top.fd) }
        for h in held.values { FD.close(h.fd) }
        for fd in retired { FD.close(fd) }
    }

    /// A directory this scan found: its id and the descriptor the daemon holds; and, where the rules follow units
    /// made in it, what they would be, so that its watch can name one at once (CgroupWatcher).
    public struct Found: Equatable, Sendable {
        public var id: UInt64
        public var fd: Int32
        public var place: UnitPlace? = nil
    }

    /// Where a unit made in a directory stands: the directory's path below the hierarchy's root, the unit's level,
    /// and whether it is a user's own (below `user@UID.service`: `uid`).
    public struct UnitPlace: Equatable, Sendable {
        public var path: String
        public var level: Int
        public var uid: UInt32?

        /// The unit cgroup `name` (of id `id`) made here is, if the rules follow it: a service or scope, and below
        /// a user manager any of that user's units.
        public func unit(_ name: String, id: UInt64) -> UnitCgroup? {
            guard uid == nil ? UnitCgroups.isMatchedUnit(name) : UnitCgroups.isUnit(name) else { return nil }
            return UnitCgroup(path: path + "/" + name, level: level, unit: name, id: id, user: uid != nil)
        }
    }

    /// What a scan found: the cgroups now, and the directories whose entries appearing or going changes them (the
    /// root, the slices walked and the user managers).
    public struct Scan: Sendable {
        public var cgroups: UnitCgroups
        public var directories: [Found]
    }

    public func scan() -> Scan {
        guard let root = mountPoint else { return Scan(cgroups: UnitCgroups(), directories: []) }
        var walk = UnitCgroupWalk(held: held, problems: problems)
        let (top, error) = rootDirectory(root)
        if let top {
            walk.walkRoot(top)
        } else {
            walk.problems.emit(4, "cgroups: cannot open \(root)\(error.map { " (\($0))" } ?? ""): no unit is followed")
        }
        problems = walk.problems
        for manager in walk.crowded.subtracting(crowded) {
            Log.warning("cgroups: \(SafeText.excerpt(manager, maxBytes: 100)) has more than \(Self.maxUnitsPerUser) units: "
                + "the first \(Self.maxUnitsPerUser) in name order are followed, the rest are left out of the rules")
        }
        crowded = walk.crowded
        // Gone: a directory's descriptor closes now; a unit's once no rules in force name it.
        for (id, h) in held where walk.seen[id] == nil {
            if h.unit { retired.append(h.fd) } else { FD.close(h.fd) }
        }
        held = walk.seen
        return Scan(cgroups: UnitCgroups(nftRoot: UnitCgroups.nftRoot(forMountPoint: root), units: walk.units),
                    directories: walk.dirs)
    }

    /// The hierarchy's root, opened once (it never goes).
    private func rootDirectory(_ root: String) -> (Found?, Errno?) {
        if let top { return (top, nil) }
        let fd: Int32
        do { fd = try Directory.open(root) } catch { return (nil, error) }
        guard let id = try? Directory.inode(fd) else {
            FD.close(fd)
            return (nil, nil)
        }
        top = Found(id: id, fd: fd)
        return (top, nil)
    }
    private var top: Found?

    /// Closes the descriptors of unit cgroups that are gone, but for those `inForce` names (the rules in force
    /// name them, and a repair may load those rules again).
    public func release(keeping inForce: Set<Int32>) {
        guard !retired.isEmpty else { return }
        retired.removeAll { fd in
            guard !inForce.contains(fd) else { return false }
            FD.close(fd)
            return true
        }
    }
}
