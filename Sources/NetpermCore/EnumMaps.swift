// SPDX-License-Identifier: LGPL-2.1-or-later
/// Maps keyed by our small enums, stored as one optional field per case: a verdict is written for every reply,
/// and a dictionary there cost a hash, a probe and retains per lookup (about 14 per QUERY reply).

/// One field per policy dimension, and the one switch from a dimension to its field: `PermissionSet` and
/// `PermissionSources` keep their values this way.
protocol DimensionFields {
    associatedtype Field
    var wifi: Field { get set }
    var wwan: Field { get set }
    var ethernet: Field { get set }
    var other: Field { get set }
    var metered: Field { get set }
    var roaming: Field { get set }
}

extension DimensionFields {
    subscript(field dimension: PolicyDimension) -> Field {
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

/// Where each dimension's permission comes from; no entry means the policy.
public struct PermissionSources: Hashable, Sendable, ExpressibleByDictionaryLiteral, DimensionFields {
    var wifi, wwan, ethernet, other, metered, roaming: PermissionSource?

    public init() {}

    public init(dictionaryLiteral elements: (PolicyDimension, PermissionSource)...) {
        for (k, v) in elements { self[k] = v }
    }

    public subscript(dimension: PolicyDimension) -> PermissionSource? {
        get { self[field: dimension] }
        set { self[field: dimension] = newValue }
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
