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
///
/// A unit made in a watched directory is not left to the next scan (docs/ENFORCEMENT.md, "The first moments of a new
/// cgroup"): the directories units are made in are handed to a UnitNamer, which names each unit made there to the
/// kernel at once, off the loop. Such a unit stays fresh until a scan begun after it was made has been handed over:
/// one that did not find it says it is gone (`gone`).
public final class CgroupWatcher {
    static let debounceMicroseconds: UInt64 = 10_000
    static let maxSpacingMicroseconds: UInt64 = 1_000_000

    private let loop: EventLoop
    private let scanner = UnitCgroupScanner()
    /// Where scans after the first run (on the loop if no thread can be had); what a change asks for while one runs
    /// waits for it to be handed over (`Worker.after`).
    private let thread: Worker<UnitCgroupScanner.Scan>
    private var watches: [UInt64: TimerSource] = [:]
    private var timer: TimerSource?
    private let changed: (UnitCgroups) -> Void
    /// Units named as they were made (UnitNamer), and those of them a later scan did not find.
    public var unitsNamed: ([NamedUnit], _ generation: Int, _ error: EdgeError?) -> Void = { _, _, _ in }
    public var gone: ([UInt64]) -> Void = { _ in }
    /// What names units as they are made, once there are rules to name them in.
    let namer: UnitNamer
    /// The directories of the last scan, and those handed to the namer (by id).
    private var directories: [UnitCgroupScanner.Found] = []
    private var namerWatches: Set<UInt64> = []
    private var seen = UnitsSeen()
    /// The unit descriptors the rules in force name (`inForce(_:)`): kept open after their cgroup went.
    private var named: Set<Int32> = []
    private var spacing = Spacing()
    var scanning: Bool { thread.busy }
    var notBefore: UInt64 { spacing.notBefore }
    var soonNotBefore: UInt64 { spacing.soonNotBefore }

    /// The units named as they were made (by id, with how many scans had started then): a scan begun later says
    /// whether they are still there.
    struct UnitsSeen {
        private var fresh: [UInt64: Int] = [:]
        private(set) var scansStarted = 0

        /// A scan starts; its number.
        mutating func started() -> Int {
            scansStarted += 1
            return scansStarted
        }

        /// Units named as they were made: fresh until a scan begun after them is handed over.
        mutating func named(_ ids: [UInt64]) {
            for id in ids where fresh[id] == nil { fresh[id] = scansStarted }
        }

        /// Scan `number` found `units`: the fresh units a scan begun after them did not find are gone, sorted (until
        /// then they are fresh, found or not: the engine deletes the elements of those no load of the rules took over).
        mutating func found(_ units: Set<UInt64>, scan number: Int) -> [UInt64] {
            var went: [UInt64] = []
            for (id, before) in fresh where number > before && !units.contains(id) {
                fresh[id] = nil
                went.append(id)
            }
            return went.sorted()
        }
    }

    /// When the next scan may start (monotonic µs): twice what handing over the last one cost the loop after it;
    /// `soonNotBefore` the same without the debounce's floor, for a scope the daemon had made (`scanSoon`); `soon`:
    /// such a scan was asked for while one ran.
    struct Spacing {
        private(set) var notBefore: UInt64 = 0
        private(set) var soonNotBefore: UInt64 = 0
        var soon = false

        /// Handing a scan over took the loop from `start` to `end`.
        mutating func handedOver(start: UInt64, end: UInt64) {
            notBefore = end + min(CgroupWatcher.maxSpacingMicroseconds, max(CgroupWatcher.debounceMicroseconds, 2 * (end - start)))
            soonNotBefore = end + min(CgroupWatcher.maxSpacingMicroseconds, 2 * (end - start))
        }
    }

    public init(loop: EventLoop, changed: @escaping (UnitCgroups) -> Void) {
        self.loop = loop
        self.changed = changed
        namer = UnitNamer(loop: loop)
        if scanner.mountPoint == nil { Log.info("no cgroup v2 hierarchy: Unit= apps cannot be enforced") }
        // Scans yield the CPU to the loop and to naming units just made (UnitNamer).
        thread = Worker(loop: loop, doing: "scanning cgroups", background: true)
        namer.named = { [unowned self] r in self.namedByNamer(r) }
        namer.started = { [unowned self] port in
            let n = namer
            namerStarted(port) { n.commits }
        }
        // The first on the loop: the engine knows the units before it loads its first rules.
        apply(scanner.scan(), number: seen.started())
    }

    deinit { namer.stop() }

    private func rescan() {
        timer = nil
        let number = seen.started()
        thread.run({ [scanner] in scanner.scan() }) { [unowned self] result in self.apply(result, number: number) }
    }

    private func apply(_ scan: UnitCgroupScanner.Scan, number: Int) {
        let wanted = Set(scan.directories.map(\.id))
        for (id, w) in watches where !wanted.contains(id) {
            w.cancel()
            watches[id] = nil
            if namerWatches.remove(id) != nil { namer.unwatch(id) }
        }
        var added = false
        for dir in scan.directories where watches[dir.id] == nil {
            let id = dir.id
            watches[id] = try? loop.watch(directory: "/proc/self/fd/\(dir.fd)") { [unowned self] name in
                // Units of either manager, and user managers (`user@UID.service`) coming and going.
                if let name, !UnitCgroups.isSlice(name) && !UnitCgroups.isUnit(name) { return }
                self.schedule()
            }
            added = true
        }
        directories = scan.directories
        handDirectories()
        let went = seen.found(Set(scan.cgroups.units.map(\.id)), scan: number)
        let start = Clock.monotonicMicroseconds()
        changed(scan.cgroups)
        if !went.isEmpty { gone(went) }
        spacing.handedOver(start: start, end: Clock.monotonicMicroseconds())
        scanner.release(keeping: named)
        // What was made in a directory between its listing and its watch is seen by one more scan. (What was asked
        // for while this scan ran comes after: `resume`.)
        if added { schedule() }
    }

    /// What a change, or a scope made, asked for while a scan ran, once it is handed over.
    private func resume() {
        if spacing.soon {
            spacing.soon = false
            scanSoon()
        } else {
            schedule()
        }
    }

    /// Units made from now on are named with this (none: nil). The first time, the namer starts and is handed the
    /// directories (now if no scan runs, else when it is handed over).
    public func nameUnits(with naming: UnitNaming?) {
        let was = namer.active
        namer.use(naming)
        guard !was, namer.active else { return }
        if !thread.after({ [unowned self] in resume() }) { handDirectories() }
    }

    /// Once the namer starts: its socket's port and its commits, which the enforcer must count as the daemon's own.
    public var namerStarted: (_ port: UInt32, _ commits: @escaping () -> (started: UInt32, finished: UInt32)) -> Void = { _, _ in }

    /// The directories of the last scan not yet handed to the namer, each through a descriptor of its own (a scan on
    /// its thread may close the scanner's at any moment: called only while none runs).
    private func handDirectories() {
        guard namer.active else { return }
        for dir in directories where !namerWatches.contains(dir.id) && watches[dir.id] != nil {
            guard let place = dir.place, let own = try? Directory.open("/proc/self/fd/\(dir.fd)") else { continue }
            namer.watch(UnitNamer.Directory(id: dir.id, fd: FD.moveAbove(own, LowDescriptors.selectable), place: place))
            namerWatches.insert(dir.id)
        }
    }

    /// Units the namer named (or failed to): fresh until a scan begun after them is handed over.
    private func namedByNamer(_ r: UnitNamer.Result) {
        if r.error == nil { seen.named(r.units.map(\.unit.id)) }
        unitsNamed(r.units, r.generation, r.error)
    }

    /// The rules now in force name these descriptors (none: no rules): the descriptors of cgroups gone since that
    /// they do not name are closed (once no scan runs: the scanner is the thread's while it does).
    public func inForce(_ handles: Set<Int32>) {
        named = handles
        if !thread.busy { scanner.release(keeping: handles) }
    }

    /// A scope the daemon had a user's manager make (ScopeMaker: an app found by what it runs) exists now: scan
    /// without waiting for the debounce, since its app is new to the rules until a scan finds its unit (the namer
    /// names only the units of apps the rules know); right after the scan that runs, if one does, and never sooner
    /// than twice what handing over the last scan cost the loop (`soonNotBefore`): a user starting apps in a loop
    /// makes at most 16 scopes at once (Engine.maxScopes), and a tree so big that its scans cost much spaces them.
    public func scanSoon() {
        guard !thread.after({ [unowned self] in resume() }) else { spacing.soon = true; return }
        timer?.cancel()
        timer = nil
        let now = Clock.monotonicMicroseconds()
        guard spacing.soonNotBefore > now else { return rescan() }
        timer = try? loop.addTimer(afterMicroseconds: spacing.soonNotBefore - now) { [unowned self] in self.rescan() }
    }

    private func schedule() {
        guard timer == nil else { return }
        guard !thread.after({ [unowned self] in resume() }) else { return }
        let now = Clock.monotonicMicroseconds()
        let delay = max(Self.debounceMicroseconds, spacing.notBefore > now ? spacing.notBefore - now : 0)
        timer = try? loop.addTimer(afterMicroseconds: delay) { [unowned self] in self.rescan() }
    }
}
