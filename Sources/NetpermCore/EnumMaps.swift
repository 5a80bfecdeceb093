/// Maps keyed by our small enums, stored as one optional field per case: a verdict is written for every reply,
/// and a dictionary there cost a hash, a probe and retains per lookup (about 14 per QUERY reply).

/// Where each dimension's permission comes from; no entry means the policy.
public struct PermissionSources: Hashable, Sendable, ExpressibleByDictionaryLiteral {
    private var wifi, wwan, ethernet, other, metered: PermissionSource?

    public init() {}

    public init(dictionaryLiteral elements: (PolicyDimension, PermissionSource)...) {
        for (k, v) in elements { self[k] = v }
    }

    public subscript(dimension: PolicyDimension) -> PermissionSource? {
        get {
            switch dimension {
            case .wifi: return wifi
            case .wwan: return wwan
            case .ethernet: return ethernet
            case .other: return other
            case .metered: return metered
            }
        }
        set {
            switch dimension {
            case .wifi: wifi = newValue
            case .wwan: wwan = newValue
            case .ethernet: ethernet = newValue
            case .other: other = newValue
            case .metered: metered = newValue
            }
        }
    }
}

/// One optional value per address family.
public struct PerFamily<Value> {
    private var ipv4, ipv6: Value?

    public init() {}

    public subscript(family: AddressFamily) -> Value? {
        get {
            switch family {
            case .ipv4: return ipv4
            case .ipv6: return ipv6
            }
        }
        set {
            switch family {
            case .ipv4: ipv4 = newValue
            case .ipv6: ipv6 = newValue
            }
        }
    }
}

extension PerFamily: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (AddressFamily, Value)...) {
        for (k, v) in elements { self[k] = v }
    }
}

extension PerFamily: Equatable where Value: Equatable {}
extension PerFamily: Sendable where Value: Sendable {}
