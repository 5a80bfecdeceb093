// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermIO
import NetpermPolicy
import NetpermProtocol

/// Reads the desktop files that name apps (docs/APPS.md, "Desktop apps"): the files below `applications/` of each
/// data directory (`XDG_DATA_DIRS` as the daemon has it, `/usr/local/share:/usr/share` by default, then Flatpak's
/// `/var/lib/flatpak/exports/share` and Snap's `/var/lib/snapd/desktop`; the first holding an ID wins, as for the
/// desktop), and each user's own (`~/.local/share`, `~/.local/share/flatpak/exports/share`) for that user's apps. A
/// file's desktop-file ID is its path below `applications/` with `/` made `-` (`kde4/okular.desktop` is
/// `kde4-okular`), at most `maxDepth` directories down. `TryExec=` and `Exec=`'s program are looked up in the
/// daemon's `PATH` (DesktopExec), as GLib does in the launcher's: an entry whose `TryExec=` is missing is dropped.
///
/// A user's files are untrusted, and the daemon may read what they cannot: their directories are walked without
/// following a symlink, each file is looked at before it is opened and read only when it is a regular file the
/// user owns, of at most `DesktopEntry.maxBytes` (a symlink to /etc/shadow, a FIFO, a device, a 1 GB file are
/// passed over), and at most `maxFilesPerDirectory` of a data directory are read. Runs on a thread of its own
/// (DesktopWatcher): nothing here touches the loop.
public struct DesktopFiles: Sendable {
    public static let maxFilesPerDirectory = 1000
    /// Subdirectories of `applications/` walked into (the spec's IDs allow any; menus use one level, `kde4/`).
    public static let maxDepth = 2
    public static let defaultDataDirs = ["/usr/local/share", "/usr/share"]
    public static let flatpakSystem = "/var/lib/flatpak/exports/share"
    /// snapd's: `SNAP_APP.desktop` (`firefox_firefox.desktop`), added to `XDG_DATA_DIRS` by its profile script.
    public static let snapSystem = "/var/lib/snapd/desktop"
    /// Below a user's home, the data directories of their own apps, XDG_DATA_HOME's first.
    static let userDataDirs: [[String]] = [[".local", "share"], [".local", "share", "flatpak", "exports", "share"]]

    public let dataDirs: [String]
    /// The daemon's `PATH`, where `TryExec=` and `Exec=` name a bare program (nil: DesktopExec.defaultPath).
    public let path: String?

    /// `xdgDataDirs`: the daemon's `XDG_DATA_DIRS` (nil or empty: the spec's default); relative entries are
    /// ignored, as the spec says.
    public init(xdgDataDirs: String?, path: String? = nil) {
        let given = (xdgDataDirs ?? "").split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        var dirs = given.isEmpty ? Self.defaultDataDirs : given
        for extra in [Self.flatpakSystem, Self.snapSystem] where !dirs.contains(extra) { dirs.append(extra) }
        dataDirs = dirs
        self.path = path
    }

    /// What a read found: the catalog, the directories to watch (each `applications/` that exists, or the
    /// nearest existing directory on the way to one that does not, so that making it is seen), and what was
    /// passed over, for one log line.
    public struct Read: Sendable {
        public var catalog = DesktopCatalog()
        public var watched: [String] = []
        public var skipped: [String] = []
    }

    /// Reads everyone's and these users' (uid and home) files.
    public func read(users: [(uid: UInt32, home: String)]) -> Read {
        var result = Read()
        for dir in dataDirs {
            let (entries, watch) = readDirectory(from: dir, ["applications"], owner: nil, skipped: &result.skipped)
            result.watched.append(watch)
            for (id, e) in entries where result.catalog.system[id] == nil { result.catalog.system[id] = e }
        }
        for (uid, home) in users {
            var own: [String: DesktopEntry] = [:]
            for components in Self.userDataDirs {
                let (entries, watch) = readDirectory(from: home, components + ["applications"], owner: uid,
                                                     skipped: &result.skipped)
                result.watched.append(watch)
                for (id, e) in entries where own[id] == nil { own[id] = e }
            }
            if !own.isEmpty { result.catalog.users[uid] = own }
        }
        return result
    }

    /// `path`, or the nearest directory above it that exists: what to watch for it to appear.
    static func nearestExisting(_ path: String) -> String {
        var p = path
        while p.count > 1, access(p, F_OK) != 0 { p = Files.directory(of: p) }
        return p
    }

    /// A regular file the daemon may execute (GLib's `g_file_test(G_FILE_TEST_IS_EXECUTABLE)`, no directory).
    static func isExecutable(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFREG && access(path, X_OK) == 0
    }

    /// The entry as the reader completes it: `TryExec=`'s program looked up, `Exec=`'s resolved, and the files it
    /// runs by device and inode (ExecIndex): for everyone's entries (`owner` nil) only files in directories only
    /// root can write, so that no user can make everyone's app run their file.
    func completed(_ entry: DesktopEntry, owner: UInt32? = nil) -> DesktopEntry {
        var e = entry
        if let t = e.tryExec { e.tryExecMissing = DesktopExec.isMissing(tryExec: t, path: path, isExecutable: Self.isExecutable) }
        if let program = e.exec?.first { e.program = DesktopExec.resolve(program, path: path, isExecutable: Self.isExecutable) }
        guard let program = e.program, let args = e.exec else { return e }
        func trusted(_ p: String) -> FileKey? {
            guard owner != nil || Self.onlyRootWrites(p) else { return nil }
            return Self.fileKey(p)
        }
        if args.count >= 2, args[1].hasPrefix("/"), Self.shebang(args[1]) != nil {
            // `Exec=python3 /usr/bin/foo`: the interpreter runs the script.
            e.interpreterFile = trusted(program)
            e.scriptFile = e.interpreterFile == nil ? nil : trusted(args[1])
        } else if let interpreter = Self.shebang(program) {
            // A script with a `#!` line: /proc/PID/exe is its interpreter.
            let resolved = interpreter.hasPrefix("/") ? interpreter
                : DesktopExec.resolve(interpreter, path: path, isExecutable: Self.isExecutable)
            e.interpreterFile = resolved.flatMap(trusted)
            e.scriptFile = e.interpreterFile == nil ? nil : trusted(program)
        } else {
            e.programFile = trusted(program)
        }
        return e
    }

    /// The device and inode of the file `path` names (symlinks followed, as /proc/PID/exe names what runs).
    static func fileKey(_ path: String) -> FileKey? {
        (try? Files.fileID(path)).map { FileKey(device: $0.device, inode: $0.inode) }
    }

    /// Whether only root can change what `path` runs: the file (symlinks resolved) and every directory above it
    /// owned by root and writable by no group or other.
    static func onlyRootWrites(_ path: String) -> Bool {
        guard let real = realpath(path, nil) else { return false }
        defer { free(real) }
        var p = String(cString: real)
        while true {
            var st = stat()
            guard stat(p, &st) == 0, st.st_uid == 0, st.st_mode & 0o022 == 0 else { return false }
            if p == "/" { return true }
            p = Files.directory(of: p)
            if p.isEmpty { p = "/" }
        }
    }

    /// The interpreter a `#!` line names (`#!/usr/bin/gjs -m`: `/usr/bin/gjs`; `#!/usr/bin/env python3`: `python3`,
    /// looked up in `PATH` as env does), nil when the file is no script.
    static func shebang(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { FD.close(fd) }
        var st = stat()
        var buffer = [UInt8](repeating: 0, count: 256)
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n > 2 else { return nil }
        let bytes = buffer.prefix(n)
        guard bytes.starts(with: [0x23, 0x21]) else { return nil }
        let line = bytes.dropFirst(2).prefix { $0 != 0x0A }
        let words = String(decoding: line, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard let first = words.first else { return nil }
        if first.hasSuffix("/env") { return words.dropFirst().first { !$0.hasPrefix("-") } }
        return first
    }

    /// The entries of the directory `components` below `base` (walked without following symlinks when `owner` is
    /// given), and the path to watch for it.
    private func readDirectory(from base: String, _ components: [String], owner: UInt32?,
                               skipped: inout [String]) -> ([String: DesktopEntry], String) {
        var path = base
        guard var fd = try? Directory.open(base) else { return ([:], Self.nearestExisting(base)) }
        defer { FD.close(fd) }
        for c in components {
            let next: Int32
            do {
                next = owner == nil ? try Directory.open(path + "/" + c) : try Directory.open(at: fd, Array(c.utf8))
            } catch {
                return ([:], path)
            }
            FD.close(fd)
            fd = next
            path += "/" + c
        }
        var entries: [String: DesktopEntry] = [:]
        var read = 0
        readFiles(fd, path: path, below: [], owner: owner, into: &entries, read: &read, skipped: &skipped)
        return (entries, path)
    }

    /// The desktop files of the directory `fd` (at `below` under `applications/`), and those of its
    /// subdirectories down to `maxDepth`, never through a symlink; at most `maxFilesPerDirectory` in all.
    private func readFiles(_ fd: Int32, path: String, below: [String], owner: UInt32?,
                           into entries: inout [String: DesktopEntry], read: inout Int, skipped: inout [String]) {
        guard let names = try? Directory.entries(fd) else { return }
        for raw in names {
            guard let name = String(validating: raw, as: UTF8.self), name != ".", name != ".." else { continue }
            guard name.hasSuffix(".desktop") else {
                guard below.count < Self.maxDepth, read < Self.maxFilesPerDirectory,
                      let sub = try? Directory.open(at: fd, raw) else { continue }
                defer { FD.close(sub) }
                readFiles(sub, path: path + "/" + name, below: below + [name], owner: owner, into: &entries,
                          read: &read, skipped: &skipped)
                continue
            }
            guard let id = DesktopAppID.fileID(relativePath: below + [name]) else { continue }
            guard read < Self.maxFilesPerDirectory else {
                skipped.append("\(path): more than \(Self.maxFilesPerDirectory) desktop files, the rest not read")
                return
            }
            read += 1
            do {
                let bytes = try Files.read(at: fd, raw, limit: DesktopEntry.maxBytes, owner: owner)
                // The first file of an ID in this directory's walk; ties between `a-b.desktop` and `a/b.desktop`
                // (both `a-b`) go to the one listed first, as the spec leaves it open.
                if entries[id] == nil, let e = DesktopEntry.parse(bytes) { entries[id] = completed(e, owner: owner) }
            } catch {
                if skipped.count < 20 { skipped.append("\(path)/\(SafeText.excerpt(name, maxBytes: 200)): \(error)") }
            }
        }
    }
}
