// SPDX-License-Identifier: LGPL-2.1-or-later
/// Another process changed one of the daemon's nftables tables (`Input.tablesChanged`): the nftables event socket
/// saw it, or a commit of another process during the daemon's own load asked for a repair (`Effect.repairTablesSoon`).
public struct TablesChange: Equatable, Sendable {
    /// The counting table (not the rules' table).
    public var usage: Bool
    /// When (monotonic µs): repairs are bounded per second.
    public var at: UInt64
    public var by: Changer

    public init(usage: Bool, at: UInt64, by: Changer) {
        self.usage = usage; self.at = at; self.by = by
    }

    /// Who changed it, for the log.
    public enum Changer: Equatable, Sendable {
        /// The event socket named the process.
        case process(pid: UInt32, name: String?)
        /// It committed while the daemon's own load ran (out of the event group then).
        case duringOwnLoad
        /// The event socket lost events: someone may have.
        case unknown
    }

    var who: String {
        switch by {
        case let .process(pid, name): return "pid \(pid)" + (name.map { " (\($0))" } ?? "")
        case .duringOwnLoad: return "another process (it committed during the daemon's own load)"
        case .unknown: return "another process (events were lost)"
        }
    }
}
