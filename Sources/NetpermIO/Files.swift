// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// Whole files, read without ever blocking the loop on something that is not a file.
public enum Files {
    public enum ReadError: Error, Equatable, Sendable, CustomStringConvertible {
        case system(Errno)
        /// A FIFO, a device, a directory...: opening it could block, reading it may never end.
        case notRegular
        case tooLarge(limit: Int)
        /// Not owned by the uid it was read for (`read(at:_:limit:owner:)`).
        case notOwned(by: UInt32)

        public var description: String {
            switch self {
            case let .system(e): return "\(e)"
            case .notRegular: return "not a regular file"
            case let .tooLarge(limit): return limit >= 1 << 20 ? "larger than \(limit >> 20) MiB" : "larger than \(limit) bytes"
            case let .notOwned(uid): return "not owned by uid \(uid)"
            }
        }

        public var errno: Errno? {
            if case let .system(e) = self { return e }
            return nil
        }
    }

    /// The whole file: opened non-blocking and checked to be a regular file before anything is read, and refused
    /// (never truncated) when it holds more than `limit` bytes.
    public static func read(_ path: String, limit: Int = 16 << 20) throws(ReadError) -> [UInt8] {
        let fd: Int32
        do { fd = try sys { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) } } catch { throw .system(error) }
        defer { FD.close(fd) }
        var st = stat()
        do { _ = try sys { fstat(fd, &st) } } catch { throw .system(error) }
        guard st.st_mode & S_IFMT == S_IFREG else { throw .notRegular }
        var out: [UInt8] = []
        out.reserveCapacity(min(Int(st.st_size), limit) + 1)
        while true {
            let r: FD.Read
            do { r = try FD.read(fd, appendingTo: &out, max: out.count < 16384 ? 16384 : 65536) } catch { throw .system(error) }
            switch r {
            case .bytes: if out.count > limit { throw .tooLarge(limit: limit) }
            case .end: return out
            // A regular file never would block; treat it as its end rather than spin.
            case .wouldBlock: return out
            }
        }
    }

    /// The file `name` in the directory `parent`, read for someone else: looked at through an `O_PATH` descriptor
    /// first (opening a device, even through a symlink, may do something; a FIFO would block), and read only when
    /// it is a regular file of at most `limit` bytes owned by `owner` (nil: anyone). A user's symlink to a file
    /// they do not own (`/etc/shadow`) is refused, as is a hard link to one.
    public static func read(at parent: Int32, _ name: [UInt8], limit: Int, owner: UInt32?) throws(ReadError) -> [UInt8] {
        let c = name.map { CChar(bitPattern: $0) } + [0]
        let path: Int32
        do { path = try sys { openat(parent, c, NP_O_PATH | O_CLOEXEC) } } catch { throw .system(error) }
        defer { FD.close(path) }
        var st = stat()
        do { _ = try sys { fstat(path, &st) } } catch { throw .system(error) }
        guard st.st_mode & S_IFMT == S_IFREG else { throw .notRegular }
        if let owner, st.st_uid != owner { throw .notOwned(by: owner) }
        guard st.st_size <= limit else { throw .tooLarge(limit: limit) }
        let fd: Int32
        do { fd = try sys { open("/proc/self/fd/\(path)", O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) } } catch { throw .system(error) }
        defer { FD.close(fd) }
        var out: [UInt8] = []
        while true {
            let r: FD.Read
            do { r = try FD.read(fd, appendingTo: &out, max: 16384) } catch { throw .system(error) }
            switch r {
            case .bytes: if out.count > limit { throw .tooLarge(limit: limit) }
            case .end, .wouldBlock: return out
            }
        }
    }

    /// What `netpermctl check` reads: a regular file as `read` does, or (unlike the daemon, which must never block
    /// on one) a pipe, a terminal or another stream to its end, `limit` bytes at most all the same: `check -`,
    /// `check /dev/stdin`, `check <(...)`. A FIFO with no writer yet waits for one, as cat(1) does.
    public static func readAny(_ path: String, limit: Int = 16 << 20) throws(ReadError) -> [UInt8] {
        let fd: Int32
        do { fd = try sys { open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY) } } catch { throw .system(error) }
        defer { FD.close(fd) }
        return try readAny(fd: fd, limit: limit)
    }

    /// Standard input or another descriptor the caller owns, to its end, at most `limit` bytes.
    public static func readAny(fd: Int32, limit: Int = 16 << 20) throws(ReadError) -> [UInt8] {
        var st = stat()
        do { _ = try sys { fstat(fd, &st) } } catch { throw .system(error) }
        guard st.st_mode & S_IFMT != S_IFDIR else { throw .notRegular }
        var out: [UInt8] = []
        while true {
            let r: FD.Read
            do { r = try FD.read(fd, appendingTo: &out, max: 65536) } catch { throw .system(error) }
            switch r {
            case .bytes: if out.count > limit { throw .tooLarge(limit: limit) }
            case .end: return out
            // Set non-blocking by whoever shares it (a terminal, a pipe): wait for the next bytes.
            case .wouldBlock:
                do { try FD.wait(fd, for: Int16(POLLIN)) } catch { throw .system(error) }
            }
        }
    }

    /// `mkdir -p`: missing parents 0755 (others may need to pass through them, e.g. to a socket beside), the
    /// directory itself `mode`, whatever the umask (which mkdir applies: under 077 a socket's directory came out
    /// 0700). An existing directory is left as it is.
    public static func makeDirectory(_ path: String, mode: mode_t = 0o700) throws(Errno) {
        let components = path.split(separator: "/")
        var prefix = path.hasPrefix("/") ? "/" : ""
        for (i, c) in components.enumerated() {
            prefix += (prefix.isEmpty || prefix == "/" ? "" : "/") + c
            let m = i == components.count - 1 ? mode : 0o755
            do {
                _ = try sys { mkdir(prefix, m) }
            } catch where error.code == EEXIST {
                continue
            }
            // Through a descriptor of the directory itself: never the target of a symlink put in its place.
            let fd = try sys { open(prefix, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            defer { FD.close(fd) }
            _ = try sys { fchmod(fd, m) }
        }
    }

    /// The directory part of a path, as dirname(1) gives it.
    public static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The last component of a path.
    public static func name(of path: String) -> String {
        path.lastIndex(of: "/").map { String(path[path.index(after: $0)...]) } ?? path
    }

    /// Which file a path names (device and inode, symlinks followed): two paths name the same file when equal.
    public struct FileID: Equatable, Sendable {
        public var device: UInt64
        public var inode: UInt64
    }

    public static func fileID(_ path: String) throws(Errno) -> FileID {
        var st = stat()
        _ = try sys { stat(path, &st) }
        return FileID(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// The file a process runs (/proc/PID/exe), nil when it is gone or unreadable; the path is made on the stack
    /// (the exec watcher asks this of every exec of the system).
    public static func executableID(pid: Int32) -> FileID? {
        var device: UInt64 = 0, inode: UInt64 = 0
        guard np_proc_exe_id(pid, &device, &inode) == 0 else { return nil }
        return FileID(device: device, inode: inode)
    }

    /// The uid that owns `path` (symlinks followed).
    public static func owner(_ path: String) throws(Errno) -> uid_t {
        var st = stat()
        _ = try sys { stat(path, &st) }
        return st.st_uid
    }

    public static func isSocket(_ path: String) throws(Errno) -> Bool {
        var st = stat()
        _ = try sys { lstat(path, &st) }
        return st.st_mode & S_IFMT == S_IFSOCK
    }

    public static func remove(_ path: String) throws(Errno) {
        _ = try sys { unlink(path) }
    }

    public static func rename(_ from: String, to: String) throws(Errno) {
        _ = try sys { Glibc.rename(from, to) }
    }

    /// The names in a directory (not `.` and `..`, not hidden ones), or [] when it does not exist.
    public static func list(_ dir: String) throws(Errno) -> [String] {
        guard let d = opendir(dir) else {
            let e = Errno(errno)
            if e == .notFound { return [] }
            throw e
        }
        defer { closedir(d) }
        var names: [String] = []
        while let entry = readdir(d) {
            let name = String(decoding: Directory.name(of: entry), as: UTF8.self)
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names
    }

    /// The target of a symbolic link.
    public static func readLink(_ path: String) throws(Errno) -> String {
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = try buf.withUnsafeMutableBytes { b in
            Result { () throws(Errno) -> Int in try sys { readlink(path, b.baseAddress!.assumingMemoryBound(to: CChar.self), b.count) } }
        }.get()
        return String(decoding: buf[0..<n], as: UTF8.self)
    }
}
