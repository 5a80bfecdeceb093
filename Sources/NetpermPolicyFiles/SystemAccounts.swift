// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermPolicy

/// User and group names from the system's databases (NSS), asked when a policy is read. The reentrant calls:
/// policies are parsed on a thread of their own while `netpermctl check` or the start-up read may run elsewhere.
public struct SystemAccounts: AccountResolver, Sendable {
    public init() {}

    public func uid(forUser name: String) -> UInt32? {
        var entry = passwd()
        return Self.lookUp({ buf, size, found in getpwnam_r(name, &entry, buf, size, found) }) { _ in entry.pw_uid }
    }

    /// The home directory of `uid`, as the passwd database has it.
    public func home(of uid: UInt32) -> String? {
        var entry = passwd()
        let home = Self.lookUp({ buf, size, found in getpwuid_r(uid, &entry, buf, size, found) }) { _ in
            entry.pw_dir.map { String(cString: $0) }
        }
        guard let home, let home, home.hasPrefix("/") else { return nil }
        return home
    }

    /// The user's name, as the passwd database has it.
    public func name(ofUser uid: UInt32) -> String? {
        var entry = passwd()
        let name = Self.lookUp({ buf, size, found in getpwuid_r(uid, &entry, buf, size, found) }) { _ in
            entry.pw_name.map { String(cString: $0) }
        }
        return name ?? nil
    }

    public func gid(forGroup name: String) -> UInt32? {
        var entry = group()
        return Self.lookUp({ buf, size, found in getgrnam_r(name, &entry, buf, size, found) }) { _ in entry.gr_gid }
    }

    /// Calls `call` with a buffer for the entry's strings, growing it while the call says ERANGE (a group with many
    /// members needs more than a page), and reads the entry with `read` while that buffer still lives: the entry's
    /// strings point into it, so nothing may read them after this returns (a copy made after the buffer was freed
    /// crashed start-ups with users logged in).
    static func lookUp<Entry, T>(
        _ call: (UnsafeMutablePointer<CChar>, Int, UnsafeMutablePointer<UnsafeMutablePointer<Entry>?>) -> Int32,
        read: (UnsafeMutablePointer<Entry>) -> T
    ) -> T? {
        var size = 4096
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            var found: UnsafeMutablePointer<Entry>?
            let (r, value): (Int32, T?) = buffer.withUnsafeMutableBufferPointer { b in
                let r = call(b.baseAddress!, size, &found)
                guard r == 0, let found else { return (r, nil) }
                return (r, read(found))
            }
            if r != ERANGE || size >= 1 << 24 { return value }
            size *= 4
        }
    }
}
