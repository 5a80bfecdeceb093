// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import NetpermProtocol

/// Users and groups for config tests, so they never depend on the machine's /etc/passwd.
struct FakeAccounts: AccountResolver {
    var users: [String: UInt32] = ["alice": 1000, "bob": 1001, "daemon": 2]
    var groups: [String: UInt32] = ["netperm": 990, "wheel": 10]
    func uid(forUser name: String) -> UInt32? { users[name] }
    func gid(forGroup name: String) -> UInt32? { groups[name] }
}

/// A link as the daemon would report it, without going through classification. Usable unless told otherwise
/// (a nil metric means no default route).
func makeLink(_ index: Int32, _ name: String, _ kind: LinkKind, metric: UInt32? = 100, up: Bool = true,
              carrier: Bool = true, metered: Bool? = nil) -> Link {
    Link(facts: LinkFacts(index: index, name: name, arphrd: ARPHRD.ether, rtnlKind: nil, adminUp: up,
                          carrier: carrier, operstate: up && carrier ? "up" : "down"),
         classification: Classification(kind: kind, by: "test", metered: metered ?? (kind == .wwan)),
         addresses: [], defaultRouteV4: metric != nil, defaultRouteV6: false, metric: metric)
}

func makePeer(uid: UInt32 = 1000, gids: [UInt32]? = nil, exe: String?, unit: String? = nil,
              pid: Int32 = 4242) -> PeerIdentity {
    PeerIdentity(pid: pid, uid: uid, gids: gids ?? [uid], executable: exe, unit: unit)
}

/// Parses one main file with the fake accounts; fails the calling test on a config error, or on a warning (a
/// typo in a test's policy would otherwise be ignored and the test would prove less than it claims).
func parsePolicy(_ text: String, path: String = "/etc/netpermd/netpermd.conf") throws -> Config {
    let parsed = Config.parse(files: [(path: path, text: text)], accounts: FakeAccounts())
    if let first = parsed.problems.first { throw first }
    return try parsed.get()
}

/// Every permission set (3^4 = 81), in a fixed order.
let allPermissionSets: [PermissionSet] = {
    var sets: [PermissionSet] = []
    for w in Permission.allCases {
        for ww in Permission.allCases {
            for e in Permission.allCases {
                for o in Permission.allCases {
                    sets.append(PermissionSet(wifi: w, wwan: ww, ethernet: e, other: o))
                }
            }
        }
    }
    return sets
}()

extension NetworkState {
    /// Links whose default routes all sit in one table with no rules: the kernel sends each family's traffic by
    /// its default route of lowest metric (ties: lowest index), carrier or not (a linkdown route is still chosen).
    init(routedLinks links: [Link]) {
        self.init(links: links, egress: simpleEgress(links))
    }
}

/// See `NetworkState(routedLinks:)`.
func simpleEgress(_ links: [Link]) -> [AddressFamily: Egress] {
    var egress: [AddressFamily: Egress] = [:]
    for family in AddressFamily.allCases {
        let candidates = links.filter { l in
            l.status.adminUp && l.metric != nil && l.kind != .loopback && l.defaultRoute[family]
        }
        if let best = candidates.min(by: { ($0.metric!, $0.index) < ($1.metric!, $1.index) }) {
            egress[family] = .link(best.index)
        }
    }
    return egress
}
