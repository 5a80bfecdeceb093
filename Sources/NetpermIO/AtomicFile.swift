// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// Replaces a file so that a crash at any moment leaves the old or the new content, never a torn one:
/// write a temporary file, fsync it, rename it over the old one, fsync the directory.
public enum AtomicFile {
    /// fsync(2) of a directory: what makes a rename in it survive a crash.
    public static let fsyncDirectory: @Sendable (Int32) throws(Errno) -> Void = { fd throws(Errno) in _ = try sys { fsync(fd) } }

    /// Throws what failed before the rename (the old content stays). Once the rename is done the new content is the
    /// file's, so a failure of the directory's fsync after it is returned, not thrown: the file is replaced, but a
    /// crash before the kernel writes the directory may still bring the old one back. `syncDirectory` syncs the
    /// directory's descriptor (the tests make it fail).
    ///
    /// The file gets `mode` whatever the umask (node_exporter's user must read a 0644 textfile under umask 077). The
    /// temporary file has a name of its own (`temporaryPath`), made with O_EXCL and O_NOFOLLOW: a link planted
    /// where it goes is never followed (a shared `NAME.tmp` let a planted symlink overwrite its target), and two
    /// writers of one file never write into each other's (4-8 of them failed, and a reader saw a torn file).
    @discardableResult
    public static func write(_ path: String, _ text: String, mode: mode_t = 0o600,
                             syncDirectory: (Int32) throws(Errno) -> Void = fsyncDirectory,
                             temporaryPath: (String, Int) -> String = temporaryPath) throws(Errno) -> Errno? {
        var attempt = 0
        var tmp = temporaryPath(path, attempt)
        var opened: Int32?
        while opened == nil {
            do {
                opened = try sys { open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
            } catch where error.code == EEXIST && attempt < 100 {
                attempt += 1
                tmp = temporaryPath(path, attempt)
            }
        }
        let fd = opened!
        do throws(Errno) {
            _ = try sys { fchmod(fd, mode) }
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
        do throws(Errno) {
            let dfd = try sys { open(Files.directory(of: path), O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            defer { FD.close(dfd) }
            try syncDirectory(dfd)
            return nil
        } catch {
            return error
        }
    }

    /// `PATH.tmp-PID-RANDOM`: no other writer (another process, another thread) picks the same name, and one that
    /// did would be refused (EEXIST) and try another.
    public static let temporaryPath: @Sendable (String, Int) -> String = { path, _ in
        "\(path).tmp-\(getpid())-\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
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
