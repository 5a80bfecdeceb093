// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermHost
import NetpermIO
import NetpermNftables
import NetpermProtocol
import NetpermSystemd

/// The edges the interpreter drives besides the loop and the transport, each a protocol: the daemon gives it the
/// real adapters, its unit tests fakes, so that what the interpreter does with each effect is tested without root,
/// the kernel or the disk.

/// Where lasting decisions are written (`DecisionStore`). Called off the loop's thread.
public protocol DecisionSaving: Sendable {
    var path: String { get }
    func save(_ d: Decisions) -> StoreOutcome
}

extension DecisionStore: DecisionSaving {}

/// Enforcement in the kernel (`Enforcer`: libnftables, the nftables event socket, NFLOG). What runs when, what is in
/// force and whether another process's change is repaired are the engine's (Engine+Tables.swift): this only carries
/// out its steps and says what the kernel did.
public protocol RuleLoading: AnyObject {
    /// A load the engine asked for (`Effect.loadRules`, `loadUsageRules`): it runs when the engine says (`run`); a fake
    /// notes it here.
    func asked(_ transactions: [RuleTransaction], usage: Bool)
    /// What the kernel says of the tables a load depends on.
    func lookUp(_ lookup: TableUpkeep.Lookup) -> TableUpkeep.TableLookup
    /// Runs the load (off the loop if a thread can be had); `done` gets its failure and whether another process
    /// committed to nftables meanwhile, on the loop's thread, possibly inside this call.
    func run(_ run: TableUpkeep.Run, done: @escaping (EdgeError?, Bool) -> Void)
    /// Opens or closes what follows the tables (NFLOG, the event socket, the element socket, the repair timer).
    func follow(_ watching: TableUpkeep.Watching)
    /// Another process committed during the daemon's own load: `changed` on the loop's next turn, once.
    func repairSoon()
    /// Another process changed a table (the event socket), or a repair soon came due.
    var changed: (TablesChange) -> Void { get set }
    /// The kernel rejected and logged a packet of this app and pending kind.
    var blocked: (String, PolicyDimension, UInt32?, Int32?, String?, Bool) -> Void { get set }
    /// Element changes of units just made or gone, by cgroup id, as one transaction never behind a load of `run`'s
    /// (UnitLane); `done` gets nil, or why the kernel refused them, as `run`'s does.
    func loadUnitElements(_ changes: ElementChanges, done: @escaping (EdgeError?) -> Void)
    /// Another socket of the daemon's commits to the table (UnitNamer): its port, and its batches begun and finished.
    func alsoCommitting(port: UInt32, commits: @escaping () -> (started: UInt32, finished: UInt32))
    /// The kernel said a quota object of the usage table ran out.
    var quotaReached: (QuotaName) -> Void { get set }
}

extension RuleLoading {
    public func asked(_ transactions: [RuleTransaction], usage: Bool) {}
}

extension Enforcer: RuleLoading {}

/// Where the usage totals are written (`UsageStore`). Called off the loop's thread.
public protocol UsageSaving: Sendable {
    var path: String { get }
    func save(_ book: UsageBook) -> StoreOutcome
}

extension UsageStore: UsageSaving {}

/// The usage table's counters and quota objects (`UsageCounters`, over netfilter netlink); nil: no table.
/// Read on a thread of its own (UsageReads): one reading of 10,001 apps' counters is tens of
/// milliseconds.
public protocol UsageCounting: AnyObject, Sendable {
    func read() -> Result<UsageReading?, Errno>
}

final class KernelUsageCounters: UsageCounting, Sendable {
    func read() -> Result<UsageReading?, Errno> { Result { () throws(Errno) in try UsageCounters.read() } }
}

/// Mode=steer's program, maps, rules and tables (`Steerer`).
public protocol SteeringLoading: AnyObject {
    /// Writes what the engine's step names to the kernel; how far it went.
    func carryOut(_ action: SteeringStep.Action) -> SteeringOutcome
}

extension Steerer: SteeringLoading {}

/// What the service manager is told, as sd_notify(3) fields.
public enum ServiceManager {
    public static func fields(_ n: NotifyMessage) -> String {
        switch n {
        case let .ready(status): return "READY=1\nSTATUS=\(status)"
        case let .status(status): return "STATUS=\(status)"
        // As Type=notify-reload expects (and Type=notify accepts).
        case .reloading: return "RELOADING=1\nMONOTONIC_USEC=\(Clock.monotonicMicroseconds())"
        case .stopping: return "STOPPING=1"
        }
    }

    /// sd_notify(3) of the message (nothing without NOTIFY_SOCKET).
    public static func notify(_ n: NotifyMessage) { Notify.send(fields(n)) }
}
