import CLinux
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
            try? Files.remove(tmp)
            throw error
        }
        FD.close(fd)
        do throws(Errno) {
            try Files.rename(tmp, to: path)
        } catch {
            try? Files.remove(tmp)
            throw error
        }
        let dfd = try sys { open(Files.directory(of: path), O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { FD.close(dfd) }
        _ = try sys { fsync(dfd) }
    }

    /// Moves a bad file aside (`NAME.corrupt-SECONDS`, or `NAME.corrupt-SECONDS.N` when that is taken: two set
    /// aside within one second) so it can be inspected; returns the new path. Never replaces a file: a rename
    /// that would (RENAME_NOREPLACE) tries the next name. `seconds` is for the tests.
    public static func moveAside(_ path: String, seconds: Int = Clock.realtimeSeconds()) throws(Errno) -> String {
        let base = "\(path).corrupt-\(seconds)"
        for n in 0..<1000 {
            let aside = n == 0 ? base : "\(base).\(n)"
            do {
                _ = try sys { np_rename_noreplace(path, aside) }
                return aside
            } catch where error.code == EEXIST {
                continue
            }
        }
        throw Errno(EEXIST)
    }
}
