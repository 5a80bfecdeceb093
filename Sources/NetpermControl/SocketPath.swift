import Glibc
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

    /// Creates the parent directory if needed, replaces a stale socket, binds with mode 0666 and listens.
    public static func bindListening(_ path: String) throws(BindError) -> Int32 {
        guard var addr = UnixSocket.address(path) else { throw .tooLong(path) }
        makeParent(of: path)
        switch Result(catching: { () throws(Errno) -> Int32 in try UnixSocket.connect(path) }) {
        case let .success(fd):
            FD.close(fd)
            throw .inUse(path)
        case let .failure(e) where e == .connectionRefused:
            // connect() is refused by any file, not only by a socket nobody listens on; delete only the latter.
            var st = stat()
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK else { throw .notASocket(path) }
            unlink(path)   // a socket file nobody listens on: left over from a crash
        case let .failure(e) where e == .notFound:
            break
        case let .failure(e):
            throw .system("cannot probe \(path)", e)
        }
        do throws(Errno) {
            let fd = try sys { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0) }
            // Bind under umask 0111 so the socket is created 0666 atomically (bind applies the umask to 0777):
            // anyone may ask, the daemon checks who.
            let old = umask(0o111)
            defer { umask(old) }
            do {
                _ = try sys {
                    withUnsafePointer(to: &addr) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                        }
                    }
                }
                _ = try sys { listen(fd, 4096) }
            } catch {
                FD.close(fd)
                throw error
            }
            return fd
        } catch {
            throw .system("cannot bind \(path)", error)
        }
    }

    private static func makeParent(of path: String) {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let dir = String(path[..<slash])
        if !FD.exists(dir) {
            makeParent(of: dir)
            mkdir(dir, 0o755)
        }
    }
}
