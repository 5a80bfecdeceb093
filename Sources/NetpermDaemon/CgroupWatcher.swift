// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermHost
import NetpermIO

/// Follows the units' cgroups (inotify on the hierarchy's root, the slices in it, each user manager and the slices
/// in that, as UnitCgroupScanner walks them): a unit's rules need
/// its cgroup to exist when they are loaded, and a cgroup re-created at the same path is a new one to the kernel.
/// A burst (a boot starting many units) is one rescan after `debounceMicroseconds`.
///
/// Each directory is watched through the scanner's descriptor of it, by its cgroup id: a slice removed and made
/// again (even within one rescan's delay) is another directory, watched anew; a watch kept by path stayed on the
/// one that went, and the new one's units were never seen.
///
/// Scans after the first run on a thread of their own (OffLoop): under churn every syscall on the hierarchy waits
/// for the kernel's cgroup locks (5,000 scopes made and removed in a loop: 30-1,100 ms a scan), and clients must be
/// answered meanwhile. While changes keep coming, a scan's result is handed to the engine at most every
/// `2 × what handing over the last one cost` (at least the debounce, at most a second): the rules of thousands of
/// cgroups take hundreds of milliseconds to load, and the loop must not spend all its time on them.
public final class CgroupWatcher {
    static let debounceMicroseconds: UInt64 = 10_000
    static let maxSpacingMicroseconds: UInt64 = 1_000_000

    private let loop: EventLoop
    private let scanner = UnitCgroupScanner()
    private let thread: OffLoop<UnitCgroupScanner.Scan>?
    private var watches: [UInt64: TimerSource] = [:]
    private var timer: TimerSource?
    /// A change came while a scan ran: scan again once it is handed over.
    private var again = false
    private let changed: (UnitCgroups) -> Void
    /// The unit descriptors the rules in force name (`inForce(_:)`): kept open after their cgroup went.
    private var named: Set<Int32> = []
    /// When the next scan may start (monotonic µs): twice what handing over the last one cost the loop after it.
    private var notBefore: UInt64 = 0

    public init(loop: EventLoop, changed: @escaping (UnitCgroups) -> Void) {
        self.loop = loop
        self.changed = changed
        if scanner.mountPoint == nil { Log.info("no cgroup v2 hierarchy: Unit= apps cannot be enforced") }
        do { thread = try OffLoop(loop: loop) } catch {
            Log.warning("cannot set up scanning cgroups off the loop (\(error)); scans will run on the loop")
            thread = nil
        }
        // The first on the loop: the engine knows the units before it loads its first rules.
        apply(scanner.scan())
    }

    private func rescan() {
        timer = nil
        guard let thread else { return apply(scanner.scan()) }
        do {
            try thread.run({ [scanner] in scanner.scan() }) { [unowned self] result in self.apply(result) }
        } catch {
            Log.warning("cannot start a thread to scan cgroups (\(error)); scanning on the loop")
            apply(scanner.scan())
        }
    }

    private func apply(_ scan: UnitCgroupScanner.Scan) {
        let wanted = Set(scan.directories.map(\.id))
        for (id, w) in watches where !wanted.contains(id) { w.cancel(); watches[id] = nil }
        var added = false
        for dir in scan.directories where watches[dir.id] == nil {
            watches[dir.id] = try? loop.watch(directory: "/proc/self/fd/\(dir.fd)") { [unowned self] name in
                // Units of either manager, and user managers (`user@UID.service`) coming and going.
                if let name, !UnitCgroups.isSlice(name) && !UnitCgroups.isUnit(name) { return }
                self.schedule()
            }
            added = true
        }
        let start = Clock.monotonicMicroseconds()
        changed(scan.cgroups)
        let end = Clock.monotonicMicroseconds()
        notBefore = end + min(Self.maxSpacingMicroseconds, max(Self.debounceMicroseconds, 2 * (end - start)))
        scanner.release(keeping: named)
        // What was made in a directory between its listing and its watch is seen by one more scan.
        if added || again {
            again = false
            schedule()
        }
    }

    /// The rules now in force name these descriptors (none: no rules): the descriptors of cgroups gone since that
    /// they do not name are closed (once no scan runs: the scanner is the thread's while it does).
    public func inForce(_ handles: Set<Int32>) {
        named = handles
        if thread?.busy != true { scanner.release(keeping: handles) }
    }

    private func schedule() {
        guard timer == nil else { return }
        guard thread?.busy != true else { again = true; return }
        let now = Clock.monotonicMicroseconds()
        let delay = max(Self.debounceMicroseconds, notBefore > now ? notBefore - now : 0)
        timer = try? loop.addTimer(afterMicroseconds: delay) { [unowned self] in self.rescan() }
    }
}
