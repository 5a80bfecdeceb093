// SPDX-License-Identifier: LGPL-2.1-or-later

/// The entries recorded by address in the last few seconds, by owner and address: what an answer read just after
/// its connection names. The kernel tells of an app's DNS answer before the connection (the app connects once it
/// has the answer), but on two sockets (NFLOG and conntrack) that the loop reads in either order, so the connection
/// can reach the book first. Two generations of `window` seconds, each of at most `limit` addresses: bounded
/// whatever a flood of connections by address brings, and forgotten within two windows.
struct ReportUnnamed: Equatable, Sendable {
    struct Address: Hashable, Sendable {
        var owner: ReportOwner
        var address: String
    }

    /// How long after its connection an answer still names it: the loop's delay between its two readers (a pass
    /// of 256 conntrack events is about 1 ms; a busy machine's loop can be away longer).
    static let window = 5
    static let limit = 4096
    private var current: [Address: [ReportKey]] = [:]
    private var previous: [Address: [ReportKey]] = [:]
    private var since = Int.min

    /// A new entry `key`, recorded under its address at `time`.
    mutating func noted(_ key: ReportKey, at time: Int) {
        turn(at: time)
        guard current.count < Self.limit else { return }
        current[Address(owner: key.owner, address: key.host), default: []].append(key)
    }

    /// The entries recorded for `owner` under `address` in the last window or two; each is taken once.
    mutating func take(_ owner: ReportOwner, _ address: String, at time: Int) -> [ReportKey] {
        turn(at: time)
        let a = Address(owner: owner, address: address)
        return (previous.removeValue(forKey: a) ?? []) + (current.removeValue(forKey: a) ?? [])
    }

    private mutating func turn(at time: Int) {
        guard time >= since + Self.window || time < since else { return }
        // A clock set back starts afresh, as does a gap of two windows.
        previous = time >= since + 2 * Self.window || time < since ? [:] : current
        current = [:]
        since = time
    }
}
