// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// A peer's unit from its cgroup path: whether the rules can follow it is enforcement's to say (UnitCgroups).
extension PeerIdentity {
    /// The innermost service or scope in a /proc/PID/cgroup text (cgroup v2 line "0::/path", or the
    /// name=systemd line on hybrid hierarchies).
    public static func unit(fromCgroup text: String) -> String? { unitAndManager(fromCgroup: text)?.unit }

    /// The innermost service or scope, whether a user's service manager runs it (a `user@UID.service` above it in
    /// the path: any user may start a unit of theirs with any name, so such a unit says only what its user chose
    /// to call it), and whether the rules can follow its cgroup.
    public static func unitAndManager(fromCgroup text: String)
        -> (unit: String, user: Bool, followed: Bool, slice: String?, enclosing: (unit: String, slice: String?)?)? {
        var path: Substring?
        for line in text.split(separator: "\n") {
            // "hierarchy-ID:controllers:path"
            let f = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard f.count == 3 else { continue }
            if f[0] == "0" && f[1].isEmpty { path = f[2]; break }
            if f[1] == "name=systemd" { path = f[2] }
        }
        guard let path else { return nil }
        let parts = path.split(separator: "/")
        guard let i = parts.lastIndex(where: { $0.hasSuffix(".service") || $0.hasSuffix(".scope") }) else { return nil }
        let user = parts[..<i].contains { $0.hasPrefix("user@") && $0.hasSuffix(".service") }
        let slice = i > parts.startIndex && parts[i - 1].hasSuffix(".slice") ? String(parts[i - 1]) : nil
        return (String(parts[i]), user, UnitCgroups.isFollowed(path: path), slice, enclosing(parts, innermost: i))
    }

    /// The outermost unit around the innermost one at `i` that the rules follow (below a user's manager, for a
    /// user's units), when there is one: the unit whose cgroup the kernel matches for the process.
    private static func enclosing(_ parts: [Substring], innermost i: Int) -> (unit: String, slice: String?)? {
        let start = (parts[..<i].firstIndex { UnitCgroups.isUserManager($0) }).map { $0 + 1 } ?? parts.startIndex
        guard let o = parts[start..<i].firstIndex(where: { UnitCgroups.isUnit($0) }),
              UnitCgroups.isFollowed(path: parts[...o].joined(separator: "/")) else { return nil }
        return (String(parts[o]), o > parts.startIndex && UnitCgroups.isSlice(parts[o - 1]) ? String(parts[o - 1]) : nil)
    }
}
