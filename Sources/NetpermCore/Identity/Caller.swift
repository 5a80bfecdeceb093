// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// A connection's peer as the engine needs it. A class: it is read for every request, and copying its
/// identity and the matched app's policy cost more retains and releases than the rest of deciding a QUERY.
public final class Caller: Sendable {
    public let identity: PeerIdentity
    public let match: AppMatch
    public let privileged: Bool
    /// An unprivileged caller's uid when users decide for their own apps (`[Defaults] UserDecisions=yes`): its own
    /// app is answered as that uid's processes have it, and it may decide and answer prompts for that uid alone.
    /// nil: privileged callers decide for everyone; with user decisions off, nobody else decides.
    public let ownUID: UInt32?
    /// Whether the rules hold this process to `match`'s app (AppResolver's `held`): not one it is by `Executable=`
    /// while its unit or uid is another app's, or none.
    public let heldToMatch: Bool

    public init(identity: PeerIdentity, match: AppMatch, privileged: Bool, userDecisions: Bool = false,
                heldToMatch: Bool = true) {
        self.identity = identity; self.match = match; self.privileged = privileged
        ownUID = !privileged && userDecisions ? identity.uid : nil
        self.heldToMatch = heldToMatch
    }

    /// `identity` as the app was recognised by (Config.resolve): in its enclosing unit, when that unit's app it is.
    public convenience init(identity: PeerIdentity, config: Config, daemonUID: UInt32 = 0, adminGID: () -> UInt32?) {
        let r = config.resolver.resolve(identity)
        self.init(identity: r.identity, match: config.appMatch(r),
                  privileged: config.isPrivileged(identity, daemonUID: daemonUID, adminGID: adminGID),
                  userDecisions: config.userDecisions, heldToMatch: r.held)
    }

    /// Whether it may see and answer a prompt: every one when privileged, else its own uid's.
    func mayAnswer(_ p: Prompt) -> Bool { privileged || (ownUID != nil && p.scope == ownUID) }

    /// Whether `match` (from `resolveApp`) is the caller's own app. resolveApp hands the caller's match back
    /// unchanged, so the id and how it matched suffice; comparing whole policies cost more than the answer.
    func owns(_ match: AppMatch) -> Bool {
        match.id == self.match.id && match.matchedBy == self.match.matchedBy
    }
}
