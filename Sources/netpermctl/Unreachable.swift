// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO

/// Why netpermctl could not connect to the daemon, in the words that point an administrator at the cause.
enum Unreachable {
    /// Nobody is there: no socket file, or nobody listening behind it. Worth waiting for.
    case notRunning(Errno)
    /// The socket or a directory above it does not let this user in; waiting will not change that.
    case denied(Errno)
    case other(Errno)

    init(_ e: Errno) {
        switch e.code {
        case ENOENT, ECONNREFUSED: self = .notRunning(e)
        case EACCES, EPERM: self = .denied(e)
        default: self = .other(e)
        }
    }

    /// Whether the daemon may yet appear (it is starting or restarting).
    var mayResolveItself: Bool {
        switch self {
        case .notRunning: return true
        case .denied, .other: return false
        }
    }

    func message(_ path: String) -> String {
        switch self {
        case let .notRunning(e): return "cannot reach netpermd at \(path): \(e) (is the daemon running?)"
        case let .denied(e):
            return "cannot reach netpermd at \(path): \(e) (the socket's permissions or directory do not let "
                + "this user in)"
        case let .other(e): return "cannot reach netpermd at \(path): \(e)"
        }
    }
}

extension Connection {
    /// Connects, or says why not and exits 3.
    static func open(_ path: String) -> Connection {
        do { return try Connection(path: path) } catch {
            die(Unreachable(error).message(path), .unreachable)
        }
    }
}
