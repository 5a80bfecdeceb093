// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// The usage file (`STATE_DIR/usage`): a readable list of lines the daemon writes and reads back, one total or
/// one counter a line, so that a restart (or a crash) goes on where the last process left off.
///
/// ```
/// # netpermd's data usage, written by the daemon (docs/USAGE.md).
/// version 1
/// period 2026-12-01
/// kernel 7d0e...:4096:12
/// counter sent wwan_metered 0x6e8012ab 1048576 812
/// counter received wifi untracked 1200 10
/// unit sent wifi 9081 1000 org.gnome.Maps 52000 60
/// app maps reset 1764550000 announced 80
/// app maps current wwan_metered 12000 40 900000 700
/// user 1000 org.gnome.Maps current wifi 52000 60 310000 240
/// other previous ethernet 5000 30 7000 40
/// ```
///
/// A `counter` line is one of the kernel's counters as last read (what its growth is measured from), a `unit` line
/// one of a user's unit's (its cgroup's id, and the uid and app it was counted for); `current`, `previous` and
/// `total` lines are an app's (`user`: a user's own app's) totals per class of link: bytes and packets sent, bytes
/// and packets received.
extension UsageBook {
    public static let fileVersion = 1

    public func encoded() -> String {
        var out = "# netpermd's data usage, written by the daemon (docs/USAGE.md).\nversion \(Self.fileVersion)\n"
        if let period { out += "period \(period)" + (provisional ? " provisional" : "") + "\n" }
        if let instance { out += "kernel \(instance)\n" }
        for key in baseline.keys.sorted() {
            let c = baseline[key]!
            out += "counter \(key.direction.rawValue) \(key.usageClass.name) "
                + (key.mark.map { ConnectionTags.text($0) } ?? "untracked") + " \(c.bytes) \(c.packets)\n"
        }
        for key in unitBaseline.keys.sorted() {
            guard let c = unitBaseline[key], let owner = unitOwners[key.cgroup] else { continue }
            out += "unit \(key.direction.rawValue) \(key.usageClass.name) \(key.cgroup) \(owner.uid) \(owner.app) \(c.bytes) \(c.packets)\n"
        }
        func write(_ who: String, _ u: AppUsage) {
            if u.resetAt != nil || u.announced != 0 {
                out += who + (u.resetAt.map { " reset \($0)" } ?? "") + (u.announced != 0 ? " announced \(u.announced)" : "") + "\n"
            }
            for (name, totals) in [("current", u.current), ("previous", u.previous), ("total", u.sinceReset)] {
                for e in totals.entries {
                    let c = e.counts
                    out += "\(who) \(name) \(e.usageClass.name) \(c.sentBytes) \(c.sentPackets) \(c.receivedBytes) \(c.receivedPackets)\n"
                }
            }
        }
        for id in apps.keys.sorted() { write("app " + id, apps[id]!) }
        for u in userApps.keys.sorted() { write("user \(u.uid) \(u.app)", userApps[u]!) }
        write("other", other)
        return out
    }

    public static func parse(_ text: String, path: String) throws(ConfigError) -> UsageBook {
        var book = UsageBook()
        var line = 0
        func fail(_ message: String) -> ConfigError { ConfigError(path: path, line: line, message: message) }
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            line += 1
            if raw.isEmpty || raw.hasPrefix("#") { continue }
            var words = raw.split(separator: " ").map(String.init)
            func number(_ w: String) throws(ConfigError) -> UInt64 {
                guard let n = UInt64(w) else { throw fail("bad number \(ConfigError.quote(w))") }
                return n
            }
            switch words.first {
            case "version":
                guard words.count == 2, words[1] == String(fileVersion) else {
                    throw fail("unknown version \(ConfigError.quote(words.dropFirst().joined(separator: " ")))")
                }
            case "period":
                guard words.count == 2 || (words.count == 3 && words[2] == "provisional"), let d = CivilDate(words[1]) else {
                    throw fail("expected period YYYY-MM-DD [provisional]")
                }
                book.period = d
                book.provisional = words.count == 3
            case "kernel":
                guard words.count == 2 else { throw fail("expected kernel INSTANCE") }
                book.instance = words[1]
            case "counter":
                guard words.count == 6, let direction = UsageDirection(rawValue: words[1]),
                      let c = UsageClass(name: words[2]) else { throw fail("expected counter sent|received CLASS MARK BYTES PACKETS") }
                var mark: UInt32?
                if words[3] != "untracked" {
                    guard words[3].hasPrefix("0x"), let m = UInt32(words[3].dropFirst(2), radix: 16) else {
                        throw fail("bad mark \(ConfigError.quote(words[3]))")
                    }
                    mark = m
                }
                book.baseline[UsageKey(direction, c, mark: mark)] = UsageCounter(bytes: try number(words[4]),
                                                                                 packets: try number(words[5]))
            case "unit":
                guard words.count == 8, let direction = UsageDirection(rawValue: words[1]), let c = UsageClass(name: words[2]),
                      let cgroup = UInt64(words[3]), let uid = UInt32(words[4]), AppPolicy.isValidID(words[5]) else {
                    throw fail("expected unit sent|received CLASS CGROUP UID APP BYTES PACKETS")
                }
                book.unitBaseline[UnitUsageKey(direction, c, cgroup: cgroup)] = UsageCounter(bytes: try number(words[6]),
                                                                                             packets: try number(words[7]))
                book.unitOwners[cgroup] = UserApp(uid: uid, app: words[5])
            case "app", "other", "user":
                var id: String?, user: UserApp?
                if words[0] == "app" {
                    guard words.count >= 2, AppPolicy.isValidID(words[1]) else { throw fail("expected app NAME") }
                    id = words[1]
                    words.removeFirst(2)
                } else if words[0] == "user" {
                    guard words.count >= 3, let uid = UInt32(words[1]), AppPolicy.isValidID(words[2]) else {
                        throw fail("expected user UID APP")
                    }
                    user = UserApp(uid: uid, app: words[2])
                    words.removeFirst(3)
                } else {
                    words.removeFirst()
                }
                var u = id.map { book[$0] } ?? user.map { book[$0] } ?? book.other
                try parseTotals(words, into: &u, fail: fail)
                if let id { book.apps[id] = u } else if let user { book.userApps[user] = u } else { book.other = u }
            default:
                throw fail("unknown line \(ConfigError.quote(raw))")
            }
        }
        return book
    }

    /// The rest of an `app`, `user` or `other` line: a period's totals of a class, or when it was reset and what
    /// was announced.
    private static func parseTotals(_ words: [String], into u: inout AppUsage,
                                    fail: (String) -> ConfigError) throws(ConfigError) {
        func number(_ w: String) throws(ConfigError) -> UInt64 {
            guard let n = UInt64(w) else { throw fail("bad number \(ConfigError.quote(w))") }
            return n
        }
        switch words.first {
        case "current", "previous", "total":
            guard words.count == 6, let c = UsageClass(name: words[1]) else {
                throw fail("expected \(words[0]) CLASS SENT-BYTES SENT-PACKETS RECEIVED-BYTES RECEIVED-PACKETS")
            }
            let counts = UsageCounts(sentBytes: try number(words[2]), sentPackets: try number(words[3]),
                                     receivedBytes: try number(words[4]), receivedPackets: try number(words[5]))
            switch words[0] {
            case "current": u.current[c] = counts
            case "previous": u.previous[c] = counts
            default: u.sinceReset[c] = counts
            }
        case "reset", "announced":
            var i = 0
            while i + 1 < words.count {
                let n = try number(words[i + 1])
                switch words[i] {
                case "reset": u.resetAt = Int(clamping: n)
                case "announced": u.announced = Int(clamping: min(n, 100))
                default: throw fail("unknown word \(ConfigError.quote(words[i]))")
                }
                i += 2
            }
            guard i == words.count else { throw fail("expected reset SECONDS or announced PERCENT") }
        default:
            throw fail("expected current, previous, total, reset or announced")
        }
    }
}
