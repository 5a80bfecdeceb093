// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore

/// Peers and links the engine tests share, so each test says only what is particular to it.
enum Peers {
    /// An ordinary user running curl (not in group netperm, gid 990).
    static let curl = makePeer(uid: 1000, gids: [1000, 100], exe: "/usr/bin/curl")
    /// A member of the admin group (netperm, gid 990) running something no [App] names.
    static let admin = makePeer(uid: 1001, gids: [1001, 990], exe: "/usr/bin/netpermctl", pid: 77)
    /// Root, running something no [App] names (derived id "tester").
    static let root = makePeer(uid: 0, exe: "/usr/bin/tester", pid: 1)
    /// An ordinary user running an app no [App] names (derived id "maps").
    static let maps = makePeer(uid: 1000, exe: "/usr/bin/maps", pid: 500)
}

enum Links {
    static let lo = makeLink(1, "lo", .loopback, metric: nil)
    static let eth = makeLink(2, "eth0", .ethernet, metric: 100)
    static let wlan = makeLink(3, "wlan0", .wifi, metric: 600)
    static let wwan = makeLink(4, "wwan0", .wwan, metric: 700)
}

/// The policies several engine test files start from.
enum Policies {
    /// curl may use WWAN (matched by executable); backup, a unit, may use neither WWAN nor Wi-Fi.
    static let curlAndBackup = """
    [App curl]
    Executable=/usr/bin/curl
    WWAN=allow
    [App backup]
    Unit=backup.service
    WWAN=deny
    WiFi=deny
    """

    /// And modem, matched by uid 7, with the defaults.
    static let curlBackupAndModem = curlAndBackup + "\n[App modem]\nUser=7"

    /// a may use WWAN, b may not.
    static let ab = """
    [App a]
    User=1
    WWAN=allow
    [App b]
    User=2
    WWAN=deny
    """

    /// a and c share a permission set; b differs only on WWAN; d is [Defaults] (WWAN=ask); e is Ethernet-only.
    static let abcde = ab + """

    [App c]
    User=3
    WWAN=allow
    [App d]
    User=4
    [App e]
    User=5
    WiFi=deny
    WWAN=deny
    Other=deny
    """
}
