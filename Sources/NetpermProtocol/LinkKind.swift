// SPDX-License-Identifier: LGPL-2.1-or-later
/// The kinds of network an app can be allowed on.
public enum LinkKind: String, Sendable, CaseIterable {
    case wifi, wwan, ethernet, loopback, other

    /// `rawValue` as a literal, for JSON keys written without building a String.
    public var key: StaticString {
        switch self {
        case .wifi: "wifi"
        case .wwan: "wwan"
        case .ethernet: "ethernet"
        case .loopback: "loopback"
        case .other: "other"
        }
    }
}

public enum AddressFamily: String, Sendable, CaseIterable {
    case ipv4, ipv6

    /// `rawValue` as a literal, for JSON keys.
    public var key: StaticString {
        switch self {
        case .ipv4: "ipv4"
        case .ipv6: "ipv6"
        }
    }
}

/// Route types that stop traffic, as the lookup's error says: blackhole EINVAL, unreachable EHOSTUNREACH,
/// prohibit EACCES.
public enum RouteBlock: String, Sendable {
    case blackhole, unreachable, prohibit

    /// As a sentence says it: "an unreachable", not "a unreachable".
    public var withArticle: String {
        switch self {
        case .blackhole: "a blackhole"
        case .unreachable: "an unreachable"
        case .prohibit: "a prohibit"
        }
    }
}
