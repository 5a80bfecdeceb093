// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermIO

/// What the exec watcher reads of a process (/proc), as a protocol so that its tests give a fake.
public protocol ProcessReading {
    /// A pidfd of `pid` (nil: gone), to be sure that what is read afterwards was that process's.
    func pin(_ pid: Int32) -> Int32?
    func isAlive(_ pin: Int32) -> Bool
    func release(_ pin: Int32)
    /// The file /proc/PID/exe names (device and inode), and its path.
    func executableFile(_ pid: Int32) -> FileKey?
    func executablePath(_ pid: Int32) -> String?
    func cgroup(_ pid: Int32) -> String?
    /// /proc/PID/cmdline's arguments (at most a few: only the script's is wanted).
    func arguments(_ pid: Int32) -> [String]?
    /// The file a path of the process names (relative: from its working directory).
    func file(_ path: String, of pid: Int32) -> FileKey?
}

/// /proc as the daemon sees it (the initial pid namespace's, where the process connector's pids are).
public struct ProcFiles: ProcessReading {
    public init() {}
    public func pin(_ pid: Int32) -> Int32? { Pidfd.open(pid) }
    public func isAlive(_ pin: Int32) -> Bool { Pidfd.isAlive(pin) }
    public func release(_ pin: Int32) { FD.close(pin) }
    public func executableFile(_ pid: Int32) -> FileKey? {
        Files.executableID(pid: pid).map { FileKey(device: $0.device, inode: $0.inode) }
    }
    public func executablePath(_ pid: Int32) -> String? { try? Files.readLink("/proc/\(pid)/exe") }
    public func cgroup(_ pid: Int32) -> String? { FD.readText("/proc/\(pid)/cgroup") }
    public func arguments(_ pid: Int32) -> [String]? {
        guard let bytes = try? Files.read("/proc/\(pid)/cmdline", limit: 1 << 16) else { return nil }
        return bytes.split(separator: 0, omittingEmptySubsequences: false).prefix(6).map { String(decoding: $0, as: UTF8.self) }
    }
    public func file(_ path: String, of pid: Int32) -> FileKey? {
        let p = path.hasPrefix("/") ? path : "/proc/\(pid)/cwd/" + path
        return (try? Files.fileID(p)).map { FileKey(device: $0.device, inode: $0.inode) }
    }
}

/// Hears of every exec of the system from the kernel (ProcessEvents) and tells of the processes of a person's
/// session with no app unit of its own that run an installed app's program (docs/APPS.md, "Apps known by what they
/// run"). Cheapest question first, so that a compile's 10,000 execs a second cost little: the executable's device
/// and inode (one `stat` of /proc/PID/exe) against the index the engine gave (`use`); only a process that runs an
/// app's program (or an interpreter of an app's script) is pinned (a pidfd), its cgroup read (SessionPlace: where
/// it runs), its script looked for, its executable read again, and told only if it was alive after all that, so
/// that nothing read was another process's with a reused pid. Everything here is a few small reads of /proc, on
/// the loop.
public final class ExecWatcher {
    /// Counts reach the engine (METRICS) at most this often while execs come: an input per datagram would cost a
    /// compile's 10,000 execs a second more than the execs do.
    static let reportMicroseconds: UInt64 = 500_000
    /// After a read the socket rests this long (sd-event's timers may fire up to 1 ms later still), so that under a
    /// compile's burst one wake-up of the loop reads every exec of that time, not one each: read one by one, each
    /// exec cost a wake-up (a context switch, sd-event's pass) and an empty read after it, more than its `stat` of
    /// /proc/PID/exe (perf, bench figure 22: 13-14 µs of CPU an exec, 5 µs with the pause). An app's exec that comes
    /// while the socket rests is read that much later (docs/APPS.md); one after a quiet moment at once.
    static let pauseMicroseconds: UInt64 = 1_000

    private let loop: EventLoop
    private let fd: Int32
    private let proc: ProcessReading
    private let found: (ExecFound) -> Void
    private let counted: (ExecCounts) -> Void
    private var source: IOSource?
    private var datagrams = EventDatagrams()
    private var index = ExecIndex()
    /// `found` counted apart, by the engine.
    public private(set) var counts = ExecCounts()
    private var reported = ExecCounts()
    private var reportTimer: TimerSource?
    private var overrunLogged = false
    /// The pause after a read (pauseReading), and the execs of one read (kept: no allocation per read).
    private var pause: TimerSource?
    private var execs: [Int32] = []

    /// Watches the process connector's socket `fd` (ProcessEvents.open; the tests' own socket), which it owns.
    /// `counted`: what was counted, at most every `reportMicroseconds` while it changes.
    public init(loop: EventLoop, fd: Int32, proc: ProcessReading = ProcFiles(), counted: @escaping (ExecCounts) -> Void = { _ in },
                found: @escaping (ExecFound) -> Void) throws(Errno) {
        self.loop = loop
        self.fd = fd
        self.proc = proc
        self.found = found
        self.counted = counted
        source = try loop.addIO(fd: fd, events: IOEvents.readable) { [unowned self] _ in self.readable() }
    }

    deinit {
        reportTimer?.cancel()
        pause?.cancel()
        source?.cancel()
        FD.close(fd)
    }

    /// The programs to look for from now on (Effect.watchExecs).
    public func use(_ index: ExecIndex) { self.index = index }

    /// The socket is readable: read it, then pause.
    private func readable() {
        guard read() else { return }
        pauseReading()
    }

    /// Leaves the socket unwatched for `pauseMicroseconds`, then reads what came meanwhile at once; a pause in which
    /// nothing came ends the pausing (the socket is watched again), so that an exec after a quiet moment is read at
    /// once and a compile's burst costs one wake-up of the loop per pause instead of one per exec.
    private func pauseReading() {
        source?.setEvents(0)
        pause = try? loop.addTimer(afterMicroseconds: Self.pauseMicroseconds) { [unowned self] in
            self.pause = nil
            if self.read() { self.pauseReading() } else { self.source?.setEvents(IOEvents.readable) }
        }
        // Without a timer, no pause: every exec is read as it comes, as before.
        if pause == nil { source?.setEvents(IOEvents.readable) }
    }

    /// Reads every datagram queued and looks at each exec; false when nothing was there. A read error ends the
    /// watching.
    private func read() -> Bool {
        guard source != nil else { return false }
        var any = false
        execs.removeAll(keepingCapacity: true)
        do {
            try datagrams.drain(fd, lost: { [unowned self] loss in
                any = true
                self.counts.overruns += 1
                if !self.overrunLogged {
                    self.overrunLogged = true
                    Log.warning("process events: the kernel dropped some (\(loss)); a process that started an app then "
                                + "stays where it runs (said once)")
                }
            }) { d in
                any = true
                ProcessEvents.forEach(in: UnsafeRawBufferPointer(d)) { event in
                    switch event {
                    case let .exec(e): self.execs.append(e.tgid)
                    case let .subscribed(error) where error != 0:
                        Log.warning("process events: the kernel refused the subscription (\(Errno(Int32(bitPattern: error))))")
                    case .subscribed, .other: break
                    }
                }
            }
        } catch {
            Log.warning("process events: cannot read (\(error)); no longer watching execs")
            source?.cancel()
            source = nil
            return false
        }
        // A process's execs in one batch (a launcher's `sh` -> `env` -> the app) are looked at once, as /proc shows it
        // now: each would find the last program, and ask for its scope again.
        var seen = Set<Int32>()
        for pid in execs {
            if seen.insert(pid).inserted { exec(pid) } else { counts.execs += 1 }
        }
        scheduleReport()
        return any
    }

    /// Tells the counts once the interval is over (one timer at a time; none while nothing changed).
    private func scheduleReport() {
        guard reportTimer == nil, counts != reported else { return }
        reportTimer = try? loop.addTimer(afterMicroseconds: Self.reportMicroseconds) { [unowned self] in
            self.reportTimer = nil
            self.reported = self.counts
            self.counted(self.counts)
        }
    }

    /// One exec: is it an app's process to give a scope?
    func exec(_ pid: Int32) {
        counts.execs += 1
        guard !index.isEmpty, let exe = proc.executableFile(pid), index.mayRun(exe) else { return }
        counts.candidates += 1
        guard let pin = proc.pin(pid) else { return }
        defer { proc.release(pin) }
        // Read again once pinned: the pid may have been another process's a moment ago.
        guard let exe = proc.executableFile(pid), index.mayRun(exe), let text = proc.cgroup(pid),
              let (uid, place) = SessionPlace.of(cgroup: text) else { return }
        var script: FileKey?
        if index.interprets(exe), let argv = proc.arguments(pid), let path = ExecIndex.scriptArgument(argv) {
            script = proc.file(path, of: pid)
        }
        guard let app = index.app(uid: uid, exe: exe, script: script) else { return }
        let path = proc.executablePath(pid)
        guard proc.isAlive(pin) else { return }
        found(ExecFound(pid: pid, uid: uid, app: app, place: place, executable: path))
    }
}
