// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermHost
import NetpermIO
import NetpermNftables
import Synchronization

/// Names units to the kernel as they are made, on a thread of its own (docs/ENFORCEMENT.md, "The first moments of
/// a new cgroup"): an inotify instance of its own watches the directories units are made in (CgroupWatcher hands
/// them over from its scans); each unit made there that a policy's app owns is named at once with the engine's
/// `UnitNaming`, by its cgroup's id (one fstatat, no descriptor), all those one read of the queue brought in one
/// nf_tables batch, and then told to the loop (`named`). Neither the loop (scans handed over, clients, the engine)
/// nor a load of the rules (libnftables, a whole table) stands in its way.
///
/// A user's own manager may have `UserBudget.rate` of its units named so a second (`UserBudget.burst` at once): past
/// that, their units wait for the scans, as every unit did before, so that one user's tree churning costs this
/// thread a name check per event and delays no one else's units.
final class UnitNamer {
    /// A directory units are made in: the namer's own descriptor of it (closed by the namer) and where its units
    /// stand.
    struct Directory {
        var id: UInt64
        var fd: Int32
        var place: UnitCgroupScanner.UnitPlace
    }

    /// What the loop and the thread share, under one lock; and the thread's commits, begun and finished (the event
    /// socket's generation check counts them as the daemon's own).
    private final class Shared: Sendable {
        struct State: Sendable {
            var naming: UnitNaming?
            var added: [Directory] = []
            var removed: [UInt64] = []
            var stop = false
            var results: [Result] = []
        }
        let state = Mutex(State())
        let started = Atomic<UInt32>(0)
        let finished = Atomic<UInt32>(0)
    }

    struct Result: Sendable {
        var units: [NamedUnit]
        var generation: Int
        var error: EdgeError?
    }

    /// How many units of one user's manager may be named as they are made: `rate` a second, `burst` at once.
    struct UserBudget {
        static let rate = 50.0
        static let burst = 50.0
        var tokens = burst
        var at: UInt64

        mutating func take(now: UInt64) -> Bool {
            tokens = min(Self.burst, tokens + Double(now &- at) / 1_000_000 * Self.rate)
            at = now
            guard tokens >= 1 else { return false }
            tokens -= 1
            return true
        }
    }

    /// Entries made that wait to be looked at, at most (an inotify queue holds 16,384 by default).
    static let maxBacklog = 65536
    /// Past this many entries made in one directory waiting, the directory is listed rather than each looked up.
    static let listAbove = 16
    /// Elements named before the queue is read again: a few batches, so that what was made meanwhile is not kept
    /// waiting long, nor the units of one read split over many rounds.
    static let cycleElements = 4 * batchElements
    /// Elements per nf_tables batch (`NftablesElements.maxElements`, `maxBatchBytes`).
    static let batchElements = NftablesElements.maxElements

    private let shared = Shared()
    private let loop: EventLoop
    /// Loop -> thread (something in `shared`), thread -> loop (results); -1 until started.
    private var poke: Int32 = -1
    private var wake: Int32 = -1
    private var source: IOSource?
    private var thread: OffLoop<Bool>?
    /// Setting up failed (said once): units wait for the scans.
    private var failed = false
    /// Called on the loop with each batch's outcome.
    var named: (Result) -> Void = { _ in }
    /// Called once started, with the port of the thread's netfilter socket: its notifications and commits are the
    /// daemon's own.
    var started: (UInt32) -> Void = { _ in }

    /// Nothing is set up until units are to be named (Mode=block with rules in force): no thread, no descriptor.
    init(loop: EventLoop) { self.loop = loop }

    /// Whether the thread runs: the directories handed over are watched.
    var active: Bool { thread != nil }

    private func start() {
        guard thread == nil, !failed else { return }
        do throws(Errno) {
            let socket = try NftablesElements.socket()
            let inotify = try Inotify()
            let poke = try EventFD.make(), wake = try EventFD.make()
            let thread = try OffLoop<Bool>(loop: loop)
            source = try loop.addIO(fd: wake, events: IOEvents.readable) { [unowned self] _ in self.collect() }
            let body = Body(shared: shared, poke: poke, wake: wake, inotify: inotify, socket: socket)
            self.poke = poke
            self.wake = wake
            started(socket.port)
            try thread.run({ body.run() }) { _ in
                FD.close(poke)
                FD.close(wake)
            }
            self.thread = thread
        } catch {
            failed = true
            Log.warning("cannot set up naming units as they are made (\(error)); they are named by the scans alone")
        }
    }

    /// The thread ends (it closes its descriptors; the eventfds close once its end is heard).
    func stop() {
        guard thread != nil else { return }
        shared.state.withLock { $0.stop = true }
        Self.signal(poke)
        source?.cancel()
        source = nil
    }

    /// Names units with this from now on (starting the thread the first time); none while nil.
    func use(_ naming: UnitNaming?) {
        if naming != nil { start() }
        shared.state.withLock { $0.naming = naming }
        if thread != nil { Self.signal(poke) }
    }

    /// Units made in `dir` are named from now on (the namer owns its descriptor).
    func watch(_ dir: Directory) {
        shared.state.withLock { $0.added.append(dir) }
        if thread != nil { Self.signal(poke) }
    }

    func unwatch(_ id: UInt64) {
        shared.state.withLock { $0.removed.append(id) }
        if thread != nil { Self.signal(poke) }
    }

    /// Commits begun so far, and those finished: what may commit after a reading is at most what a later reading
    /// says begun less what the first said finished.
    var commits: (started: UInt32, finished: UInt32) {
        (shared.started.load(ordering: .acquiring), shared.finished.load(ordering: .acquiring))
    }

    private func collect() {
        EventFD.drain(wake)
        let results = shared.state.withLock { s in
            let r = s.results
            s.results = []
            return r
        }
        for r in results { named(r) }
    }

    fileprivate static func signal(_ fd: Int32) { EventFD.signal(fd) }

    /// The thread's side: its state is its own.
    private final class Body: @unchecked Sendable {
        let shared: Shared
        let poke: Int32, wake: Int32
        let inotify: Inotify
        let socket: NetlinkSocket
        var naming: UnitNaming?
        var watched: [Int32: Directory] = [:]
        var watchOf: [UInt64: Int32] = [:]
        var budgets: [UInt32: UserBudget] = [:]
        /// Entries made and not yet looked at, oldest first: their watch and name.
        var backlog: [(Int32, [UInt8])] = []

        init(shared: Shared, poke: Int32, wake: Int32, inotify: Inotify, socket: NetlinkSocket) {
            self.shared = shared; self.poke = poke; self.wake = wake; self.inotify = inotify; self.socket = socket
        }

        func run() -> Bool {
            var fds = [pollfd(fd: poke, events: Int16(POLLIN), revents: 0), pollfd(fd: inotify.fd, events: Int16(POLLIN), revents: 0)]
            while true {
                // Waits only with nothing left to name.
                _ = try? sys { poll(&fds, nfds_t(fds.count), backlog.isEmpty ? -1 : 0) }
                EventFD.drain(poke)
                let (stop, added, removed, naming) = shared.state.withLock { s in
                    let r = (s.stop, s.added, s.removed, s.naming)
                    s.added = []
                    s.removed = []
                    return r
                }
                self.naming = naming
                for id in removed {
                    guard let w = watchOf.removeValue(forKey: id), let d = watched.removeValue(forKey: w) else { continue }
                    inotify.remove(w)
                    FD.close(d.fd)
                }
                for d in added {
                    guard let w = try? inotify.watchMade(directory: d.fd) else { FD.close(d.fd); continue }
                    if let old = watched[w] {
                        FD.close(old.fd)
                        if old.id != d.id { watchOf[old.id] = nil }
                    }
                    watched[w] = d
                    watchOf[d.id] = w
                }
                if stop {
                    for d in watched.values { FD.close(d.fd) }
                    return true
                }
                read()
                nameNewest()
            }
        }

        /// Everything queued, after what is waiting (the oldest dropped past `maxBacklog`: their units wait for the
        /// scans).
        func read() {
            while let events = try? inotify.read(bytes: 64 * 1024), !events.isEmpty {
                for e in events where !e.name.isEmpty && !e.overflowed { backlog.append((e.watch, e.name)) }
            }
            if backlog.count > UnitNamer.maxBacklog { backlog.removeFirst(backlog.count - UnitNamer.maxBacklog) }
        }

        /// Names the units waiting, at most `batchElements` elements' worth, newest first, and tells the loop. Under
        /// churn a directory's units are found by one listing of it (each entry's id comes with its name), not by a
        /// lookup of each: every lookup waits for the directory's lock, which each unit made or removed takes (5,000
        /// scopes made and removed in a loop: 170 µs a lookup, fewer units a second than were made, so a unit just
        /// made waited behind hundreds).
        func nameNewest() {
            guard let naming else { backlog = []; return }
            var units: [NamedUnit] = [], count = 0
            var now: UInt64 = 0
            var listed: [Int32: [[UInt8]: UInt64]] = [:]
            var seen: Set<UInt64> = []
            let perDirectory = Dictionary(backlog.map { ($0.0, 1) }, uniquingKeysWith: +)
            while count < UnitNamer.cycleElements, let (watch, raw) = backlog.popLast() {
                guard let d = watched[watch], let name = String(validating: raw, as: UTF8.self), UnitCgroups.isUnit(name)
                else { continue }
                if let uid = d.place.uid {
                    if now == 0 { now = Clock.monotonicMicroseconds() }
                    guard budgets[uid, default: UserBudget(at: now)].take(now: now) else { continue }
                }
                // What it must not do first, from its name alone: most units need nothing taken away.
                guard let nameless = d.place.unit(name, id: 0), let elements = naming.restrictions(of: nameless),
                      !elements.isEmpty else { continue }
                let found: UInt64?
                if perDirectory[watch, default: 0] > UnitNamer.listAbove {
                    if listed[watch] == nil {
                        let entries = (try? NetpermIO.Directory.listing(d.fd)) ?? []
                        listed[watch] = Dictionary(entries.map { ($0.name, $0.inode) }, uniquingKeysWith: { a, _ in a })
                    }
                    found = listed[watch]![raw]
                } else {
                    found = (try? NetpermIO.Directory.inode(at: d.fd, raw)) ?? nil
                }
                // A name made again is one cgroup: the one there now.
                guard let id = found, seen.insert(id).inserted, let unit = d.place.unit(name, id: id) else { continue }
                units.append(NamedUnit(unit: unit, elements: elements))
                count += elements.count
            }
            // One nf_tables batch each `batchElements`.
            var at = 0
            while at < units.count {
                var end = at, elements = 0
                while end < units.count, end == at || elements + units[end].elements.count <= UnitNamer.batchElements {
                    elements += units[end].elements.count
                    end += 1
                }
                let part = Array(units[at..<end])
                at = end
                shared.started.add(1, ordering: .releasing)
                let error: EdgeError?
                switch NftablesElements.run(UnitNaming.additions(part.map { ($0.unit.id, $0.elements) }), on: socket,
                                            for: .nameUnits) {
                case .committed: error = nil
                case let .refused(refused): error = refused
                case .tooLarge: error = EdgeError(.nameUnits, "a batch too large")
                }
                shared.finished.add(1, ordering: .releasing)
                shared.state.withLock { $0.results.append(Result(units: part, generation: naming.generation, error: error)) }
            }
            UnitNamer.signal(wake)
        }
    }
}
