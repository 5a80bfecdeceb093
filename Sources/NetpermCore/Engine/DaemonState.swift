// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// What the engine knows that verdicts depend on: the network, the policy, decisions, prompts, agents.
public struct DaemonState: Sendable {
    public static let version = NetpermVersion.version

    /// False until the first full netlink dump has been taken and the policy loaded.
    public var ready: Bool
    public var network: NetworkState
    public var config: Config
    /// Incremented by each successful load; 1 after start-up.
    public var policyGeneration: Int
    /// The last failed reload's error; cleared by a successful one.
    public var policyError: String?
    /// The warnings of the policy in force (at most the parser's limit of them) and how many it had in all.
    public var policyWarnings: [ConfigError] = []
    public var policyWarningCount = 0
    public var decisions = Decisions()
    public var prompts = PromptBook()
    /// Privileged subscribers of `prompts`, who answer for everyone. With none (and no agent of the uid asking),
    /// an undecided `ask` is a deny (`no-agent`): a device without a screen gets an answer, not an endless
    /// `awaiting-decision`.
    public var agents = 0
    /// Apps whose `MeteredBudget=` is used up this period: metered links are denied to them (source `budget`).
    public var exhausted: Set<String> = []
    /// Users' own agents (`[Defaults] UserDecisions=yes`), by uid: each answers the prompts of its uid's processes.
    public var userAgents: [UInt32: Int] = [:]

    public init(ready: Bool = false, network: NetworkState = NetworkState(), config: Config = Config(),
                policyGeneration: Int = 0, policyError: String? = nil) {
        self.ready = ready; self.network = network; self.config = config
        self.policyGeneration = policyGeneration; self.policyError = policyError
    }

    /// For everyone's processes (`uid` nil), or for those of `uid`: its own decisions apply where nobody decided
    /// for everyone, and its own agent can be asked.
    public func effectivePermissions(for match: AppMatch, uid: UInt32? = nil) -> EffectivePermissions {
        var e = decisions.apply(to: config.permissions(for: match.app), app: match.id, uid: uid)
        if !hasAgent(for: uid) { e.denyUndecided() }
        if exhausted.contains(match.id), e.permissions.metered != .deny {
            e.permissions.metered = .deny
            e.sources[.metered] = .budget
        }
        return e
    }

    /// Whether someone can be asked about `uid`'s processes (nil: everyone's): a privileged agent, or its own.
    public func hasAgent(for uid: UInt32?) -> Bool { agents > 0 || uid.map { userAgents[$0] != nil } ?? false }

    public func verdict(for match: AppMatch, uid: UInt32? = nil) -> Verdict {
        var v = Verdict.compute(app: match.id, matchedBy: match.matchedBy, effective: effectivePermissions(for: match, uid: uid),
                                network: network, ready: ready)
        v.uid = uid
        return v
    }
}
