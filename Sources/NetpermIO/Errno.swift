// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// A failed system call's errno, captured right after the call that set it (by `sys`).
public struct Errno: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: Int32
    public init(_ code: Int32) { self.code = code }
    public var description: String { String(cString: strerror(code)) }

    public static let wouldBlock = Errno(EAGAIN)
    public static let interrupted = Errno(EINTR)
    public static let notFound = Errno(ENOENT)
    public static let accessDenied = Errno(EACCES)
    public static let notPermitted = Errno(EPERM)
    public static let connectionRefused = Errno(ECONNREFUSED)
    public static let addressInUse = Errno(EADDRINUSE)
    public static let nameTooLong = Errno(ENAMETOOLONG)
    public static let tooManyFiles = Errno(EMFILE)
    public static let tooManyFilesInSystem = Errno(ENFILE)
}

/// The one chokepoint for system calls: retries EINTR, turns -1 into a typed `Errno` read at once.
@inline(__always)
public func sys<T: FixedWidthInteger>(_ call: () -> T) throws(Errno) -> T {
    while true {
        let r = call()
        if r != -1 { return r }
        let e = errno
        if e != EINTR { throw Errno(e) }
    }
}

/// `sys` for calls on non-blocking descriptors: "would block" is an answer, not a failure (nil).
@inline(__always)
public func sysNonBlocking<T: FixedWidthInteger>(_ call: () -> T) throws(Errno) -> T? {
    do {
        return try sys(call)
    } catch where error.code == EAGAIN || error.code == EWOULDBLOCK {
        return nil
    }
}
