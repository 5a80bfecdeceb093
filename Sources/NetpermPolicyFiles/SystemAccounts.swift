// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermPolicy

/// User and group names from the system's databases (NSS), asked when a policy is read. The reentrant calls:
/// policies are parsed on a thread of their own while `netpermctl check` or the start-up read may run elsewhere.
public struct SystemAccounts: AccountResolver, Sendable {
    public init() {}

    public func uid(forUser name: String) -> UInt32? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        return withBuffer { buf, size in getpwnam_r(name, &entry, buf, size, &found) } == 0 && found != nil
            ? entry.pw_uid : nil
    }

    /// The home directory of `uid`, as the passwd database has it.
    public func home(of uid: UInt32) -> String? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        guard withBuffer({ buf, size in getpwuid_r(uid, &entry, buf, size, &found) }) == 0, found != nil,
              let dir = entry.pw_dir else { return nil }
        let home = String(cString: dir)
        return home.hasPrefix("/") ? home : nil
    }

    public func gid(forGroup name: String) -> UInt32? {
        var entry = group()
        var found: UnsafeMutablePointer<group>?
        return withBuffer { buf, size in getgrnam_r(name, &entry, buf, size, &found) } == 0 && found != nil
            ? entry.gr_gid : nil
    }

    /// Calls `body` with a buffer for the entry's strings, growing it while the call says ERANGE (a group
    /// with many members needs more than a page).
    private func withBuffer(_ body: (UnsafeMutablePointer<CChar>, Int) -> Int32) -> Int32 {
        var size = 4096
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            let r = buffer.withUnsafeMutableBufferPointer { body($0.baseAddress!, size) }
            if r != ERANGE || size >= 1 << 24 { return r }
            size *= 4
        }
    }
}
