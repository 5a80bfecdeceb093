// SPDX-License-Identifier: LGPL-2.1-or-later
/// What an app may do on one kind of network.
public enum Permission: String, Sendable, CaseIterable {
    case allow, deny, ask

    /// `rawValue` as a literal, written without escaping (every reply has five).
    public var literal: StaticString {
        switch self {
        case .allow: "allow"
        case .deny: "deny"
        case .ask: "ask"
        }
    }
}

/// What one permission is about: a kind of link, or `metered` and `roaming`, which apply on top of the kind to
/// links that cost money and to links roaming abroad (a link is usable by an app only if its kind, when it is
/// metered `metered`, and when it is roaming `roaming` all allow it). Decisions, prompts, `denied_kinds` and
/// `pending_kinds` name them alike: `DECIDE maps metered allow`.
public enum PolicyDimension: String, Sendable, CaseIterable {
    case wifi, wwan, ethernet, other, metered, roaming

    /// Loopback is never a way out, so it has none.
    public init?(kind: LinkKind) {
        switch kind {
        case .wifi: self = .wifi
        case .wwan: self = .wwan
        case .ethernet: self = .ethernet
        case .other: self = .other
        case .loopback: return nil
        }
    }

    /// The kind it is about; nil for `metered` and `roaming`.
    public var kind: LinkKind? {
        switch self {
        case .wifi: return .wifi
        case .wwan: return .wwan
        case .ethernet: return .ethernet
        case .other: return .other
        case .metered, .roaming: return nil
        }
    }

    /// `metered` and `roaming`: judged on top of a link's kind, on the links they describe only.
    public var isOverlay: Bool { kind == nil }

    /// `rawValue` as a literal, for JSON keys.
    public var key: StaticString {
        switch self {
        case .wifi: "wifi"
        case .wwan: "wwan"
        case .ethernet: "ethernet"
        case .other: "other"
        case .metered: "metered"
        case .roaming: "roaming"
        }
    }
}

/// The permissions of an app: one per kind, and `metered` and `roaming` on top.
public struct PermissionSet: Hashable, Sendable, DimensionFields {
    public var wifi: Permission
    public var wwan: Permission
    public var ethernet: Permission
    public var other: Permission
    /// Applies to metered links on top of their kind; `allow` (the default) leaves the kind alone.
    public var metered: Permission
    /// Applies to roaming links (a modem registered abroad) on top of their kind and `metered`; `allow` (the
    /// default) leaves them alone, so a policy without `Roaming=` judges as before.
    public var roaming: Permission

    /// The built-in `[Defaults]`: cellular asks, everything else is allowed.
    public static let builtIn = PermissionSet(wifi: .allow, wwan: .ask, ethernet: .allow, other: .allow)

    public init(wifi: Permission, wwan: Permission, ethernet: Permission, other: Permission,
                metered: Permission = .allow, roaming: Permission = .allow) {
        self.wifi = wifi; self.wwan = wwan; self.ethernet = ethernet; self.other = other; self.metered = metered
        self.roaming = roaming
    }

    /// The config key for each kind, in the order they are reported.
    public static let keys: [(key: String, kind: LinkKind)] = [
        ("WiFi", .wifi), ("WWAN", .wwan), ("Ethernet", .ethernet), ("Other", .other),
    ]

    /// The config key for each dimension (the kinds, then Metered= and Roaming=), in the order they are reported.
    public static let dimensions: [(key: String, dimension: PolicyDimension)] =
        keys.map { ($0.key, PolicyDimension(kind: $0.kind)!) } + [("Metered", .metered), ("Roaming", .roaming)]

    public subscript(kind: LinkKind) -> Permission {
        get { PolicyDimension(kind: kind).map { self[$0] } ?? .allow }
        set { if let d = PolicyDimension(kind: kind) { self[d] = newValue } }
    }

    public subscript(dimension: PolicyDimension) -> Permission {
        get { self[field: dimension] }
        set { self[field: dimension] = newValue }
    }

    /// May the app use `link`: its kind allows it and, when it is metered or roaming, so do `metered` and
    /// `roaming`. A link whose roaming is unknown (`nil`) is judged as at home.
    public func allows(_ link: Link) -> Bool {
        self[link.kind] == .allow && (!link.metered || metered == .allow) && (link.roaming != true || roaming == .allow)
    }

    /// What keeps the app off `link`, by dimension: its kind's, when metered `metered`'s and when roaming
    /// `roaming`'s setting where it is not allow. Empty: the app may use it.
    public func blocking(_ link: Link) -> [(PolicyDimension, Permission)] {
        var out: [(PolicyDimension, Permission)] = []
        if let d = PolicyDimension(kind: link.kind), self[d] != .allow { out.append((d, self[d])) }
        if link.metered, metered != .allow { out.append((.metered, metered)) }
        if link.roaming == true, roaming != .allow { out.append((.roaming, roaming)) }
        return out
    }
}

/// The settings one `[App]` section makes; unset ones fall back to `[Defaults]`.
public struct PartialPermissions: Equatable, Sendable {
    public var values: [PolicyDimension: Permission] = [:]
    public init(_ values: [PolicyDimension: Permission] = [:]) { self.values = values }

    public func resolved(over defaults: PermissionSet) -> PermissionSet {
        var p = defaults
        for (k, v) in values { p[k] = v }
        return p
    }
}
