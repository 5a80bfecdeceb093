// SPDX-License-Identifier: LGPL-2.1-or-later
import CNetlink
import Glibc

/// A netlink failure: libnl's code and words, or the errno the kernel answered with.
public struct NetlinkError: Error, CustomStringConvertible {
    /// libnl's error code (negative; not an errno).
    public let code: Int32
    public let operation: String
    /// The kernel's errno, when the kernel refused the request.
    public let errno: Int32?

    init(code: Int32, operation: String, errno: Int32? = nil) {
        self.code = code
        self.operation = operation
        self.errno = errno
    }

    public var description: String {
        if let errno { return "\(operation): \(String(cString: strerror(errno)))" }
        return "\(operation): \(String(cString: nl_geterror(code)))"
    }
}
