// SPDX-License-Identifier: LGPL-2.1-or-later
/// Why one of the engine's edges failed (the kernel, libnftables, the disk): which operation, the errno when the
/// kernel or libc gave one, and the edge's own words for the log. The engine decides on `operation` and `errno`
/// (EPERM is not EBUSY); what it logs and reports (log lines, STATUS, STATUS=, replies) is `description`, the
/// edge's words as they are.
public struct EdgeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What the edge was doing, one case per kind of effect whose outcome comes back as an `Input`.
    public enum Operation: String, Equatable, Sendable, CaseIterable {
        /// `Effect.persist`: the decisions file written.
        case storeDecisions = "storing the decisions"
        /// The connection tags file written (the interpreter's own; no input).
        case storeTags = "storing the connection tags"
        /// `Effect.loadRules`, or a repair after another process changed the table.
        case loadRules = "loading the rules"
        /// Units named in the kernel as their cgroups were made (`Input.unitsNamed`).
        case nameUnits = "naming units just made"
        /// `Effect.loadUnitElements`.
        case loadUnitElements = "naming units again"
        /// `Effect.steer`, or steering following the main table.
        case steer = "steering"
        /// `Effect.readUsage`.
        case readUsage = "reading the usage counters"
        /// `Effect.saveUsage`.
        case saveUsage = "saving the usage totals"
        /// `Effect.saveReport` and `Effect.removeReport`.
        case saveReport = "saving the privacy report"
        /// `Effect.loadUsageRules`.
        case loadUsageRules = "loading the counting rules"
        /// `Effect.lookUpRoute`.
        case lookUpRoute = "looking up a route"
        /// `Effect.makeScope`.
        case makeScope = "making an app's scope"
    }

    public var operation: Operation
    /// The errno the kernel or libc answered with; nil when the failure is not one (libnftables' parser, a batch
    /// too large, no cgroup hierarchy).
    public var errno: Int32?
    /// The edge's own words, whole: libnftables' message, the path and strerror(3), a parser's.
    public var message: String

    public init(_ operation: Operation, errno: Int32? = nil, _ message: String) {
        self.operation = operation
        self.errno = errno
        self.message = message
    }

    /// Exactly what the engine logs and reports.
    public var description: String { message }
}
