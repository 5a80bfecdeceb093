import Glibc

/// Replaces a file so that a crash at any moment leaves the old or the new content, never a torn one:
/// write a temporary file, fsync it, rename it over the old one, fsync the directory.
public enum AtomicFile {
    public static func write(_ path: String, _ text: String, mode: mode_t = 0o600) throws(Errno) {
        let tmp = path + ".tmp"
        let fd = try sys { open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode) }
        do throws(Errno) {
            let bytes = Array(text.utf8)
            var off = 0
            while off < bytes.count {
                off += try bytes.withUnsafeBytes { b in
                    Result { () throws(Errno) -> Int in try sys { Glibc.write(fd, b.baseAddress! + off, b.count - off) } }
                }.get()
            }
            _ = try sys { fsync(fd) }
        } catch {
            FD.close(fd)
            unlink(tmp)
            throw error
        }
        FD.close(fd)
        do throws(Errno) {
            _ = try sys { rename(tmp, path) }
        } catch {
            unlink(tmp)
            throw error
        }
        let dir = path.lastIndex(of: "/").map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        let dfd = try sys { open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { FD.close(dfd) }
        _ = try sys { fsync(dfd) }
    }

    /// Moves a bad file aside (`NAME.corrupt-SECONDS`) so it can be inspected; returns the new path.
    public static func moveAside(_ path: String) -> String? {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let aside = "\(path).corrupt-\(ts.tv_sec)"
        return (try? sys { rename(path, aside) }) != nil ? aside : nil
    }

    /// `mkdir -p`: missing parents 0755 (others may need to pass through them, e.g. to a socket beside), the
    /// directory itself `mode`.
    public static func makeDirectory(_ path: String, mode: mode_t = 0o700) {
        var parts: [String] = []
        let components = path.split(separator: "/")
        for (i, c) in components.enumerated() {
            parts.append(String(c))
            mkdir((path.hasPrefix("/") ? "/" : "") + parts.joined(separator: "/"), i == components.count - 1 ? mode : 0o755)
        }
    }
}
