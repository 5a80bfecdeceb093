import Glibc
import NetpermCore

/// User and group names from the system's databases (NSS).
public struct SystemAccounts: AccountResolver {
    public init() {}
    public func uid(forUser name: String) -> UInt32? { getpwnam(name)?.pointee.pw_uid }
    public func gid(forGroup name: String) -> UInt32? { getgrnam(name)?.pointee.gr_gid }
}
