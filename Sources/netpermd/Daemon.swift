import Glibc
import NetpermControl
import NetpermCore
import NetpermIO
import NetpermSystemd

/// The daemon's mutable state and the glue between the edges and the pure core.
final class Daemon {
    // The class is split by concern over Daemon+Clients, +Events and +Prompts; what they share is internal to
    // this executable rather than private.

    /// Every mutation of the state, whatever its field, makes cached replies stale.
    var state = DaemonState() { didSet { stateVersion &+= 1 } }
    private(set) var stateVersion = 0
    /// Where cacheable replies are encoded before they are copied out.
    let replyScratch = ByteBuffer(capacity: 4096)
    let configPath: String
    let configRequired: Bool
    let sysfs: Sysfs
    let accounts = SystemAccounts()
    /// Peers running as the daemon's own user are privileged (Config.isPrivileged).
    let daemonUID = geteuid()
    /// The last picture from netlink, kept so a policy reload can reclassify without a dump.
    private var kernel = KernelSnapshot()
    /// sysfs is read once per link (and again on rename), not on every netlink message.
    private var sysfsCache: [Int32: (name: String, facts: SysfsFacts)] = [:]
    var sessions: [ObjectIdentifier: Session] = [:]
    /// Every app someone may hear about, with its last verdict.
    var tracker = VerdictTracker()
    var subscribers: [ObjectIdentifier: Session] = [:]
    var waiters: [ObjectIdentifier: Session] = [:]
    let loop: EventLoop
    let decisionStore: DecisionStore
    var promptTimers: [Int: TimerSource] = [:]
    /// AdminGroup='s gid under one policy generation, looked up when a non-root peer first needs it.
    var resolvedAdminGID: (generation: Int, gid: UInt32?)?
    /// "app kind" pairs already logged as asked with no agent; emptied when an agent comes.
    var unaskedLogged: Set<String> = []
    static let unaskedLogLimit = 256

    /// A connection's peer, identified once at accept; its app match is redone when the policy changes.
    final class Session {
        let client: ClientConnection
        let identity: PeerIdentity
        var caller: Caller
        var subscription: Subscription?
        /// `own`: the app waits for itself, so it is "asking" and may raise prompts.
        var waiting: (match: AppMatch, timer: TimerSource?, own: Bool)?
        /// The last plain reply: clients that poll (QUERY in a loop) get the same bytes while nothing changed.
        var cache: (line: [UInt8], version: Int, reply: [UInt8])?
        init(client: ClientConnection, identity: PeerIdentity, caller: Caller) {
            self.client = client; self.identity = identity; self.caller = caller
        }
    }

    init(loop: EventLoop, configPath: String, configRequired: Bool, sysfs: Sysfs, stateDir: String) {
        self.loop = loop
        decisionStore = DecisionStore(stateDir: stateDir)
        state.decisions = decisionStore.load()
        self.configPath = configPath
        self.configRequired = configRequired
        self.sysfs = sysfs
    }

    /// What the STATUS= line says, compared before the line is formatted: events come far more often than the
    /// line changes.
    struct Summary: Equatable {
        var links: Int, primary: String?, primaryKind: LinkKind?, apps: Int, generation: Int, policyError: String?
    }

    var summaryFacts: Summary {
        let p = state.network.primary
        return Summary(links: state.network.links.count, primary: p?.name, primaryKind: p?.kind,
                       apps: state.config.apps.count, generation: state.policyGeneration,
                       policyError: state.policyError)
    }

    /// The STATUS= line: `systemctl status` shows it, so a failed reload names its error there too.
    var summary: String {
        let s = summaryFacts
        var via = "no network"
        if let name = s.primary, let kind = s.primaryKind { via = "via \(name) (\(kind.rawValue))" }
        var line = "\(s.links) links, \(via), \(s.apps) apps, policy gen \(s.generation)"
        if let e = s.policyError {
            line += "; reload failed: " + (e.utf8.count > 300 ? String(decoding: e.utf8.prefix(300), as: UTF8.self) + "..." : e)
        }
        return line
    }

    /// What the STATUS= line last sent to the service manager said.
    var lastStatus: Summary?

    func markReady() {
        guard !state.ready else { return }
        state.ready = true
        emit(tracker.refresh(state: state))
        lastStatus = summaryFacts
        Notify.ready(status: summary)
        Log.notice("ready: \(summary)")
    }

    /// SIGHUP, RELOAD and inotify all come here, so the service manager sees RELOADING=1 ... READY=1 each time.
    @discardableResult
    func reload() -> String? {
        Notify.reloading()
        let error = loadPolicy()
        lastStatus = summaryFacts
        Notify.send("READY=1\nSTATUS=\(summary)")
        return error
    }

    // MARK: - Policy

    /// Parses every file; only if all is valid is the new policy swapped in. Returns the error otherwise: the
    /// first one, and how many more (each is logged on its own line).
    @discardableResult
    func loadPolicy() -> String? {
        let parsed: ConfigParseResult
        do {
            parsed = Config.parse(files: try ConfigFiles.read(configPath, required: configRequired), accounts: accounts)
        } catch {
            return policyFailed("\(error)")
        }
        // Every load, not only the first: a reload is when an edit's typo shows up.
        for problem in parsed.problems {
            switch problem.severity {
            case .error: Log.err("\(problem)")
            case .warning: Log.warning("\(problem)")
            }
        }
        let unlisted = parsed.errorCount + parsed.warningCount - parsed.problems.count
        if unlisted > 0 { Log.warning("\(configPath): \(unlisted) more problems not listed") }
        guard let config = parsed.config else { return policyFailed(parsed.failure ?? "invalid policy") }
        state.config = config
        state.policyGeneration += 1
        state.policyError = nil
        // A --once decision holds until the policy changes.
        state.decisions.dropOnce()
        let warnings = parsed.warningCount == 0 ? ""
            : ", \(parsed.warningCount) warning\(parsed.warningCount == 1 ? "" : "s")"
        Log.info("policy generation \(state.policyGeneration): \(config.apps.count) apps\(warnings)")
        for session in sessions.values {
            session.caller = Caller(identity: session.identity, config: config, daemonUID: daemonUID,
                                    adminGID: adminGID)
            session.subscription?.privileged = session.caller.privileged
            session.subscription?.appID = session.caller.match.id
            if let w = session.waiting, w.match.matchedBy != .name { session.waiting?.match = session.caller.match }
        }
        // Privileges may have changed with the policy, and with them who counts as an agent.
        state.agents = agentCount()
        if state.agents > 0 { unaskedLogged = [] }
        var events: [Event] = [.policy(generation: state.policyGeneration, apps: config.apps.count, error: nil)]
        events += recomputeNetwork(emitting: false)
        events += tracker.reset(state: state, extra: extraMatches())
        emit(events)
        return nil
    }

    /// A load failed: the last good policy stays, and STATUS and subscribers hear why.
    private func policyFailed(_ message: String) -> String {
        if state.policyGeneration > 0 {
            Log.err("policy reload failed, keeping generation \(state.policyGeneration): \(message)")
        }
        state.policyError = message
        emit([.policy(generation: state.policyGeneration, apps: state.config.apps.count, error: message)])
        return message
    }

    /// Apps outside the policy that someone listens to or waits for.
    func extraMatches() -> [AppMatch] {
        subscribers.values.map(\.caller.match) + waiters.values.compactMap { $0.waiting?.match }
    }

    // MARK: - Links

    func kernelChanged(_ snapshot: KernelSnapshot) {
        kernel = snapshot
        emit(recomputeNetwork(emitting: true))
    }

    /// Rebuilds the picture from the last kernel snapshot; returns link events, and app events when asked.
    private func recomputeNetwork(emitting apps: Bool) -> [Event] {
        var seen: Set<Int32> = []
        let overrides = state.config.interfaces
        let network = NetworkState(snapshot: kernel) { facts in
            seen.insert(facts.index)
            return Classifier.classify(facts, sysfs: sysfsFacts(facts), overrides: overrides)
        }
        if sysfsCache.count != seen.count { sysfsCache = sysfsCache.filter { seen.contains($0.key) } }
        let old = state.network
        guard setNetwork(network) else { return [] }
        return Event.linkChanges(from: old, to: network) + (apps ? tracker.refresh(state: state) : [])
    }

    private func sysfsFacts(_ link: LinkFacts) -> SysfsFacts {
        if let cached = sysfsCache[link.index], cached.name == link.name { return cached.facts }
        let facts = sysfs.facts(forInterface: link.name)
        sysfsCache[link.index] = (link.name, facts)
        return facts
    }

    /// The one setter for the network picture; logs what changed, old -> new. False when nothing did.
    private func setNetwork(_ new: NetworkState) -> Bool {
        let old = state.network
        guard old != new else { return false }
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
        return true
    }
}
