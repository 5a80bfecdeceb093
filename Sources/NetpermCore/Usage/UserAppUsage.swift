// SPDX-License-Identifier: LGPL-2.1-or-later
/// A user's own app: the app a unit of `uid`'s own manager is (a desktop app's scope or service, a `UserUnit=`
/// app's unit, a user's `netpermctl run` scope). What it used is counted apart for that uid, beside (never instead
/// of) what its connections' tags count: a user names their units as they like, so these counts may only say which
/// of their own uid's bytes went where, and move nothing out of their uid's app, its budget or onto anyone else's
/// (docs/USAGE.md, "A user's own apps").
public struct UserApp: Hashable, Comparable, Sendable {
    public var uid: UInt32
    public var app: String

    public init(uid: UInt32, app: String) { self.uid = uid; self.app = app }

    public static func < (a: UserApp, b: UserApp) -> Bool { (a.uid, a.app) < (b.uid, b.app) }
}

/// One counter the kernel keeps per user's unit: which way, which class of link, and the unit's cgroup (its id, as
/// `socket cgroupv2 level N` gives it).
public struct UnitUsageKey: Hashable, Comparable, Sendable {
    public var direction: UsageDirection
    public var usageClass: UsageClass
    public var cgroup: UInt64

    public init(_ direction: UsageDirection, _ usageClass: UsageClass, cgroup: UInt64) {
        self.direction = direction; self.usageClass = usageClass; self.cgroup = cgroup
    }

    public static func < (a: UnitUsageKey, b: UnitUsageKey) -> Bool {
        (a.direction == .sent ? 0 : 1, a.usageClass.index, a.cgroup) < (b.direction == .sent ? 0 : 1, b.usageClass.index, b.cgroup)
    }
}
