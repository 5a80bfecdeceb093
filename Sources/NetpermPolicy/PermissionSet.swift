// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

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

/// One field per policy dimension, and the one switch from a dimension to its field: `PermissionSet` and
/// `PermissionSources` keep their values this way.
package protocol DimensionFields {
    associatedtype Field
    var wifi: Field { get set }
    var wwan: Field { get set }
    var ethernet: Field { get set }
    var other: Field { get set }
    var metered: Field { get set }
    var roaming: Field { get set }
}

extension DimensionFields {
    package subscript(field dimension: PolicyDimension) -> Field {
        get {
            switch dimension {
            case .wifi: return wifi
            case .wwan: return wwan
            case .ethernet: return ethernet
            case .other: return other
            case .metered: return metered
            case .roaming: return roaming
            }
        }
        set {
            switch dimension {
            case .wifi: wifi = newValue
            case .wwan: wwan = newValue
            case .ethernet: ethernet = newValue
            case .other: other = newValue
            case .metered: metered = newValue
            case .roaming: roaming = newValue
            }
        }
    }
}
