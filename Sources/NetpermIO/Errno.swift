import Glibc

/// A failed system call's errno, thrown by `sys`.
public struct Errno: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: Int32
    public init(_ code: Int32) { self.code = code }
    public static var current: Errno { Errno(errno) }
    public var description: String { String(cString: strerror(code)) }

    public static let again = Errno(EAGAIN)
    public static let interrupted = Errno(EINTR)
    public static let notFound = Errno(ENOENT)
    public static let connectionRefused = Errno(ECONNREFUSED)
    public static let addressInUse = Errno(EADDRINUSE)
}

/// The one chokepoint for system calls: retries EINTR, turns -1 into a typed `Errno`.
@inline(__always)
public func sys<T: FixedWidthInteger>(_ call: () -> T) throws(Errno) -> T {
    while true {
        let r = call()
        if r != -1 { return r }
        let e = errno
        if e != EINTR { throw Errno(e) }
    }
}
