import NetpermCore
import NetpermIO

/// Finds the units' cgroups under the cgroup v2 hierarchy: every system `*.service` and `*.scope` in a top-level
/// slice (level 2) or in a slice of one (level 3); and below each user manager (`user@UID.service`, level 3) that
/// user's own units at its root (4), in its slices (5) and in their slices (6): `UnitCgroups.userLevels`.
public struct UnitCgroupScanner {
    /// Where the hierarchy is mounted (from /proc/self/mountinfo); nil when there is none.
    public let mountPoint: String?

    public init(mountinfo: String? = FD.readText("/proc/self/mountinfo")) {
        mountPoint = mountinfo.flatMap(UnitCgroups.unifiedMountPoint(mountinfo:))
    }

    /// The cgroups now, and the directories whose entries appearing or going changes them (the root, the slices
    /// walked and the user managers).
    public func scan() -> (cgroups: UnitCgroups, directories: [String]) {
        guard let root = mountPoint else { return (UnitCgroups(), []) }
        var units: [UnitCgroup] = []
        var dirs = [root]
        func id(_ path: String) -> UInt64 { (try? Files.fileID(root + "/" + path).inode) ?? 0 }
        func list(_ path: String) -> [String] { (try? Files.list(root + "/" + path)) ?? [] }
        func unit(_ parent: String, _ name: String, level: Int, user: Bool) {
            let path = parent + "/" + name
            units.append(UnitCgroup(path: path, level: level, unit: name, id: id(path), user: user))
        }
        /// A user manager's subtree: units, and slices holding units, down to the deepest user level.
        func walkUser(_ dir: String, level: Int) {
            dirs.append(root + "/" + dir)
            for name in list(dir) {
                if UnitCgroups.isUnit(name) {
                    unit(dir, name, level: level, user: true)
                } else if UnitCgroups.isSlice(name), level < UnitCgroups.userLevels.last! {
                    walkUser(dir + "/" + name, level: level + 1)
                }
            }
        }
        for top in list("") where UnitCgroups.isSlice(top) {
            dirs.append(root + "/" + top)
            for name in list(top) {
                if UnitCgroups.isMatchedUnit(name) {
                    unit(top, name, level: 2, user: false)
                } else if UnitCgroups.isSlice(name) {
                    let slice = top + "/" + name
                    dirs.append(root + "/" + slice)
                    for u in list(slice) {
                        if UnitCgroups.isMatchedUnit(u) {
                            unit(slice, u, level: 3, user: false)
                        } else if UnitCgroups.isUserManager(u) {
                            walkUser(slice + "/" + u, level: 4)
                        }
                    }
                }
            }
        }
        return (UnitCgroups(nftRoot: UnitCgroups.nftRoot(forMountPoint: root), units: units), dirs)
    }
}
