// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermHost

/// What the engine gets as the kernel's picture: the last one netlink gave, joined with what sysfs says of each link,
/// the Wi-Fi networks (nl80211), NetworkManager's devices and ModemManager's modems, any of which may change without
/// the others.
struct KernelPicture {
    private let sysfs: Sysfs
    /// sysfs is read once per link (and again on rename or when its addresses or default routes change), not on
    /// every netlink message.
    private var sysfsCache: [Int32: (name: String, stamp: Int, facts: SysfsFacts)] = [:]
    private(set) var last: KernelSnapshot?
    var wifi: [Int32: WifiFacts] = [:]
    var managed: [String: NetworkManagerDevice] = [:]
    var modems: [String: ModemRegistration] = [:]

    init(sysfs: Sysfs) { self.sysfs = sysfs }

    /// `snapshot` with everything else the engine is to know of the links.
    mutating func joined(_ snapshot: KernelSnapshot) -> KernelSnapshot {
        last = snapshot
        var s = snapshot
        s.wifi = wifi
        s.managed = managed
        s.modems = modems
        var seen: Set<Int32> = []
        // What the link's addresses and default routes are: a DHCP lease and a PPP unit's pid file are written
        // around the time those change, so the facts are read again then (and on rename), not per message.
        var configured: [Int32: Hasher] = [:]
        for a in s.addresses { configured[a.index, default: Hasher()].combine(a.text) }
        for r in s.defaultRoutes { configured[r.index, default: Hasher()].combine(r.family.rawValue) }
        for link in s.links {
            seen.insert(link.index)
            let stamp = configured[link.index]?.finalize() ?? 0
            if let cached = sysfsCache[link.index], cached.name == link.name, cached.stamp == stamp {
                s.sysfs[link.index] = cached.facts
            } else {
                let facts = sysfs.facts(forInterface: link.name, index: link.index)
                sysfsCache[link.index] = (link.name, stamp, facts)
                s.sysfs[link.index] = facts
            }
        }
        if sysfsCache.count != seen.count { sysfsCache = sysfsCache.filter { seen.contains($0.key) } }
        return s
    }
}
