import NetpermCore
import NetpermIO

/// The daemon's mutable state and the glue between the edges and the pure core.
final class Daemon {
    private(set) var state = DaemonState()
    let config: Config
    let sysfs: Sysfs
    /// sysfs is read once per link (and again on rename), not on every netlink message.
    private var sysfsCache: [Int32: (name: String, facts: SysfsFacts)] = [:]

    init(config: Config, sysfs: Sysfs) {
        self.config = config
        self.sysfs = sysfs
    }

    func markReady() {
        guard !state.ready else { return }
        state.ready = true
        Log.notice("ready: \(summary)")
    }

    var summary: String {
        let net = state.network
        let via = net.primary.map { "via \($0.name) (\($0.kind.rawValue))" } ?? "no network"
        return "\(net.links.count) links, \(via)"
    }

    func kernelChanged(_ snapshot: KernelSnapshot) {
        var seen: Set<Int32> = []
        let network = NetworkState(snapshot: snapshot) { facts in
            seen.insert(facts.index)
            return Classifier.classify(facts, sysfs: sysfsFacts(facts), overrides: config.interfaces)
        }
        sysfsCache = sysfsCache.filter { seen.contains($0.key) }
        setNetwork(network)
    }

    private func sysfsFacts(_ link: LinkFacts) -> SysfsFacts {
        if let cached = sysfsCache[link.index], cached.name == link.name { return cached.facts }
        let facts = sysfs.facts(forInterface: link.name)
        sysfsCache[link.index] = (link.name, facts)
        return facts
    }

    /// The one setter for the network picture; logs what changed, old -> new.
    private func setNetwork(_ new: NetworkState) {
        let old = state.network
        guard old != new else { return }
        let oldByIndex = Dictionary(old.links.map { ($0.index, $0) }, uniquingKeysWith: { a, _ in a })
        let newIndexes = Set(new.links.map(\.index))
        for l in new.links {
            guard let o = oldByIndex[l.index] else {
                Log.info("\(l.name): appeared, kind \(l.kind.rawValue) (\(l.classifiedBy))\(l.usable ? ", usable" : "")")
                continue
            }
            if o.usable != l.usable {
                Log.info("\(l.name): usable \(o.usable) -> \(l.usable) (admin \(l.adminUp ? "up" : "down"), "
                    + "carrier \(l.carrier ? "on" : "off"), default route \(l.metric != nil ? "yes" : "no"))")
            } else if o != l {
                Log.debug("\(l.name): changed (operstate \(o.operstate) -> \(l.operstate))")
            }
        }
        for o in old.links where !newIndexes.contains(o.index) {
            Log.info("\(o.name): removed")
        }
        if old.primary?.index != new.primary?.index || old.available != new.available {
            Log.notice("network: \(new.primary.map { "via \($0.name) (\($0.kind.rawValue))" } ?? "unavailable")")
        }
        state.network = new
    }

    func handle(_ frame: LineFramer.Frame) -> Response? {
        Processor.handle(frame, state: state)
    }
}
