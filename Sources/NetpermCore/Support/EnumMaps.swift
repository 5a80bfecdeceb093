// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// Maps keyed by our small enums, stored as one optional field per case: a verdict is written for every reply,
/// and a dictionary there cost a hash, a probe and retains per lookup (about 14 per QUERY reply).

/// Where each dimension's permission comes from; no entry means the policy.
public struct PermissionSources: Hashable, Sendable, ExpressibleByDictionaryLiteral, DimensionFields {
    package var wifi, wwan, ethernet, other, metered, roaming: PermissionSource?

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
