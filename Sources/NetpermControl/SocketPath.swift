// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermIO

/// Binding the control socket's path: stale files from a crash are replaced, a live daemon is not.
public enum SocketPath {
    public enum BindError: Error, CustomStringConvertible {
        case inUse(String)
        case notASocket(String)
        case tooLong(String)
        case system(String, Errno)

        public var description: String {
            switch self {
            case let .inUse(p): return "another netpermd is already answering on \(p); refusing to start"
            case let .notASocket(p): return "\(p) exists and is not a socket; refusing to replace it"
            case let .tooLong(p): return "socket path \(p) is too long for a Unix socket"
            case let .system(what, e): return "\(what): \(e)"
            }
        }
    }

    /// Creates the parent directory if needed (0755), replaces a stale socket, binds with mode 0666 (anyone may
    /// ask; the daemon checks who) and listens.
    public static func bindListening(_ path: String) throws(BindError) -> Int32 {
        guard UnixSocket.address(path) != nil else { throw .tooLong(path) }
        do { try Files.makeDirectory(Files.directory(of: path), mode: 0o755) } catch {
            throw .system("cannot create the directory of \(path)", error)
        }
        switch Result(catching: { () throws(Errno) -> Int32 in try UnixSocket.connect(path) }) {
        case let .success(fd):
            FD.close(fd)
            throw .inUse(path)
        case let .failure(e) where e == .connectionRefused:
            // connect() is refused by any file, not only by a socket nobody listens on; delete only the latter.
            guard (try? Files.isSocket(path)) == true else { throw .notASocket(path) }
            // A socket file nobody listens on: left over from a crash.
            do { try Files.remove(path) } catch { throw .system("cannot remove the stale socket \(path)", error) }
        case let .failure(e) where e == .notFound:
            break
        case let .failure(e):
            throw .system("cannot probe \(path)", e)
        }
        do { return try UnixSocket.listen(path, mode: 0o666) } catch { throw .system("cannot bind \(path)", error) }
    }
}
