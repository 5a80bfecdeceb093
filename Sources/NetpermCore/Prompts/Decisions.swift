// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// The answers to prompts. They only ever apply where the policy says `ask`: an explicit allow or deny in the
/// policy file always wins. A decision is for everyone (root, the daemon's uid or `AdminGroup=` made it) or for
/// one uid's processes only (that user made it, `[Defaults] UserDecisions=yes`); for everyone wins over a uid's.
public struct Decisions: Equatable, Sendable {
    public typealias Table = [String: [PolicyDimension: Permission]]

    public private(set) var lasting: Table = [:]
    public private(set) var once: Table = [:]
    /// Users' own decisions, by uid, each for that uid's processes only.
    public private(set) var userLasting: [UInt32: Table] = [:]
    public private(set) var userOnce: [UInt32: Table] = [:]

    public init() {}

    public var isEmpty: Bool { lasting.isEmpty && once.isEmpty && userLasting.isEmpty && userOnce.isEmpty }

    /// The decision for the app and kind, for everyone's processes (`uid` nil) or for those of `uid`.
    public func decision(_ app: String, _ kind: PolicyDimension, uid: UInt32? = nil) -> (Permission, PermissionSource)? {
        if let p = once[app]?[kind] { return (p, .once) }
        if let p = lasting[app]?[kind] { return (p, .decision) }
        guard let uid else { return nil }
        if let p = userOnce[uid]?[app]?[kind] { return (p, .userOnce) }
        if let p = userLasting[uid]?[app]?[kind] { return (p, .userDecision) }
        return nil
    }

    /// How many apps `uid` decided for, lasting or once.
    public func ownApps(uid: UInt32) -> Int {
        Set((userLasting[uid] ?? [:]).keys).union((userOnce[uid] ?? [:]).keys).count
    }

    /// Whether `uid` decided anything for the app itself.
    public func hasOwn(_ app: String, uid: UInt32) -> Bool {
        userOnce[uid]?[app] != nil || userLasting[uid]?[app] != nil
    }

    /// A lasting decision replaces a once-decision for the same app, kind and uid, and vice versa.
    public mutating func set(_ app: String, _ kind: PolicyDimension, _ p: Permission, once isOnce: Bool,
                             uid: UInt32? = nil) {
        if let uid {
            if isOnce {
                userOnce[uid, default: [:]][app, default: [:]][kind] = p
            } else {
                userLasting[uid, default: [:]][app, default: [:]][kind] = p
                Self.remove(&userOnce, uid, app, kind)
            }
        } else if isOnce {
            once[app, default: [:]][kind] = p
        } else {
            lasting[app, default: [:]][kind] = p
            Self.remove(&once, app, kind)
        }
    }

    /// Removes the app's decisions (for one kind, or all): everyone's and every uid's (`uid` nil), or one uid's
    /// own. Returns whether anything was removed.
    @discardableResult
    public mutating func forget(_ app: String, kind: PolicyDimension?, uid: UInt32? = nil) -> Bool {
        var removed = false
        if uid == nil {
            removed = Self.remove(&lasting, app, kind) || removed
            removed = Self.remove(&once, app, kind) || removed
        }
        for u in Set(userLasting.keys).union(userOnce.keys) where uid == nil || uid == u {
            removed = Self.remove(&userLasting, u, app, kind) || removed
            removed = Self.remove(&userOnce, u, app, kind) || removed
        }
        return removed
    }

    @discardableResult
    private static func remove(_ table: inout Table, _ app: String, _ kind: PolicyDimension?) -> Bool {
        guard let kind else { return table.removeValue(forKey: app) != nil }
        guard table[app]?.removeValue(forKey: kind) != nil else { return false }
        if table[app]?.isEmpty == true { table[app] = nil }
        return true
    }

    @discardableResult
    private static func remove(_ tables: inout [UInt32: Table], _ uid: UInt32, _ app: String,
                               _ kind: PolicyDimension?) -> Bool {
        guard var t = tables[uid] else { return false }
        let removed = remove(&t, app, kind)
        tables[uid] = t.isEmpty ? nil : t
        return removed
    }

    /// The apps whose decisions differ between these and `other` (for everyone or for any uid): the only apps whose
    /// permissions a change from one to the other moves.
    public func apps(differingFrom other: Decisions) -> Set<String> {
        var apps: Set<String> = []
        func compare(_ a: Table, _ b: Table) {
            for (app, kinds) in a where b[app] != kinds { apps.insert(app) }
            for app in b.keys where a[app] == nil { apps.insert(app) }
        }
        compare(lasting, other.lasting)
        compare(once, other.once)
        for uid in Set(userLasting.keys).union(other.userLasting.keys) { compare(userLasting[uid] ?? [:], other.userLasting[uid] ?? [:]) }
        for uid in Set(userOnce.keys).union(other.userOnce.keys) { compare(userOnce[uid] ?? [:], other.userOnce[uid] ?? [:]) }
        return apps
    }

    public mutating func dropOnce() {
        once = [:]
        userOnce = [:]
    }

    /// The policy's permissions with decisions applied where the policy says `ask`, and where each came from: for
    /// everyone's processes (`uid` nil), or for those of `uid`, whose own decisions fill what nobody decided for
    /// everyone.
    public func apply(to policy: PermissionSet, app: String, uid: UInt32? = nil) -> EffectivePermissions {
        var e = EffectivePermissions(permissions: policy)
        for (_, kind) in PermissionSet.dimensions where policy[kind] == .ask {
            if let (p, source) = decision(app, kind, uid: uid) {
                e.permissions[kind] = p
                e.sources[kind] = source
            }
        }
        return e
    }

    /// One decision as `DECISIONS` lists it.
    public struct Entry: Equatable, Sendable {
        public var app: String
        public var kind: PolicyDimension
        public var decision: Permission
        public var once: Bool
        /// nil: for everyone.
        public var uid: UInt32?

        /// A `DECISIONS` entry, and a `user_decisions` one.
        public func write(to w: inout JSONWriter) {
            w.field("app", app)
            w.field("kind", kind.rawValue)
            w.field("decision", decision.rawValue)
            w.field("once", once)
            w.field("for_uid", uid.map { Int($0) })
        }
    }

    /// Every decision, everyone's first, then by uid; within each by app and kind. `uid`: only that uid's own.
    public func entries(onlyUID uid: UInt32? = nil) -> [Entry] {
        func rows(_ lasting: Table, _ once: Table, _ u: UInt32?) -> [Entry] {
            Set(lasting.keys).union(once.keys).sorted().flatMap { app in
                PermissionSet.dimensions.flatMap { _, kind -> [Entry] in
                    [(lasting, false), (once, true)].compactMap { table, isOnce in
                        table[app]?[kind].map { Entry(app: app, kind: kind, decision: $0, once: isOnce, uid: u) }
                    }
                }
            }
        }
        var out = uid == nil ? rows(lasting, once, nil) : []
        for u in Set(userLasting.keys).union(userOnce.keys).sorted() where uid == nil || uid == u {
            out += rows(userLasting[u] ?? [:], userOnce[u] ?? [:], u)
        }
        return out
    }

    /// Each uid's own decisions for the app, by uid (APPS shows them).
    public func users(of app: String) -> [Entry] {
        var out: [Entry] = []
        for u in Set(userLasting.keys).union(userOnce.keys).sorted() {
            for (_, kind) in PermissionSet.dimensions {
                if let p = userLasting[u]?[app]?[kind] { out.append(Entry(app: app, kind: kind, decision: p, once: false, uid: u)) }
                if let p = userOnce[u]?[app]?[kind] { out.append(Entry(app: app, kind: kind, decision: p, once: true, uid: u)) }
            }
        }
        return out
    }

    // MARK: - The decisions file

    /// A readable INI file: one `[App NAME]` per app decided for everyone, one `[User UID NAME]` per app a user
    /// decided for their own uid; `WWAN=allow`, `Metered=deny`. Only lasting decisions are written. A file written
    /// before `Metered=` existed has only kind keys, and loads as it is.
    public func encoded() -> String {
        var out = "# netpermd's stored decisions, written by the daemon (netpermctl decide / forget).\n"
        func section(_ header: String, _ table: [PolicyDimension: Permission]) {
            out += "\n[\(header)]\n"
            for (key, kind) in PermissionSet.dimensions {
                if let p = table[kind] { out += "\(key)=\(p.rawValue)\n" }
            }
        }
        for app in lasting.keys.sorted() { section("App \(app)", lasting[app]!) }
        for uid in userLasting.keys.sorted() {
            for app in userLasting[uid]!.keys.sorted() { section("User \(uid) \(app)", userLasting[uid]![app]!) }
        }
        return out
    }

    public static func parse(_ text: String, path: String) throws(ConfigError) -> Decisions {
        var d = Decisions()
        for s in try Ini.parse(text, path: path) {
            var uid: UInt32?
            let app: String
            if s.name == "App", let a = s.argument, AppPolicy.isValidID(a) {
                app = a
            } else if s.name == "User", let words = s.argument?.split(separator: " ", omittingEmptySubsequences: true),
                      words.count == 2, let u = UInt32(words[0]), String(u) == words[0], AppPolicy.isValidID(String(words[1])) {
                uid = u
                app = String(words[1])
            } else {
                throw ConfigError(path: path, line: s.line, message: "expected [App NAME] or [User UID NAME]")
            }
            for e in s.entries {
                guard let kind = PermissionSet.dimensions.first(where: { $0.key == e.key })?.dimension else {
                    throw ConfigError(path: path, line: e.line, message: "unknown key \(ConfigError.quote(e.key))")
                }
                guard let p = Permission(rawValue: e.value), p != .ask else {
                    throw ConfigError(path: path, line: e.line, message: "bad decision \(ConfigError.quote(e.value))")
                }
                d.set(app, kind, p, once: false, uid: uid)
            }
        }
        return d
    }
}

/// An app's permissions after decisions, with the source of each.
public struct EffectivePermissions: Hashable, Sendable {
    public var permissions: PermissionSet
    public var sources: PermissionSources = [:]

    public init(permissions: PermissionSet, sources: PermissionSources = [:]) {
        self.permissions = permissions; self.sources = sources
    }

    public func source(_ kind: PolicyDimension) -> PermissionSource { sources[kind] ?? .policy }

    /// With nobody to ask, every `ask` still undecided is a deny (its source says why).
    mutating func denyUndecided() {
        for (_, kind) in PermissionSet.dimensions where permissions[kind] == .ask {
            permissions[kind] = .deny
            sources[kind] = .noAgent
        }
    }
}
