// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// The privacy report (docs/PRIVACY.md): per owner, per day, per destination and class of link, what the app reached
/// and what was refused. Pure: the edges hand it what the kernel said (`ReportConnection`, `ReportBytes`,
/// `ReportAnswer`), the engine asks it what a caller may read. Bounded: `Limits.entries` in all, one dropped for each
/// new one past that, the oldest (by their last time, `ReportAge`) first; days past `Days=` dropped whole.
public struct ReportBook: Equatable, Sendable {
    public struct Limits: Equatable, Sendable {
        public var entries = 16384
        public var names = ReportNames.Limits()
        public init() {}
    }

    public let limits: Limits
    public private(set) var settings = ReportSettings()
    public private(set) var entries: [ReportKey: ReportEntry] = [:]
    public private(set) var names: ReportNames
    /// Entries just recorded by address, for an answer read after its connection (`learn`).
    private var unnamed = ReportUnnamed()
    /// The entries in the order they go at the bound.
    private(set) var age = ReportAge()
    /// The people who turned the report on for their own apps.
    public private(set) var people: Set<UInt32> = []
    /// Whether anything changed since the file was last written (`saved()`).
    public private(set) var dirty = false
    /// Entries dropped to stay within the bound since the daemon started (METRICS).
    public private(set) var evicted: UInt64 = 0
    /// The last day whose expiry ran: expiring is once a day, not once a connection.
    private var expiredThrough = Int.min

    public static let secondsPerDay = 86400

    public init(limits: Limits = Limits()) {
        self.limits = limits
        names = ReportNames(limits: limits.names)
    }

    /// Whether `owner`'s connections are recorded: the machine's report on, and for a person's own app, that
    /// person's too.
    public func records(_ owner: ReportOwner) -> Bool {
        settings.enabled && (owner.uid.map { people.contains($0) } ?? true)
    }

    /// A policy's `[Report]`. Off forgets everything, the people's choices too (the caller deletes the file); fewer
    /// days drop the older ones.
    public mutating func configure(_ s: ReportSettings, now: Int) {
        settings = s
        if !s.enabled {
            clear { _ in true }
            names.forget { _ in true }
            unnamed = ReportUnnamed()
            age = ReportAge()
            people = []
            return
        }
        expiredThrough = .min
        expire(now: now)
        dropOverBound()
    }

    /// A person turns the report on or off for their own apps; off deletes their entries.
    public mutating func setPerson(_ uid: UInt32, on: Bool) {
        if on {
            if people.insert(uid).inserted { dirty = true }
        } else {
            if people.remove(uid) != nil { dirty = true }
            clear { $0.uid == uid }
        }
    }

    public mutating func record(_ c: ReportConnection) {
        guard records(c.owner) else { return }
        expire(now: c.time)
        let host = name(of: c.address, c.owner, c.namer) ?? c.address
        let key = ReportKey(owner: c.owner, day: Self.day(of: c.time), host: host, link: c.link)
        // Changed in place: one hashing of the key per connection, not two (a flood's cost is this line's).
        let fresh = ReportEntry(address: c.address, port: c.port, proto: c.proto, first: c.time, last: c.time)
        if Self.update(&entries[key, default: fresh], c) {
            age.made(key, at: c.time)
            // By address: the answer that names it may be read just after (ReportUnnamed).
            if host == c.address { unnamed.noted(key, at: c.time) }
        }
        dirty = true
        dropOverBound()
    }

    /// Whether the entry is new (this connection its first).
    private static func update(_ e: inout ReportEntry, _ c: ReportConnection) -> Bool {
        if e.address != c.address { e.address = c.address }
        e.port = c.port
        e.proto = c.proto
        e.first = min(e.first, c.time)
        e.last = max(e.last, c.time)
        e.count(c.outcome, at: c.time)
        return e.connections &+ e.refused == 1
    }

    /// A connection's bytes at its end: added to the newest entry of its destination (the day it began may be past).
    public mutating func add(_ b: ReportBytes) {
        guard records(b.owner), b.bytes > 0 else { return }
        let host = name(of: b.address, b.owner, b.namer) ?? b.address
        let today = Self.day(of: b.time)
        for day in stride(from: today, to: today - settings.days, by: -1) {
            let key = ReportKey(owner: b.owner, day: day, host: host, link: b.link)
            if entries[key] != nil {
                entries[key]!.bytes &+= b.bytes
                dirty = true
                return
            }
        }
    }

    /// The name `owner` resolved `address` to, else the one `namer` did.
    private func name(of address: String, _ owner: ReportOwner, _ namer: ReportOwner?) -> String? {
        names.name(of: address, for: owner) ?? namer.flatMap { names.name(of: address, for: $0) }
    }

    public mutating func learn(_ a: ReportAnswer) {
        guard records(a.owner), !a.addresses.isEmpty else { return }
        names.learn(a)
        // Connections to these addresses recorded just before the answer was read take its name: the app resolved
        // first and connected after, whatever order the loop read the kernel's two sockets in.
        for address in a.addresses.prefix(limits.names.perAnswer) {
            for key in unnamed.take(a.owner, address, at: a.time) { rename(key, to: a.name) }
        }
    }

    /// An entry moved to `host`, added to the one already there.
    private mutating func rename(_ key: ReportKey, to host: String) {
        guard key.host != host, let e = entries.removeValue(forKey: key) else { return }
        var named = key
        named.host = host
        if entries[named] == nil {
            entries[named] = e
            age.made(named, at: e.last)
        } else {
            entries[named]!.merge(e)
        }
        dirty = true
    }

    /// Drops the entries of the owners `drop` names (a person clearing theirs, the report turned off).
    public mutating func clear(where drop: (ReportOwner) -> Bool) {
        let before = entries.count
        entries = entries.filter { !drop($0.key.owner) }
        age.compact(entries)
        names.forget(where: drop)
        if entries.count != before { dirty = true }
    }

    /// Days past `Days=` go whole, once a day.
    public mutating func expire(now: Int) {
        let today = Self.day(of: now)
        guard today > expiredThrough else { return }
        expiredThrough = today
        let oldest = today - settings.days + 1
        let before = entries.count
        entries = entries.filter { $0.key.day >= oldest }
        age.compact(entries)
        if entries.count != before { dirty = true }
    }

    /// What the file held, taken back at start (`ReportFile`); `configure` then applies the policy's bounds.
    mutating func restore(_ kept: [ReportKey: ReportEntry], people: Set<UInt32>) {
        entries = kept
        self.people = people
        age.rebuild(kept)
        dirty = false
    }

    /// The file was written with what the book holds now.
    public mutating func saved() { dirty = false }

    /// One entry out for each past the bound (ReportAge): a flood's cost is spread over its connections, never a
    /// pass that drops thousands.
    private mutating func dropOverBound() {
        while entries.count > limits.entries, age.dropOne(&entries) != nil { evicted &+= 1 }
    }

    /// The entries of the owners `include` admits, ordered by owner, host, link and day (for replies and the file).
    public func rows(where include: (ReportOwner) -> Bool = { _ in true }) -> [(key: ReportKey, entry: ReportEntry)] {
        entries.filter { include($0.key.owner) }.sorted { $0.key < $1.key }.map { (key: $0.key, entry: $0.value) }
    }

    public static func day(of time: Int) -> Int {
        time >= 0 ? time / secondsPerDay : (time - secondsPerDay + 1) / secondsPerDay
    }
}
