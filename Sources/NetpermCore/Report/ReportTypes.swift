// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// Why a connection was refused, as the report shows it (docs/PRIVACY.md).
public enum ReportRefusal: String, CaseIterable, Sendable {
    /// The policy or a decision says deny.
    case denied
    /// An undecided `ask`: held back until someone answers.
    case ask
    /// The app's metered budget is used up.
    case budget
}

public enum ReportOutcome: Equatable, Sendable {
    case allowed
    case refused(ReportRefusal)
}

/// The class of link a connection left by: what the report keeps apart (one destination over wifi and wwan is two
/// entries).
public struct ReportLink: Hashable, Comparable, Sendable {
    public var kind: LinkKind
    public var metered: Bool
    public var roaming: Bool

    public init(kind: LinkKind, metered: Bool = false, roaming: Bool = false) {
        self.kind = kind; self.metered = metered; self.roaming = roaming
    }

    public static func < (a: ReportLink, b: ReportLink) -> Bool {
        (a.kind.rawValue, a.metered ? 1 : 0, a.roaming ? 1 : 0) < (b.kind.rawValue, b.metered ? 1 : 0, b.roaming ? 1 : 0)
    }
}

/// Whose an entry is: an app, and the person it is recorded for (nil: the machine's, no one person's). A user reads
/// only entries of their own uid.
public struct ReportOwner: Hashable, Comparable, Sendable {
    public var app: String
    public var uid: UInt32?

    public init(app: String, uid: UInt32?) { self.app = app; self.uid = uid }

    public static func < (a: ReportOwner, b: ReportOwner) -> Bool {
        (a.app, a.uid.map { Int64($0) } ?? -1) < (b.app, b.uid.map { Int64($0) } ?? -1)
    }
}

/// A new connection of a tagged app, or one of its refused packets, as the kernel told of it.
public struct ReportConnection: Equatable, Sendable {
    public var owner: ReportOwner
    /// The destination's address as text (`AddressText`).
    public var address: String
    public var port: UInt16
    /// The IP protocol number (6 TCP, 17 UDP).
    public var proto: UInt8
    public var link: ReportLink
    /// Wall-clock seconds.
    public var time: Int
    public var outcome: ReportOutcome
    /// Whose answers name it when its owner's do not: a user's unit's app, whose answers are its uid's app's
    /// (ReportUnits; the answers' rule knows the tag only).
    public var namer: ReportOwner?

    public init(owner: ReportOwner, address: String, port: UInt16, proto: UInt8, link: ReportLink, time: Int,
                outcome: ReportOutcome = .allowed, namer: ReportOwner? = nil) {
        self.owner = owner; self.address = address; self.port = port; self.proto = proto; self.link = link
        self.time = time; self.outcome = outcome; self.namer = namer
    }
}

/// A connection's end with its bytes (both ways), where the kernel counts them.
public struct ReportBytes: Equatable, Sendable {
    public var owner: ReportOwner
    public var address: String
    public var link: ReportLink
    public var time: Int
    public var bytes: UInt64
    /// As `ReportConnection.namer`.
    public var namer: ReportOwner?

    public init(owner: ReportOwner, address: String, link: ReportLink, time: Int, bytes: UInt64, namer: ReportOwner? = nil) {
        self.owner = owner; self.address = address; self.link = link; self.time = time; self.bytes = bytes
        self.namer = namer
    }
}

/// A DNS answer the app itself received: the name it asked for and the addresses the answer gave.
public struct ReportAnswer: Equatable, Sendable {
    public var owner: ReportOwner
    /// Already made safe (`DNSAnswer`: escaped, at most 253 characters).
    public var name: String
    public var addresses: [String]
    public var time: Int

    public init(owner: ReportOwner, name: String, addresses: [String], time: Int) {
        self.owner = owner; self.name = name; self.addresses = addresses; self.time = time
    }
}

/// One entry: an owner, a UTC day, a destination (its name where the app resolved one, else its address) and a class
/// of link.
public struct ReportKey: Hashable, Comparable, Sendable {
    public var owner: ReportOwner
    /// Days since 1970-01-01 (UTC).
    public var day: Int
    public var host: String
    public var link: ReportLink

    public static func < (a: ReportKey, b: ReportKey) -> Bool {
        if a.owner != b.owner { return a.owner < b.owner }
        if a.host != b.host { return a.host < b.host }
        if a.link != b.link { return a.link < b.link }
        return a.day < b.day
    }
}

/// What an entry holds.
public struct ReportEntry: Equatable, Sendable {
    /// The last address and port reached under this entry's host.
    public var address: String
    public var port: UInt16
    public var proto: UInt8
    public var first: Int
    public var last: Int
    /// Connections made (allowed).
    public var connections: UInt64 = 0
    /// Bytes both ways of the connections that ended, where the kernel counts them.
    public var bytes: UInt64 = 0
    public var denied: UInt64 = 0
    public var ask: UInt64 = 0
    public var budget: UInt64 = 0
    /// When the first and the last refusal were (0: none), apart from the connections' times.
    public var refusedFirst = 0
    public var refusedLast = 0

    public init(address: String, port: UInt16, proto: UInt8, first: Int, last: Int) {
        self.address = address; self.port = port; self.proto = proto; self.first = first; self.last = last
    }

    public var refused: UInt64 { denied &+ ask &+ budget }

    mutating func count(_ outcome: ReportOutcome, at time: Int) {
        switch outcome {
        case .allowed: connections &+= 1
        case .refused(.denied): denied &+= 1
        case .refused(.ask): ask &+= 1
        case .refused(.budget): budget &+= 1
        }
        if case .refused = outcome { refused(at: time, time) }
    }

    /// Another entry of the same destination added to this one; the address and port of the later.
    mutating func merge(_ o: ReportEntry) {
        if o.last >= last { (address, port, proto) = (o.address, o.port, o.proto) }
        first = min(first, o.first)
        last = max(last, o.last)
        connections &+= o.connections
        bytes &+= o.bytes
        denied &+= o.denied
        ask &+= o.ask
        budget &+= o.budget
        if o.refusedFirst != 0 { refused(at: o.refusedFirst, o.refusedLast) }
    }

    /// Refusals between `first` and `last` (times kept apart from the connections').
    mutating func refused(at first: Int, _ last: Int) {
        refusedFirst = refusedFirst == 0 ? first : min(refusedFirst, first)
        refusedLast = max(refusedLast, last)
    }
}
