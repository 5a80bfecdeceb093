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
