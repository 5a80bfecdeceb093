// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO

/// A system service whose picture the daemon keeps (NetworkManager's devices, ModemManager's modems): read whole
/// when it appears, when the bus connects and whenever one of its signals says something that matters changed;
/// one reading at a time (a signal during one asks for one more after it). Gone (its name has no owner): an empty
/// picture, as when the bus itself goes. A reading that fails otherwise (a time-out: the service is slow or hung)
/// keeps the last picture and is tried again 10 s later. `read` is the service's own reading; its result goes to
/// `onChange` when it differs.
public final class FollowedService<Picture: Equatable> {
    public let name: String
    let bus: SystemBus
    private let loop: EventLoop
    private let read: (SystemBus, @escaping (Result<Picture, BusCallError>) -> Void) -> Void
    private let empty: Picture
    /// One reading in flight, one more asked for meanwhile (a signal during it).
    private var readings = OnceMore<Void>()
    private var retry: TimerSource?
    private var failing = false
    public private(set) var picture: Picture
    public var onChange: ((Picture) -> Void)?

    /// `matches` are the signal match rules (beside its NameOwnerChanged) after which it is read again; `relevant`
    /// tells whether one such signal says anything that matters.
    public init(name: String, bus: SystemBus, loop: EventLoop, empty: Picture, matches: [String],
                relevant: @escaping (BusReply) -> Bool = { _ in true },
                read: @escaping (SystemBus, @escaping (Result<Picture, BusCallError>) -> Void) -> Void) {
        self.name = name; self.bus = bus; self.loop = loop; self.read = read; self.empty = empty; picture = empty
        // No bus, no word from the service: what it said goes until it is read again.
        bus.onDisconnect { [weak self] in
            guard let self else { return }
            self.retry?.cancel()
            self.retry = nil
            self.set(self.empty)
        }
        bus.onConnect { [weak self] bus in
            guard let self else { return }
            // Who owns the name is the bus's word alone; its signals are taken from that owner alone.
            bus.watchOwner(of: name) { [weak self] owner in
                guard let self else { return }
                // Gone: nothing to ask it (a reading in flight fails by itself); come: read it.
                if let owner {
                    Log.info("\(name) is on the system bus (\(owner))")
                    self.request()
                } else {
                    Log.info("\(name) left the system bus")
                    self.set(self.empty)
                }
            }
            for rule in matches {
                bus.subscribe(rule, from: .owner(name)) { [weak self] m in if relevant(m) { self?.request() } }
            }
            self.request()
        }
    }

    /// The match rules of `name`'s PropertiesChanged and of its `members` (signals on `interface`, each always worth
    /// a reading), and which signals are worth one: those members, and a PropertiesChanged that changes one of
    /// `watched` on one of `interfaces` (services signal many others: statistics, signal strength).
    public static func signals(of name: String, _ members: [(interface: String, member: String)],
                               properties watched: Set<String>, on interfaces: Set<String>)
        -> (matches: [String], relevant: (BusReply) -> Bool) {
        let sender = "type='signal',sender='\(name)',"
        let matches = [sender + "interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'"]
            + members.map { sender + "interface='\($0.interface)',member='\($0.member)'" }
        return (matches, { m in
            guard m.member == "PropertiesChanged" else { return true }
            guard let interface = m.string(), interfaces.contains(interface), let changed = m.properties() else { return false }
            return changed.keys.contains(where: watched.contains)
        })
    }

    /// Reads the service again, now or after the reading in flight.
    public func request() {
        guard readings.ask(()) != nil else { return }
        retry?.cancel()
        retry = nil
        // Its owner first: the signals that follow the reading are checked against the owner it was read from.
        bus.askOwner(of: name) { [weak self] owner in
            guard let self else { return }
            switch owner {
            case .success(nil): self.finish(.failure(BusCallError(name: "org.freedesktop.DBus.Error.NameHasNoOwner", errno: ENXIO)))
            case .success: self.read(self.bus) { [weak self] in self?.finish($0) }
            case let .failure(e): self.finish(.failure(e))
            }
        }
    }

    private func finish(_ result: Result<Picture, BusCallError>) {
        let again = readings.finished() != nil
        switch result {
        case let .success(p):
            if self.failing { Log.info("\(self.name): answering again") }
            self.failing = false
            self.set(p)
        case let .failure(e) where e.serviceAbsent || e.name == "Disconnected":
            self.failing = false
            self.set(self.empty)
        case let .failure(e):
            if !self.failing { Log.info("\(self.name): reading it failed (\(e)); what it said last stands, tried again in 10 s") }
            self.failing = true
            if !again {
                self.retry = try? self.loop.addTimer(afterMicroseconds: 10_000_000) { [weak self] in self?.request() }
            }
        }
        if again { self.request() }
    }

    private func set(_ p: Picture) {
        guard p != picture else { return }
        picture = p
        onChange?(p)
    }
}

/// Calls `start` for each of `items` and `done` once every one has finished: replies to many calls at once.
func gather<T, R>(_ items: [T], _ start: (T, @escaping (R) -> Void) -> Void, done: @escaping ([R]) -> Void) {
    guard !items.isEmpty else { return done([]) }
    let box = Gathering<R>(items.count)
    for (i, item) in items.enumerated() {
        start(item) { r in
            box.results[i] = r
            box.left -= 1
            if box.left == 0 { done(box.results.map { $0! }) }
        }
    }
}

/// The replies `gather` has so far.
private final class Gathering<R> {
    var results: [R?]
    var left: Int
    init(_ n: Int) { results = Array(repeating: nil, count: n); left = n }
}
