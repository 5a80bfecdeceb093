import NetpermCore
import NetpermIO

/// Finds the system units' cgroups under the cgroup v2 hierarchy: every `*.service` and `*.scope` in a top-level
/// slice (level 2) or in a slice of one (level 3), except users' own managers (`user@UID.service`).
public struct UnitCgroupScanner {
    /// Where the hierarchy is mounted (from /proc/self/mountinfo); nil when there is none.
    public let mountPoint: String?

    public init(mountinfo: String? = FD.readText("/proc/self/mountinfo")) {
        mountPoint = mountinfo.flatMap(UnitCgroups.unifiedMountPoint(mountinfo:))
    }

    /// The cgroups now, and the directories whose entries appearing or going changes them (the root and the
    /// slices walked).
    public func scan() -> (cgroups: UnitCgroups, directories: [String]) {
        guard let root = mountPoint else { return (UnitCgroups(), []) }
        var units: [UnitCgroup] = []
        var dirs = [root]
        func id(_ path: String) -> UInt64 { (try? Files.fileID(root + "/" + path).inode) ?? 0 }
        for top in ((try? Files.list(root)) ?? []) where UnitCgroups.isSlice(top) {
            dirs.append(root + "/" + top)
            for name in ((try? Files.list(root + "/" + top)) ?? []) {
                if UnitCgroups.isMatchedUnit(name) {
                    units.append(UnitCgroup(path: top + "/" + name, level: 2, unit: name, id: id(top + "/" + name)))
                } else if UnitCgroups.isSlice(name) {
                    let slice = top + "/" + name
                    dirs.append(root + "/" + slice)
                    for unit in ((try? Files.list(root + "/" + slice)) ?? []) where UnitCgroups.isMatchedUnit(unit) {
                        units.append(UnitCgroup(path: slice + "/" + unit, level: 3, unit: unit,
                                                id: id(slice + "/" + unit)))
                    }
                }
            }
        }
        return (UnitCgroups(nftRoot: UnitCgroups.nftRoot(forMountPoint: root), units: units), dirs)
    }
}
