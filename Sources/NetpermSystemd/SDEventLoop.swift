// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// sd-event as the daemon's single-threaded loop: I/O, timers, signals and the watchdog in one place.
public final class SDEventLoop: EventLoop {
    let event: OpaquePointer
    private var signalSources: [SDSignalSource] = []

    public init() throws(Errno) {
        var e: OpaquePointer?
        let r = sd_event_default(&e)
        guard r >= 0, let e else { throw Errno(-r) }
        event = e
    }

    deinit { sd_event_unref(event) }

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

/// inotify through sd-event (the loop owns the inotify fd and its buffer).
final class PathWatch: TimerSource {
    let handler: (String?) -> Void
    var source: OpaquePointer?
    init(handler: @escaping (String?) -> Void) { self.handler = handler }
    func cancel() {
        if let source { sd_event_source_disable_unref(source) }
        source = nil
    }
    deinit { cancel() }
}

extension SDEventLoop {
    public func watch(directory path: String, _ handler: @escaping (String?) -> Void) throws(Errno) -> TimerSource {
        let w = PathWatch(handler: handler)
        var s: OpaquePointer?
        let r = sd_event_add_inotify(event, &s, path, Kernel.directoryChanges, { _, ev, userdata in
            guard let ev, let userdata else { return 0 }
            var name: String?
            if ev.pointee.len > 0 {
                let raw = UnsafeRawPointer(ev).advanced(by: MemoryLayout<inotify_event>.size)
                name = String(decoding: UnsafeRawBufferPointer(start: raw, count: Int(ev.pointee.len)).prefix { $0 != 0 },
                              as: UTF8.self)
            }
            Unmanaged<PathWatch>.fromOpaque(userdata).takeUnretainedValue().handler(name)
            return 0
        }, Unmanaged.passUnretained(w).toOpaque())
        guard r >= 0 else { throw Errno(-r) }
        w.source = s
        return w
    }
}
