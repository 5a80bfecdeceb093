import Glibc
import NetpermControl
import NetpermCore
import NetpermHost
import NetpermIO
import NetpermNftables
import NetpermSystemd

/// Feeds the engine what happens and carries out what it says: the daemon's only logic is which effect is which
/// system call. Inputs that effects produce (a store's result, a policy read) are queued and handled after the
/// current effects, never inside them.
final class Interpreter: ControlDelegate {
    let engine: Engine
    private let loop: EventLoop
    private let store: DecisionStore
    private let usageStore: UsageStore
    private let loadPolicy: @Sendable () -> ConfigParseResult
    /// Policies are read and parsed on a thread of their own: a file of many megabytes must not stop the loop.
    private let policyLoader: OffLoop<ConfigParseResult>?
    private let sysfs: Sysfs
    private let enforcer: Enforcer
    private let steerer = Steerer()
    /// Mode=steer's marks in use, for the route lookups (NetlinkWatcher.marks).
    var steeringMarks: ([UInt32]) -> Void = { _ in }
    /// The transport, set once it exists (it needs the interpreter as its delegate).
    var server: ControlServer?

    private let effects = Effects()
    private var queue: [Input] = []
    private var draining = false
    private var timers: [TimerID: TimerSource] = [:]
    /// sysfs is read once per link (and again on rename or when its addresses or default routes change), not on
    /// every netlink message.
    private var sysfsCache: [Int32: (name: String, stamp: Int, facts: SysfsFacts)] = [:]
    /// The last kernel picture and the Wi-Fi networks (nl80211), joined into what the engine gets: either may
    /// change without the other.
    private var lastKernel: KernelSnapshot?
    private var wifi: [Int32: WifiFacts] = [:]
    /// Each open connection: its socket, who connected, and the pid the engine has the identity of (nil until
    /// its first request: a connection that sends nothing costs no reading of /proc).
    private var connections: [ConnectionID: (fd: Int32, connector: Credentials, pid: Int32?)] = [:]
    private let identities = PeerIdentities()

    init(engine: Engine, loop: EventLoop, store: DecisionStore, usageStore: UsageStore, sysfs: Sysfs,
         loadPolicy: @escaping @Sendable () -> ConfigParseResult) {
        self.engine = engine; self.loop = loop; self.store = store; self.usageStore = usageStore; self.sysfs = sysfs
        self.loadPolicy = loadPolicy
        enforcer = Enforcer(loop: loop)
        do { policyLoader = try OffLoop(loop: loop) } catch {
            Log.warning("cannot set up reading the policy off the loop (\(error)); reloads will read it on the loop")
            policyLoader = nil
        }
        enforcer.repairFailed = { [unowned self] error in self.feed(.rulesLoaded(error: error)) }
        enforcer.blocked = { [unowned self] app, kind in self.feed(.blocked(app: app, kind: kind)) }
        enforcer.usageChanged = { [unowned self] in self.feed(.usageTableChanged) }
        enforcer.quotaReached = { [unowned self] quota in self.feed(.budgetReached(quota: quota)) }
    }

    /// Handles `input` and everything it leads to, then lets released clients' requests through.
    func feed(_ input: Input) {
        queue.append(input)
        guard !draining else { return }
        draining = true
        while !queue.isEmpty {
            let next = queue.removeFirst()
            effects.reset()
            engine.handle(next, into: effects)
            for effect in effects.list { carryOut(effect) }
        }
        draining = false
        server?.serveReleased()
    }

    private func carryOut(_ effect: Effect) {
        switch effect {
        case let .reply(id, range): server?.reply(id, effects[range])
        case let .event(id, head, tail): server?.event(id, head: effects[head], tail: effects[tail])
        case let .hold(id): server?.hold(id)
        case let .resume(id): server?.resume(id)
        case let .close(id): server?.closeAfterFlush(id)
        case let .keepOpenAfterInputEnds(id): server?.keepOpenAfterInputEnds(id)
        case let .armTimer(id, usec):
            do {
                timers[id] = try loop.addTimer(afterMicroseconds: usec) { [unowned self] in
                    self.timers[id] = nil
                    self.feed(.timer(id))
                }
            } catch {
                Log.err("cannot arm a timer: \(error)")
            }
        case let .cancelTimer(id): timers.removeValue(forKey: id)?.cancel()
        case let .persist(decisions):
            do {
                try store.save(decisions)
                queue.append(.stored(error: nil))
            } catch {
                queue.append(.stored(error: "\(store.path): \(error)"))
            }
        case .loadPolicy:
            // The engine has one load in flight at a time; on the loop only if no thread can be had.
            if let policyLoader, !policyLoader.busy {
                do {
                    try policyLoader.run(loadPolicy) { [unowned self] result in
                        self.feed(.policy(result))
                        // The files' text is gone, and the old policy once the new one is in force.
                        Heap.releaseFree()
                    }
                    return
                } catch {
                    Log.warning("cannot start a thread to read the policy (\(error)); reading it on the loop")
                }
            }
            let result = loadPolicy()
            Heap.releaseFree()
            queue.append(.policy(result))
        case let .notify(n):
            switch n {
            case let .ready(status): Notify.send("READY=1\nSTATUS=\(status)")
            case let .status(status): Notify.send("STATUS=\(status)")
            case .reloading: Notify.reloading()
            case .stopping: Notify.send("STOPPING=1")
            }
        case let .log(priority, message): Log.emit(priority.rawValue, message)
        case let .loadRules(scripts, report, inForce):
            let start = Clock.monotonicMicroseconds()
            let error = enforcer.load(scripts, inForce: inForce)
            Log.debug("enforcement: nft transactions of \(scripts.reduce(0) { $0 + $1.utf8.count }) bytes took "
                + "\((Clock.monotonicMicroseconds() - start) / 1000) ms")
            if report {
                queue.append(.rulesLoaded(error: error))
            } else if let error {
                Log.debug("enforcement: removing a table left by an earlier run: \(error)")
            }
        case .readUsage:
            TestClock.refresh()
            do {
                queue.append(.usageRead(try UsageCounters.read(), error: nil))
            } catch {
                queue.append(.usageRead(nil, error: "\(error)"))
            }
        case let .saveUsage(book):
            do {
                try usageStore.save(book)
                queue.append(.usageSaved(error: nil))
            } catch {
                queue.append(.usageSaved(error: "\(usageStore.path): \(error)"))
            }
        case let .loadUsageRules(script, report):
            let start = Clock.monotonicMicroseconds()
            let error = enforcer.loadUsage(script)
            Log.debug("usage: nft transaction of \(script.utf8.count) bytes took \((Clock.monotonicMicroseconds() - start) / 1000) ms")
            if report {
                queue.append(.usageRulesLoaded(error: error))
            } else if let error {
                Log.debug("usage: removing a table left by an earlier run: \(error)")
            }
        case let .steer(plan):
            queue.append(.steered(error: steerer.apply(plan)))
            steeringMarks(plan?.allowances.map(\.mark) ?? [])
        }
    }

    /// The kernel's picture, with what sysfs says of each link.
    func kernelChanged(_ snapshot: KernelSnapshot) {
        lastKernel = snapshot
        var s = snapshot
        s.wifi = wifi
        var seen: Set<Int32> = []
        // What the link's addresses and default routes are: a DHCP lease and a PPP unit's pid file are written
        // around the time those change, so the facts are read again then (and on rename), not per message.
        var configured: [Int32: Hasher] = [:]
        for a in s.addresses { configured[a.index, default: Hasher()].combine(a.text) }
        for r in s.defaultRoutes { configured[r.index, default: Hasher()].combine(r.family.rawValue) }
        for link in s.links {
            seen.insert(link.index)
            let stamp = configured[link.index]?.finalize() ?? 0
            if let cached = sysfsCache[link.index], cached.name == link.name, cached.stamp == stamp {
                s.sysfs[link.index] = cached.facts
            } else {
                let facts = sysfs.facts(forInterface: link.name, index: link.index)
                sysfsCache[link.index] = (link.name, stamp, facts)
                s.sysfs[link.index] = facts
            }
        }
        if sysfsCache.count != seen.count { sysfsCache = sysfsCache.filter { seen.contains($0.key) } }
        feed(.kernel(s))
        // Mode=steer's tables copy the main table's routes: any change of it is followed here.
        if case let .some(error) = steerer.follow() { feed(.steered(error: error)) }
    }

    /// A Wi-Fi link's network changed (associated, roamed, disconnected): the same kernel picture, new networks.
    func wifiChanged(_ networks: [Int32: WifiFacts]) {
        wifi = networks
        if let k = lastKernel { kernelChanged(k) }
    }

    // MARK: - ControlDelegate

    func caughtUp(_ id: UInt64, dropped: Int) { feed(.caughtUp(id, dropped: dropped)) }

    func opened(_ id: UInt64, fd: Int32, connector: Credentials) {
        connections[id] = (fd, connector, nil)
    }

    /// Each request is answered for the process that sent it. The engine learns who that is before the first
    /// request, and again only when a request comes from another pid than the last one did: the same sender
    /// costs a comparison.
    func frame(_ id: UInt64, _ frame: LineFramer.Frame, sender: Credentials) {
        guard let c = connections[id] else { return }
        if c.pid != sender.pid {
            let identity = identities.identify(sender: sender, socket: c.fd, connector: c.connector)
            connections[id]?.pid = sender.pid
            feed(c.pid == nil ? .opened(id, identity) : .identityChanged(id, identity))
        }
        switch frame {
        case let .line(bytes): feed(.line(id, bytes))
        case .tooLong: feed(.lineTooLong(id))
        }
    }

    func closed(_ id: UInt64) {
        guard let c = connections.removeValue(forKey: id), c.pid != nil else { return }
        feed(.closed(id))
    }

    func refusalLine(_ refusal: ControlServer.Refusal) -> [UInt8] {
        switch refusal {
        case let .total(limit):
            return ProtocolError(.tooManyConnections, "netpermd serves at most \(limit) connections at once; try again later").line
        case let .perUID(uid, limit):
            return ProtocolError(.tooManyConnections, "uid \(uid) has \(limit) connections open, the most one user may have").line
        }
    }
}
