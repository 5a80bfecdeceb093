import NetpermControl
import NetpermCore
import NetpermIO

/// The daemon's mutable state and the glue between the edges and the pure core.
final class Daemon {
    private(set) var state = DaemonState()
    let configPath: String
    let configRequired: Bool
    let sysfs: Sysfs
    let accounts = SystemAccounts()
    /// The last picture from netlink, kept so a policy reload can reclassify without a dump.
    private var kernel = KernelSnapshot()
    /// sysfs is read once per link (and again on rename), not on every netlink message.
    private var sysfsCache: [Int32: (name: String, facts: SysfsFacts)] = [:]
    private var sessions: [ObjectIdentifier: Session] = [:]

    /// A connection's peer, identified once at accept; its app match is redone only when the policy changes.
    final class Session {
        let identity: PeerIdentity
        var caller: Caller
        var generation: Int
        init(identity: PeerIdentity, caller: Caller, generation: Int) {
            self.identity = identity; self.caller = caller; self.generation = generation
        }
    }

    init(configPath: String, configRequired: Bool, sysfs: Sysfs) {
        self.configPath = configPath
        self.configRequired = configRequired
        self.sysfs = sysfs
    }

    var summary: String {
        let net = state.network
        let via = net.primary.map { "via \($0.name) (\($0.kind.rawValue))" } ?? "no network"
        return "\(net.links.count) links, \(via), \(state.config.apps.count) apps, policy gen \(state.policyGeneration)"
    }

    func markReady() {
        guard !state.ready else { return }
        state.ready = true
        Log.notice("ready: \(summary)")
    }

    // MARK: - Policy

    /// Parses every file; only if all is valid is the new policy swapped in. Returns the error otherwise.
    @discardableResult
    func loadPolicy() -> String? {
        let config: Config
        do {
            let files = try ConfigFiles.read(configPath, required: configRequired)
            config = try Config.parse(files: files, accounts: accounts)
        } catch {
            let message = "\(error)"
            if state.policyGeneration > 0 {
                Log.err("policy reload failed, keeping generation \(state.policyGeneration): \(message)")
            }
            state.policyError = message
            return message
        }
        state.config = config
        state.policyGeneration += 1
        state.policyError = nil
        if config.adminGID == nil {
            Log.info("group '\(config.adminGroup)' does not exist; only root may ask about other apps")
        }
        Log.info("policy generation \(state.policyGeneration): \(config.apps.count) apps")
        recomputeNetwork()
        return nil
    }

    // MARK: - Links

    func kernelChanged(_ snapshot: KernelSnapshot) {
        kernel = snapshot
        recomputeNetwork()
    }

    private func recomputeNetwork() {
        var seen: Set<Int32> = []
        let overrides = state.config.interfaces
        let network = NetworkState(snapshot: kernel) { facts in
            seen.insert(facts.index)
            return Classifier.classify(facts, sysfs: sysfsFacts(facts), overrides: overrides)
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
            } else if o.kind != l.kind {
                Log.info("\(l.name): kind \(o.kind.rawValue) -> \(l.kind.rawValue) (\(l.classifiedBy))")
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

    // MARK: - Clients

    func connected(_ client: ClientConnection) {
        let identity = Peer.identify(fd: client.fd)
            ?? PeerIdentity(pid: 0, uid: UInt32.max, gids: [], executable: nil, unit: nil,
                            problem: "SO_PEERCRED failed")
        if let p = identity.problem { Log.debug("peer pid \(identity.pid): \(p)") }
        sessions[ObjectIdentifier(client)] = Session(identity: identity, caller: Caller(identity: identity,
            config: state.config), generation: state.policyGeneration)
    }

    func disconnected(_ client: ClientConnection) {
        sessions[ObjectIdentifier(client)] = nil
    }

    func handle(_ client: ClientConnection, _ frame: LineFramer.Frame) -> Response? {
        guard let session = sessions[ObjectIdentifier(client)] else { return nil }
        if session.generation != state.policyGeneration {
            session.caller = Caller(identity: session.identity, config: state.config)
            session.generation = state.policyGeneration
        }
        guard let response = Processor.handle(frame, state: state, caller: session.caller) else { return nil }
        switch response.action {
        case nil:
            return response
        case .reload?:
            let error = loadPolicy()
            return Processor.reloadReply(state: state, error: error)
        }
    }
}
