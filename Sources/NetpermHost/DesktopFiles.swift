// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermIO
import NetpermPolicy
import NetpermProtocol

/// Reads the desktop files that name apps (docs/APPS.md, "Desktop apps"): `APPID.desktop` in `applications/` of
/// each data directory (`XDG_DATA_DIRS` as the daemon has it, `/usr/local/share:/usr/share` by default, then
/// Flatpak's `/var/lib/flatpak/exports/share`; the first holding an ID wins, as for the desktop), and each user's own
/// (`~/.local/share`, `~/.local/share/flatpak/exports/share`) for that user's apps.
///
/// A user's files are untrusted, and the daemon may read what they cannot: their directories are walked without
/// following a symlink, each file is looked at before it is opened and read only when it is a regular file the
/// user owns, of at most `DesktopEntry.maxBytes` (a symlink to /etc/shadow, a FIFO, a device, a 1 GB file are
/// passed over), and at most `maxFilesPerDirectory` of a directory are read. Runs on a thread of its own
/// (DesktopWatcher): nothing here touches the loop.
public struct DesktopFiles: Sendable {
    public static let maxFilesPerDirectory = 1000
    public static let defaultDataDirs = ["/usr/local/share", "/usr/share"]
    public static let flatpakSystem = "/var/lib/flatpak/exports/share"
    /// Below a user's home, the data directories of their own apps, XDG_DATA_HOME's first.
    static let userDataDirs: [[String]] = [[".local", "share"], [".local", "share", "flatpak", "exports", "share"]]

    public let dataDirs: [String]

    /// `xdgDataDirs`: the daemon's `XDG_DATA_DIRS` (nil or empty: the spec's default); relative entries are
    /// ignored, as the spec says.
    public init(xdgDataDirs: String?) {
        let given = (xdgDataDirs ?? "").split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        var dirs = given.isEmpty ? Self.defaultDataDirs : given
        if !dirs.contains(Self.flatpakSystem) { dirs.append(Self.flatpakSystem) }
        dataDirs = dirs
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
        guard let names = try? Directory.entries(fd) else { return ([:], path) }
        var entries: [String: DesktopEntry] = [:]
        var read = 0
        for raw in names {
            guard let name = String(validating: raw, as: UTF8.self), name.hasSuffix(".desktop") else { continue }
            let id = String(name.dropLast(8))
            guard DesktopAppID.isValid(id) else { continue }
            guard read < Self.maxFilesPerDirectory else {
                skipped.append("\(path): more than \(Self.maxFilesPerDirectory) desktop files, the rest not read")
                break
            }
            read += 1
            do {
                let bytes = try Files.read(at: fd, raw, limit: DesktopEntry.maxBytes, owner: owner)
                if let e = DesktopEntry.parse(bytes) { entries[id] = e }
            } catch {
                if skipped.count < 20 { skipped.append("\(path)/\(SafeText.excerpt(name, maxBytes: 200)): \(error)") }
            }
        }
        return (entries, path)
    }
}
