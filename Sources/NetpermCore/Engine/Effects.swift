// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// A control connection, numbered by the transport.
public typealias ConnectionID = UInt64
/// A timer the engine armed, numbered by the engine.
public typealias TimerID = UInt64

/// Syslog priorities: the engine's log lines carry one, and the edge writes `<N>` before them for journald.
public enum Priority: Int32, Sendable, Comparable, CaseIterable {
    case err = 3, warning = 4, notice = 5, info = 6, debug = 7

    public static func < (a: Priority, b: Priority) -> Bool { a.rawValue < b.rawValue }

    public init?(name: String) {
        switch name.lowercased() {
        case "err", "error": self = .err
        case "warning", "warn": self = .warning
        case "notice": self = .notice
        case "info": self = .info
        case "debug": self = .debug
        default: return nil
        }
    }
}

/// What a log line is about, as journal fields (`journalctl APP=maps`, `INTERFACE=wwan0`, `UID=1000`): the edge
/// writes them where the journal takes fields, and nowhere else.
public struct LogFields: Equatable, Sendable {
    public var app: String?
    public var interface: String?
    public var uid: UInt32?

    public init(app: String? = nil, interface: String? = nil, uid: UInt32? = nil) {
        self.app = app; self.interface = interface; self.uid = uid
    }

    public static let none = LogFields()

    /// `(NAME, value)` pairs, in a fixed order; the values escaped as the message is.
    public var pairs: [(String, String)] {
        var p: [(String, String)] = []
        if let app { p.append(("APP", SafeText.escape(app))) }
        if let interface { p.append(("INTERFACE", SafeText.escape(interface))) }
        if let uid { p.append(("UID", String(uid))) }
        return p
    }
}

/// What the service manager is told (sd_notify).
public enum NotifyMessage: Equatable, Sendable {
    /// READY=1 with STATUS=: start-up done, or a reload finished (successfully or not).
    case ready(status: String)
    case status(String)
    /// RELOADING=1 (the edge adds MONOTONIC_USEC=).
    case reloading
    case stopping
}

/// One thing the daemon must do for the engine. Bytes live in `Effects.bytes`; an effect names a range of them.
public enum Effect: Equatable, Sendable {
    /// A reply: never dropped (the transport bounds a client by not reading its requests).
    case reply(ConnectionID, Range<Int>)
    /// An event line, `head` (the subscriber's own `{"event":...,"seq":N`) then `tail` (shared by all subscribers):
    /// the transport drops a subscriber that falls too far behind.
    case event(ConnectionID, head: Range<Int>, tail: Range<Int>)
    /// Take no more requests from the connection until `resume` (a reply is deferred: WAIT, RELOAD, DECIDE).
    case hold(ConnectionID)
    case resume(ConnectionID)
    /// Close once what is queued has been sent (QUIT).
    case close(ConnectionID)
    /// The end of the client's input does not end the connection (a subscriber follows events).
    case keepOpenAfterInputEnds(ConnectionID)
    case armTimer(TimerID, microseconds: UInt64)
    case cancelTimer(TimerID)
    /// Write the lasting decisions to disk, then report with `Input.stored`.
    case persist(Decisions)
    /// Read and parse the policy files, then report with `Input.policy`, with what `Engine.reloadBasis`'s `prepare`
    /// makes of them (away from the loop).
    case loadPolicy
    case notify(NotifyMessage)
    case log(Priority, String, LogFields)
    /// Asked for: these nft scripts, each as one transaction, in order, stopping at the first that fails (the whole
    /// ruleset, `Ruleset.update(from:)`'s transactions, or `Ruleset.removal`), run in turn by `Effect.runLoad` and
    /// ended by `Effect.loadAnswered` naming `id`; with `report`, the engine acts on the answer. `inForce` is the whole
    /// ruleset they lead to: what a repair loads again when another process changes the table. `handles`: the
    /// daemon's cgroup descriptors `inForce` names (Ruleset.handles), to keep open until the load's answer.
    case loadRules(id: UInt64, [RuleTransaction], report: Bool, inForce: String, handles: Set<Int32>)
    /// Ask the kernel whether the tables a load depends on exist, then report with `Input.tablesLookedUp`.
    case lookUpTables(TableUpkeep.Lookup)
    /// Run this load (off the loop; the load asked for as `id`, nil for a repair), then report with `Input.loadRan`:
    /// its failure, and whether another process committed meanwhile.
    case runLoad(id: UInt64?, TableUpkeep.Run)
    /// The load asked for as `id` ended (run or not): the descriptors it named may go.
    case loadAnswered(id: UInt64, error: EdgeError?)
    /// Open or close what follows the tables (the NFLOG group, the event socket, the element socket, a repair
    /// timer), as what is in force now asks.
    case followTables(TableUpkeep.Watching)
    /// Another process committed during the daemon's own load: tell with `Input.tablesChanged` on the loop's next
    /// turn (after this load is accounted for), once however often asked before then.
    case repairTablesSoon
    /// Name units just made with this from now on (none: nil), off the loop as their directory's watch sees them
    /// (Engine+FreshUnits.swift), and tell with `Input.unitsNamed`.
    case nameUnits(UnitNaming?)
    /// Add or delete these elements of unit cgroups named by id (Engine+FreshUnits.swift) as one transaction of their
    /// own, never behind a load of `loadRules`; answered by `Input.unitElementsLoaded(ids:)`.
    case loadUnitElements(ElementChanges, ids: [UInt64])
    /// Tell with `Input.exited` when this process exits (at once if it has already): a prompt it asked is withdrawn
    /// once nobody who asked is left.
    case watchExit(Int32)
    /// No prompt needs to know of the process's exit any more.
    case unwatchExit(Int32)
    /// Read the usage table's counters and quota objects, then report with `Input.usageRead`.
    case readUsage
    /// Write the usage totals to the state directory (atomically), then report with `Input.usageSaved`.
    case saveUsage(UsageBook)
    /// Write the apps' connection tags (the state directory's `tags`), the latest replacing any not yet written.
    case saveTags(TagTable)
    /// Asked for: this nft script as one transaction (`UsageRules.script`, or `UsageRules.removal`, which runs only if
    /// the table exists), in turn with the rules' loads, as `loadRules` is; with `report`, the engine acts on the
    /// answer. `handles`: the cgroup descriptors it names (UsageRules.handles), to keep open until its answer.
    case loadUsageRules(id: UInt64, String, report: Bool, handles: Set<Int32>)
    /// Mode=steer: write exactly this to the kernel (the program and its maps, the rules, the tables, which follow
    /// the main table), or remove all of it. Say how far it went with `Input.steered`.
    case steer(SteeringStep)
    /// Ask the kernel where this destination's traffic goes (`ip route get ADDRESS uid UID [mark M]`), then report
    /// with `Input.routed`.
    case lookUpRoute(ConnectionID, RouteQuestion)
    /// Look at each exec of a person's session for these programs from now on (ExecWatcher), and tell of those found
    /// with `Input.execFound`.
    case watchExecs(ExecIndex)
    /// Move a process into a new scope of its user's manager (StartTransientUnit), then report with
    /// `Input.scopeMade`.
    case makeScope(ScopeRequest)
    /// A process a user's `netpermctl scopes` says owns an installed app's name on its session bus: the edge checks
    /// that it is that uid's and where it runs, then tells it as `Input.execFound`.
    case checkClaim(ProcessClaim)
    /// A scope asked for was made: look for new units now, so that its app, new to the rules, joins them with it.
    case scanCgroupsSoon
    /// Write the privacy report to the state directory (atomically), then report with `Input.reportSaved`.
    case saveReport(ReportBook)
    /// Delete the report's file: the report was turned off (PRIVACY.md).
    case removeReport
    /// Keep (true) or close (false) the report's readers: conntrack's events and the DNS answers' NFLOG group,
    /// which tell with `Input.reportSighted`.
    case watchReport(Bool)
}

extension Effect {
    /// Which effect it is, for a log line (never its contents).
    public var name: String {
        switch self {
        case .reply: return "a reply"
        case .event: return "an event"
        case .hold: return "a hold"
        case .resume: return "a resume"
        case .close: return "a close"
        case .keepOpenAfterInputEnds: return "keeping a subscriber"
        case .armTimer: return "arming a timer"
        case .cancelTimer: return "cancelling a timer"
        case .persist: return "writing the decisions"
        case .loadPolicy: return "reading the policy"
        case .notify: return "notifying the service manager"
        case .log: return "a log line"
        case .loadRules: return "loading the rules"
        case .lookUpTables: return "looking up the tables"
        case .runLoad: return "running a load"
        case .loadAnswered: return "a load answered"
        case .followTables: return "following the tables"
        case .repairTablesSoon: return "repairing the table soon"
        case .nameUnits: return "how units are named"
        case .loadUnitElements: return "naming units again"
        case .watchExit: return "watching an asker"
        case .unwatchExit: return "no longer watching an asker"
        case .readUsage: return "reading the usage counters"
        case .saveUsage: return "writing the usage totals"
        case .saveTags: return "writing the connection tags"
        case .loadUsageRules: return "loading the counting rules"
        case .steer: return "steering"
        case .lookUpRoute: return "a route lookup"
        case .watchExecs: return "which programs are apps"
        case .makeScope: return "making an app's scope"
        case .checkClaim: return "looking at a process found by its bus name"
        case .scanCgroupsSoon: return "looking for new units"
        case .saveReport: return "writing the privacy report"
        case .removeReport: return "deleting the privacy report"
        case .watchReport: return "the report's readers"
        }
    }
}

/// The effects of one input, in order, and the bytes they refer to. Reused from input to input, so a request's
/// reply costs no allocation once the buffers have grown.
public final class Effects {
    public private(set) var list: [Effect] = []
    public let bytes = ByteBuffer(capacity: 4096)

    public init() {}

    public func reset() {
        list.removeAll(keepingCapacity: true)
        bytes.count = 0
    }

    func append(_ e: Effect) { list.append(e) }

    /// Writes bytes with `body` and returns their range.
    func write(_ body: (ByteBuffer) -> Void) -> Range<Int> {
        let start = bytes.count
        body(bytes)
        return start..<bytes.count
    }

    /// The bytes of a range, for an edge that must keep them.
    public subscript(range: Range<Int>) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: bytes.base + range.lowerBound, count: range.count)
    }
}
