// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// Directories by descriptor, their entries by the bytes the kernel has for them: a name need not be text (no
/// String can spell one that is not UTF-8, and a path built from its decoded form names another file, or none).
public enum Directory {
    /// An open descriptor of the directory at `path` (symlinks followed).
    public static func open(_ path: String) throws(Errno) -> Int32 {
        try sys { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
    }

    /// An open descriptor of the directory `name` in the directory `parent` (never through a symlink).
    public static func open(at parent: Int32, _ name: [UInt8]) throws(Errno) -> Int32 {
        let c = name.map { CChar(bitPattern: $0) } + [0]
        return try sys { openat(parent, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
    }

    /// The inode number of the directory `name` in `parent`; nil when it is not a directory.
    public static func inode(at parent: Int32, _ name: [UInt8]) throws(Errno) -> UInt64? {
        let c = name.map { CChar(bitPattern: $0) } + [0]
        var st = stat()
        _ = try sys { fstatat(parent, c, &st, AT_SYMLINK_NOFOLLOW) }
        return st.st_mode & S_IFMT == S_IFDIR ? UInt64(st.st_ino) : nil
    }

    /// The inode number of an open descriptor's file.
    public static func inode(_ fd: Int32) throws(Errno) -> UInt64 {
        var st = stat()
        _ = try sys { fstat(fd, &st) }
        return UInt64(st.st_ino)
    }

    /// The names in the directory `fd` (not `.` and `..`, not hidden ones) as bytes, in byte order. `fd` stays open
    /// and is not moved.
    public static func entries(_ fd: Int32) throws(Errno) -> [[UInt8]] {
        try listing(fd).map(\.name).sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// An entry's name, whatever its length. `struct dirent` declares 256 bytes for it, but cgroupfs takes longer
    /// names and readdir hands each over whole (its record is as long as its name): the name ends at its NUL. Read
    /// as 256 bytes, a user's unit named with more was looked up by a name that is not there, and never followed.
    public static func name(of entry: UnsafeMutablePointer<dirent>) -> [UInt8] {
        let p = UnsafeRawPointer(entry).advanced(by: MemoryLayout<dirent>.offset(of: \.d_name)!)
            .assumingMemoryBound(to: CChar.self)
        return Array(UnsafeRawBufferPointer(start: p, count: strlen(p)))
    }

    /// The names in the directory `fd` (not `.` and `..`, not hidden ones) with their inode numbers, in the
    /// directory's order: one pass, where a lookup of each name would take the directory's lock once per name.
    public static func listing(_ fd: Int32) throws(Errno) -> [(name: [UInt8], inode: UInt64)] {
        // readdir moves the descriptor it reads: a descriptor of its own.
        let own = try sys { openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard let d = fdopendir(own) else {
            let e = Errno(errno)
            FD.close(own)
            throw e
        }
        defer { closedir(d) }
        var names: [(name: [UInt8], inode: UInt64)] = []
        while let entry = readdir(d) {
            let name = Self.name(of: entry)
            if name.first != UInt8(ascii: ".") { names.append((name, UInt64(entry.pointee.d_ino))) }
        }
        return names
    }
}
