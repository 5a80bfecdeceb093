/// Where an app's permission for one kind comes from.
public enum PermissionSource: String, Sendable {
    /// The policy file ([App] or [Defaults]).
    case policy
    /// A decision stored on disk (`DECIDE`).
    case decision
    /// A decision that holds until the daemon restarts or the policy changes (`DECIDE ... --once`).
    case once
    /// The policy says `ask`, nothing was decided, and no agent is listening to ask the user: a deny, as
    /// polkit denies when no authentication agent is registered.
    case noAgent = "no-agent"
    /// `MeteredBudget=` is used up for this period: metered links are denied until the next period or a reset
    /// (`metered` only; docs/USAGE.md).
    case budget

    /// `rawValue` as a literal, written without escaping (every reply has five).
    public var literal: StaticString {
        switch self {
        case .policy: "policy"
        case .decision: "decision"
        case .once: "once"
        case .noAgent: "no-agent"
        case .budget: "budget"
        }
    }
}

/// The user's answers to prompts. They only ever apply where the policy says `ask`: an explicit allow or deny in
/// the policy file always wins.
public struct Decisions: Equatable, Sendable {
    public private(set) var lasting: [String: [PolicyDimension: Permission]] = [:]
    public private(set) var once: [String: [PolicyDimension: Permission]] = [:]

    public init() {}

    public var isEmpty: Bool { lasting.isEmpty && once.isEmpty }

    public func decision(_ app: String, _ kind: PolicyDimension) -> (Permission, PermissionSource)? {
        if let p = once[app]?[kind] { return (p, .once) }
        if let p = lasting[app]?[kind] { return (p, .decision) }
        return nil
    }

    /// A lasting decision replaces a once-decision for the same app and kind, and vice versa.
    public mutating func set(_ app: String, _ kind: PolicyDimension, _ p: Permission, once isOnce: Bool) {
        if isOnce {
            once[app, default: [:]][kind] = p
        } else {
            lasting[app, default: [:]][kind] = p
            once[app]?[kind] = nil
            if once[app]?.isEmpty == true { once[app] = nil }
        }
    }

    /// Removes the app's decisions (for one kind, or all); returns whether anything was removed.
    @discardableResult
    public mutating func forget(_ app: String, kind: PolicyDimension?) -> Bool {
        var removed = false
        for table in [\Decisions.lasting, \Decisions.once] as [WritableKeyPath<Decisions, [String: [PolicyDimension: Permission]]>] {
            if let k = kind {
                if self[keyPath: table][app]?.removeValue(forKey: k) != nil { removed = true }
                if self[keyPath: table][app]?.isEmpty == true { self[keyPath: table][app] = nil }
            } else if self[keyPath: table].removeValue(forKey: app) != nil {
                removed = true
            }
        }
        return removed
    }

    public mutating func dropOnce() { once = [:] }

    /// The policy's permissions with decisions applied where the policy says `ask`, and where each came from.
    public func apply(to policy: PermissionSet, app: String) -> EffectivePermissions {
        var e = EffectivePermissions(permissions: policy)
        for (_, kind) in PermissionSet.dimensions where policy[kind] == .ask {
            if let (p, source) = decision(app, kind) {
                e.permissions[kind] = p
                e.sources[kind] = source
            }
        }
        return e
    }

    // MARK: - The decisions file

    /// A readable INI file: one `[App NAME]` per app, `WWAN=allow`, `Metered=deny`. Only lasting decisions are
    /// written. A file written before `Metered=` existed has only kind keys, and loads as it is.
    public func encoded() -> String {
        var out = "# netpermd's stored decisions, written by the daemon (netpermctl decide / forget).\n"
        for app in lasting.keys.sorted() {
            out += "\n[App \(app)]\n"
            for (key, kind) in PermissionSet.dimensions {
                if let p = lasting[app]?[kind] { out += "\(key)=\(p.rawValue)\n" }
            }
        }
        return out
    }

    public static func parse(_ text: String, path: String) throws(ConfigError) -> Decisions {
        var d = Decisions()
        for s in try Ini.parse(text, path: path) {
            guard s.name == "App", let app = s.argument, AppPolicy.isValidID(app) else {
                throw ConfigError(path: path, line: s.line, message: "expected [App NAME]")
            }
            for e in s.entries {
                guard let kind = PermissionSet.dimensions.first(where: { $0.key == e.key })?.dimension else {
                    throw ConfigError(path: path, line: e.line, message: "unknown key \(ConfigError.quote(e.key))")
                }
                guard let p = Permission(rawValue: e.value), p != .ask else {
                    throw ConfigError(path: path, line: e.line, message: "bad decision \(ConfigError.quote(e.value))")
                }
                d.set(app, kind, p, once: false)
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
