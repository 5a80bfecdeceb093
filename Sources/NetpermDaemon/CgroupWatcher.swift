import NetpermCore
import NetpermHost
import NetpermIO

/// Follows the units' cgroups (inotify on the hierarchy's root, the slices in it, each user manager and the slices
/// in that, as UnitCgroupScanner walks them): a unit's rules need
/// its cgroup to exist when they are loaded, and a cgroup re-created at the same path is a new one to the kernel.
/// A burst (a boot starting many units) is one rescan after `debounceMicroseconds`.
public final class CgroupWatcher {
    static let debounceMicroseconds: UInt64 = 10_000

    private let loop: EventLoop
    private let scanner = UnitCgroupScanner()
    private var watches: [String: TimerSource] = [:]
    private var timer: TimerSource?
    private let changed: (UnitCgroups) -> Void

    public init(loop: EventLoop, changed: @escaping (UnitCgroups) -> Void) {
        self.loop = loop
        self.changed = changed
        if scanner.mountPoint == nil { Log.info("no cgroup v2 hierarchy: Unit= apps cannot be enforced") }
        rescan()
    }

    private func rescan() {
        timer = nil
        let (cgroups, dirs) = scanner.scan()
        let wanted = Set(dirs)
        for (dir, w) in watches where !wanted.contains(dir) { w.cancel(); watches[dir] = nil }
        for dir in dirs where watches[dir] == nil {
            watches[dir] = try? loop.watch(directory: dir) { [unowned self] name in
                // Units of either manager, and user managers (`user@UID.service`) coming and going.
                if let name, !UnitCgroups.isSlice(name) && !UnitCgroups.isUnit(name) { return }
                self.schedule()
            }
        }
        changed(cgroups)
    }

    private func schedule() {
        guard timer == nil else { return }
        timer = try? loop.addTimer(afterMicroseconds: Self.debounceMicroseconds) { [unowned self] in self.rescan() }
    }
}
