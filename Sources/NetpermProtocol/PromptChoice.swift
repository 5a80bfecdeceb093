// SPDX-License-Identifier: LGPL-2.1-or-later
/// What a person may answer a prompt, as a phone offers it: allow; not this kind of network; just this time. Not
/// answering is the fourth: the prompt stays open until it expires, and stores nothing.
public enum PromptChoice: String, Sendable, CaseIterable {
    /// Every kind the prompt asks about, for good.
    case allow
    /// None of them, for good: for cellular, "Wi-Fi only".
    case deny
    /// Every kind it asks about, until the daemon restarts or the policy changes.
    case once

    /// What `once` lasts: the same words wherever an answer is offered.
    public static let onceUntil = "until netpermd restarts or its policy changes"

    /// The decision each kind gets.
    public var decision: (permission: Permission, once: Bool) {
        switch self {
        case .allow: (.allow, false)
        case .deny: (.deny, false)
        case .once: (.allow, true)
        }
    }

    /// The words on the button: `deny` names what is left ("Wi-Fi only" for a question about cellular), or is a
    /// plain "Deny" when it takes away several kinds.
    public func label(kinds: [PolicyDimension]) -> String {
        switch self {
        case .allow: return "Allow"
        case .once: return "Allow once"
        case .deny:
            let linkKinds = kinds.filter { !$0.isOverlay }
            guard linkKinds.count <= 1 else { return "Deny" }
            switch linkKinds.first ?? (kinds.contains(.roaming) ? .roaming : .metered) {
            case .wwan: return "Wi-Fi only"
            case .wifi: return "Not on Wi-Fi"
            case .ethernet: return "Not on Ethernet"
            case .other: return "Not on this network"
            case .metered: return "Unmetered only"
            case .roaming: return "Not while roaming"
            }
        }
    }
}
