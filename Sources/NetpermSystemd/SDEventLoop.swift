// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// sd-event as the daemon's single-threaded loop: I/O, timers, signals and the watchdog in one place.
public final class SDEventLoop: EventLoop {
    let event: OpaquePointer
    private var signalSources: [SDSignalSource] = []
    var directoryWatches: DirectoryWatches?

    public init() throws(Errno) {
        var e: OpaquePointer?
        let r = sd_event_default(&e)
        guard r >= 0, let e else { throw Errno(-r) }
        event = e
    }

    deinit {
        directoryWatches = nil
        sd_event_unref(event)
    }

    public func addIO(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(Errno) -> IOSource {
        let src = SDIOSource(handler: handler)
        var s: OpaquePointer?
        let r = sd_event_add_io(event, &s, fd, events, { _, _, revents, userdata in
            Unmanaged<SDIOSource>.fromOpaque(userdata!).takeUnretainedValue().handler(revents)
            return 0
        }, Unmanaged.passUnretained(src).toOpaque())
        guard r >= 0 else { throw Errno(-r) }
        src.source = s
        return src
    }

    public func addTimer(afterMicroseconds usec: UInt64, _ handler: @escaping () -> Void) throws(Errno) -> TimerSource {
        let src = SDTimerSource(handler: handler)
        var now: UInt64 = 0
        sd_event_now(event, CLOCK_MONOTONIC, &now)
        var s: OpaquePointer?
        // Accuracy 1 ms: 0 would mean sd-event's default of 250 ms, far too coarse for WAIT time-outs.
        let r = sd_event_add_time(event, &s, CLOCK_MONOTONIC, now + usec, 1000, { _, _, userdata in
            let t = Unmanaged<SDTimerSource>.fromOpaque(userdata!).takeUnretainedValue()
            t.handler()
            return 0
        }, Unmanaged.passUnretained(src).toOpaque())
        guard r >= 0 else { throw Errno(-r) }
        src.source = s
        return src
    }

    /// Blocks the signal and delivers it through the loop (signalfd), so handlers run like any other event.
    public func onSignal(_ signo: Int32, _ handler: @escaping () -> Void) throws(Errno) {
        try Signals.block(signo)
        let src = SDSignalSource(handler: handler)
        let r = sd_event_add_signal(event, nil, signo, { _, _, userdata in
            Unmanaged<SDSignalSource>.fromOpaque(userdata!).takeUnretainedValue().handler()
            return 0
        }, Unmanaged.passUnretained(src).toOpaque())
        guard r >= 0 else { throw Errno(-r) }
        signalSources.append(src)
    }

    /// Sends WATCHDOG=1 from the loop when the service manager set WATCHDOG_USEC.
    public func enableWatchdog() -> Bool {
        sd_event_set_watchdog(event, 1) > 0
    }

    public func run() -> Int32 {
        sd_event_loop(event)
    }

    public func exit(code: Int32) {
        sd_event_exit(event, code)
    }
}

final class SDIOSource: IOSource {
    let handler: (UInt32) -> Void
    var source: OpaquePointer?
    init(handler: @escaping (UInt32) -> Void) { self.handler = handler }

    func setEvents(_ events: UInt32) {
        if let source { sd_event_source_set_io_events(source, events) }
    }

    func cancel() {
        if let source { sd_event_source_disable_unref(source) }
        source = nil
    }

    deinit { cancel() }
}

final class SDTimerSource: TimerSource {
    let handler: () -> Void
    var source: OpaquePointer?
    init(handler: @escaping () -> Void) { self.handler = handler }

    func cancel() {
        if let source { sd_event_source_disable_unref(source) }
        source = nil
    }

    deinit { cancel() }
}

final class SDSignalSource {
    let handler: () -> Void
    init(handler: @escaping () -> Void) { self.handler = handler }
}

/// One directory watched for the loop: its handler, until cancelled.
final class PathWatch: TimerSource {
    let handler: (String?) -> Void
    fileprivate weak var owner: DirectoryWatches?
    fileprivate var watch: Int32 = -1
    init(handler: @escaping (String?) -> Void) { self.handler = handler }
    func cancel() {
        owner?.remove(self)
        owner = nil
    }
    deinit { cancel() }
}

/// The loop's directory watches, on an inotify instance of the daemon's own rather than sd-event's: sd-event reads
/// inotify into a buffer for names of at most NAME_MAX bytes, cgroupfs accepts longer ones (any user can make one in
/// their delegated subtree), and that read's EINVAL ended the loop and the daemon. `Inotify.read` takes an event of
/// any size; a read that fails all the same is logged and every watch told to look again, as after an overflow.
final class DirectoryWatches {
    private let inotify: Inotify
    private var source: IOSource?
    /// By watch number: a directory watched twice (two paths to it) is one watch, with a handler each.
    private var watchers: [Int32: [PathWatch]] = [:]
    private var failures = RateLimitedLog(intervalMicroseconds: 10_000_000)

    init(loop: EventLoop) throws(Errno) {
        inotify = try Inotify()
        source = try loop.addIO(fd: inotify.fd, events: IOEvents.readable) { [unowned self] _ in self.readOnce() }
    }

    deinit { source?.cancel() }

    func add(_ w: PathWatch, path: String) throws(Errno) {
        let n = try inotify.watch(path: path, mask: Kernel.directoryChanges)
        w.watch = n
        w.owner = self
        watchers[n, default: []].append(w)
    }

    func remove(_ w: PathWatch) {
        guard var list = watchers[w.watch] else { return }
        list.removeAll { $0 === w }
        if list.isEmpty {
            watchers[w.watch] = nil
            inotify.remove(w.watch)
        } else {
            watchers[w.watch] = list
        }
    }

    /// One read per turn of the loop (the descriptor stays ready while more wait): a user's churn of cgroups must
    /// not keep the loop from its other sources.
    private func readOnce() {
        let events: [Inotify.Event]
        do { events = try inotify.read(bytes: 64 * 1024) } catch {
            failures.emit(3, "directory watches: reading inotify failed: \(error); looking at every directory again")
            return tellEveryone()
        }
        for e in events { dispatch(e) }
    }

    private func dispatch(_ e: Inotify.Event) {
        if e.overflowed { return tellEveryone() }
        guard let list = watchers[e.watch] else { return }
        let name = e.name.isEmpty ? nil : String(decoding: e.name, as: UTF8.self)
        for w in list { w.handler(name) }
        // The kernel dropped the watch (its directory is gone): its number may be given to another directory.
        if e.ignored, let left = watchers.removeValue(forKey: e.watch) { for w in left { w.owner = nil } }
    }

    private func tellEveryone() {
        for list in watchers.values { for w in list { w.handler(nil) } }
    }
}

extension SDEventLoop {
    public func watch(directory path: String, _ handler: @escaping (String?) -> Void) throws(Errno) -> TimerSource {
        if directoryWatches == nil { directoryWatches = try DirectoryWatches(loop: self) }
        let w = PathWatch(handler: handler)
        try directoryWatches!.add(w, path: path)
        return w
    }
}
