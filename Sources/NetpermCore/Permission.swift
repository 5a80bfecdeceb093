/// What an app may do on one kind of network.
public enum Permission: String, Sendable, CaseIterable {
    case allow, deny, ask
}

/// The four per-kind permissions of an app (loopback is never a way out, so it has none).
public struct PermissionSet: Hashable, Sendable {
    public var wifi: Permission
    public var wwan: Permission
    public var ethernet: Permission
    public var other: Permission

    /// The built-in `[Defaults]`: cellular asks, everything else is allowed.
    public static let builtIn = PermissionSet(wifi: .allow, wwan: .ask, ethernet: .allow, other: .allow)

    public init(wifi: Permission, wwan: Permission, ethernet: Permission, other: Permission) {
        self.wifi = wifi; self.wwan = wwan; self.ethernet = ethernet; self.other = other
    }

    /// The config key for each kind, in the order they are reported.
    public static let keys: [(key: String, kind: LinkKind)] = [
        ("WiFi", .wifi), ("WWAN", .wwan), ("Ethernet", .ethernet), ("Other", .other),
    ]

    public subscript(kind: LinkKind) -> Permission {
        get {
            switch kind {
            case .wifi: return wifi
            case .wwan: return wwan
            case .ethernet: return ethernet
            case .other: return other
            case .loopback: return .allow
            }
        }
        set {
            switch kind {
            case .wifi: wifi = newValue
            case .wwan: wwan = newValue
            case .ethernet: ethernet = newValue
            case .other: other = newValue
            case .loopback: break
            }
        }
    }
}

/// The per-kind settings one `[App]` section makes; unset ones fall back to `[Defaults]`.
public struct PartialPermissions: Equatable, Sendable {
    public var values: [LinkKind: Permission] = [:]
    public init(_ values: [LinkKind: Permission] = [:]) { self.values = values }

    public func resolved(over defaults: PermissionSet) -> PermissionSet {
        var p = defaults
        for (k, v) in values { p[k] = v }
        return p
    }
}
