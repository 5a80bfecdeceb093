// SPDX-License-Identifier: LGPL-2.1-or-later
// What a local user can make that the daemon watches, through the daemon's own watching code on real directories:
// cgroups of any name (UnitCgroupScanner, the inotify reads of the loop's watches, DesktopAppID) and desktop files of
// any content and kind (DesktopFiles, DesktopEntry). As root with a cgroup v2 hierarchy, the directories are a cgroup
// subtree of the target's own (`npt-fuzz-watch-PID` at the hierarchy's root, which takes names of any length);
// otherwise a directory under /tmp (names over 255 bytes are then refused, as there). The scanner is told that
// subtree is the hierarchy (a mountinfo line of its own), and holds its descriptors from input to input as the daemon
// does. The input is records separated by NUL bytes, the first byte of each saying what it is:
//   u NAME  a cgroup in the user's `app.slice` (below user.slice/user-UID.slice/user@UID.service); '/' nests:
//           `u x.slice/app-a-1.scope` makes x.slice, then app-a-1.scope in it
//   s NAME  the same in `system.slice`
//   r       removes the last cgroup made (with what was nested in it)
//   d NAME \x01 BYTES   a desktop file NAME (a '/' in NAME is '_') in the user's ~/.local/share/applications
//   l NAME  a symlink NAME there to /dev/zero    f NAME  a FIFO    D NAME  a directory    x NAME  NAME removed
//   ! a scan now (one is always made at the end)
// The user is the target's own uid, so its files pass the owner check.
import Glibc
@testable import NetpermCore
@testable import NetpermHost
@testable import NetpermIO
@testable import NetpermPolicy
@testable import NetpermProtocol

/// The fixed tree, made once: the hierarchy's root with system.slice and a user's manager, and a home.
final class Bed {
    let root: String
    let home: String
    let uid = getuid()
    let scanner: UnitCgroupScanner
    let inotify: Inotify
    var apps: String { home + "/.local/share/applications" }
    var userSlice: String { root + "/user.slice/user-\(uid).slice/user@\(uid).service/app.slice" }
    var systemSlice: String { root + "/system.slice" }
    /// What a directory's watch number is: a watched directory's path (the fixed ones).
    var watched: [Int32: String] = [:]
    /// The open descriptors once the fixed tree was scanned: every input must end with no more.
    var descriptors: [String] = []
    var logged: [String] = []

    init() {
        let pid = getpid()
        var mount: String?
        if getuid() == 0, let info = FD.readText("/proc/self/mountinfo") { mount = UnitCgroups.unifiedMountPoint(mountinfo: info) }
        if let m = mount, mkdir(m + "/npt-fuzz-watch-\(pid)", 0o755) == 0 {
            root = m + "/npt-fuzz-watch-\(pid)"
        } else {
            root = "/tmp/npt-fuzz-watch-\(pid)"
            _ = mkdir(root, 0o755)
        }
        home = "/tmp/npt-fuzz-watch-home-\(pid)"
        for d in [root + "/user.slice", root + "/user.slice/user-\(uid).slice", root + "/user.slice/user-\(uid).slice/user@\(uid).service",
                  root + "/user.slice/user-\(uid).slice/user@\(uid).service/app.slice", root + "/system.slice",
                  root + "/user.slice/user-\(uid).slice/user@\(uid).service/app.slice/app-org.example.Fixed-1.scope",
                  home, home + "/.local", home + "/.local/share", home + "/.local/share/applications"] {
            require(mkdir(d, 0o755) == 0, "mkdir \(d): errno \(errno)")
        }
        // The scanner finds the hierarchy where mountinfo says: here, the target's own subtree.
        scanner = UnitCgroupScanner(mountinfo: "36 25 0:31 / \(root) rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n")
        inotify = try! Inotify()
        Log.sink = { [unowned self] line in self.logged.append(line) }
        let first = scanner.scan()
        require(first.cgroups.units.map(\.unit) == ["app-org.example.Fixed-1.scope"], "the fixed tree: \(first.cgroups.units)")
        for found in first.directories {
            // As the loop's watches are made (Kernel.directoryChanges), by the descriptor the scanner holds.
            let w = try! inotify.watch(path: "/proc/self/fd/\(found.fd)", mask: Kernel.directoryChanges)
            watched[w] = found.place?.path ?? "(root)"
        }
        watched[try! inotify.watch(path: apps, mask: Kernel.directoryChanges)] = "applications"
        descriptors = openDescriptors()
        removeWhenGone([root, home])
    }
}

let bed = Bed()

/// The process's open descriptors and what each is (for a message when they leak), but pipes: the sanitizers'
/// symbolizer, started when libFuzzer first prints a new function, talks to the process through two.
func openDescriptors() -> [String] {
    guard let d = opendir("/proc/self/fd") else { return [] }
    defer { closedir(d) }
    var list: [String] = []
    while let e = readdir(d) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard Int32(name) != dirfd(d), name != ".", name != ".." else { continue }
        let target = (try? Files.readLink("/proc/self/fd/" + name)) ?? "?"
        if !target.hasPrefix("pipe:") { list.append(name + " " + target) }
    }
    return list.sorted()
}

/// Removes `paths` when this process ends, however it ends (libFuzzer leaves by _Exit, a crash by abort, neither
/// runs atexit): a child waits for the end of a pipe only this process holds open for writing, then removes them.
func removeWhenGone(_ paths: [String]) {
    var p: [Int32] = [0, 0]
    guard pipe(&p) == 0 else { return }
    _ = fcntl(p[1], F_SETFD, FD_CLOEXEC)
    if fork() == 0 {
        close(p[1])
        var b: UInt8 = 0
        while true {
            let r = read(p[0], &b, 1)
            if r == 0 || (r < 0 && errno != EINTR) { break }
        }
        for path in paths { removeTree(path) }
        _exit(0)
    }
    close(p[0])
}

/// Removes a tree deepest first through descriptors (names of any bytes and length).
func removeTree(_ path: String) {
    let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else { _ = unlink(path); return }
    removeEntries(fd)
    close(fd)
    _ = rmdir(path)
}

/// Every entry of `fd`, hidden ones too (Directory.entries leaves them out).
func allEntries(_ fd: Int32) -> [[UInt8]] {
    let own = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard own >= 0, let d = fdopendir(own) else { return [] }
    defer { closedir(d) }
    var names: [[UInt8]] = []
    while let e = readdir(d) {
        let name = Directory.name(of: e)
        if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
    }
    return names
}

func removeEntries(_ fd: Int32) {
    for name in allEntries(fd) {
        let c = name.map { CChar(bitPattern: $0) } + [0]
        let child = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if child >= 0 {
            removeEntries(child)
            close(child)
            _ = unlinkat(fd, c, AT_REMOVEDIR)
        } else {
            _ = unlinkat(fd, c, 0)
        }
    }
}

/// A chain of cgroups made by one record: the parent's descriptor and each name, outermost first.
struct Made {
    var dirs: [(parent: Int32, name: [UInt8])] = []
    var base: String
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let records = split(bytes(data, size), on: 0).prefix(64)
    var made: [Made] = []
    var opened: [Int32] = []
    /// Names made directly in a watched directory, by its path: each must come back from inotify, byte for byte.
    var expected: [String: [[UInt8]]] = [:]
    var files: [[UInt8]: [UInt8]] = [:]  // regular desktop files now, name to content
    var others: Set<[UInt8]> = []        // symlinks, FIFOs, directories
    bed.logged = []

    func cname(_ b: [UInt8]) -> [CChar] { b.map { CChar(bitPattern: $0) } + [0] }
    func removeChain(_ m: Made) {
        for d in m.dirs.reversed() { _ = unlinkat(d.parent, cname(d.name), AT_REMOVEDIR) }
    }
    func appsEntry(_ raw: ArraySlice<UInt8>) -> [UInt8] { raw.map { $0 == 0x2F ? 0x5F : $0 } }

    for r in records {
        guard let op = r.first else { continue }
        let arg = r.dropFirst()
        switch op {
        case UInt8(ascii: "u"), UInt8(ascii: "s"):
            let base = op == UInt8(ascii: "u") ? bed.userSlice : bed.systemSlice
            var parent = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            require(parent >= 0, "open \(base)")
            opened.append(parent)
            var m = Made(base: base)
            for component in arg.split(separator: 0x2F) where component.count <= 4000 {
                let name = Array(component)
                guard mkdirat(parent, cname(name), 0o755) == 0 else { break }
                if m.dirs.isEmpty { expected[base, default: []].append(name) }
                m.dirs.append((parent, name))
                let next = openat(parent, cname(name), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                guard next >= 0 else { break }
                opened.append(next)
                parent = next
            }
            if !m.dirs.isEmpty { made.append(m) }
        case UInt8(ascii: "r"):
            if let m = made.popLast() { removeChain(m) }
        case UInt8(ascii: "d"):
            let parts = arg.split(separator: 1, maxSplits: 1, omittingEmptySubsequences: false)
            let name = appsEntry(parts[0])
            let content = parts.count > 1 ? Array(parts[1]) : []
            guard !name.isEmpty, !others.contains(name) else { continue }
            let dir = open(bed.apps, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            let f = openat(dir, cname(name), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
            if f >= 0 {
                content.withUnsafeBytes { b in _ = write(f, b.baseAddress, b.count) }
                close(f)
                files[name] = content
                expected[bed.apps, default: []].append(name)
            }
            close(dir)
        case UInt8(ascii: "l"), UInt8(ascii: "f"), UInt8(ascii: "D"):
            let name = appsEntry(arg)
            guard !name.isEmpty, files[name] == nil, !others.contains(name) else { continue }
            let dir = open(bed.apps, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            let ok = switch op {
            case UInt8(ascii: "l"): symlinkat("/dev/zero", dir, cname(name)) == 0
            case UInt8(ascii: "f"): mkfifoat(dir, cname(name), 0o644) == 0
            default: mkdirat(dir, cname(name), 0o755) == 0
            }
            close(dir)
            if ok { others.insert(name); expected[bed.apps, default: []].append(name) }
        case UInt8(ascii: "x"):
            let name = appsEntry(arg)
            let dir = open(bed.apps, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if unlinkat(dir, cname(name), 0) == 0 || unlinkat(dir, cname(name), AT_REMOVEDIR) == 0 {
                files[name] = nil
                others.remove(name)
            }
            close(dir)
        case UInt8(ascii: "!"):
            checkScan(bed.scanner.scan(), made: made)
        default:
            continue
        }
    }

    // The watches: every event read, whatever its name's length; every name made in a watched directory among them.
    var seen: [String: [[UInt8]]] = [:]
    while true {
        let events: [Inotify.Event]
        do { events = try bed.inotify.read(bytes: 4096) } catch {
            require(false, "reading inotify failed: \(error)")
            return 0
        }
        if events.isEmpty { break }
        for e in events {
            require(!e.overflowed, "the inotify queue overflowed")
            guard let path = bed.watched[e.watch] else { continue }
            let key = path == "applications" ? bed.apps : path == "(root)" ? bed.root : bed.root + "/" + path
            seen[key, default: []].append(e.name)
        }
    }
    for (dir, names) in expected {
        for n in names { require(seen[dir]?.contains(n) == true, "no event for \(show(n)) made in \(dir)") }
    }

    // A scan while everything is there, then the desktop files as the daemon reads them.
    let scan = bed.scanner.scan()
    checkScan(scan, made: made)
    checkDesktopFiles(files: files, others: others)

    // Everything removed: the fixed tree's unit alone, and no descriptor more than before the input.
    for m in made.reversed() { removeChain(m) }
    for fd in opened { close(fd) }
    let apps = open(bed.apps, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    removeEntries(apps)
    close(apps)
    while (try? bed.inotify.read(bytes: 1 << 16))?.isEmpty == false {}
    let after = bed.scanner.scan()
    require(after.cgroups.units.map(\.unit) == ["app-org.example.Fixed-1.scope"], "left after removal: \(after.cgroups.units)")
    bed.scanner.release(keeping: [])
    let now = openDescriptors()
    require(now == bed.descriptors, "descriptors left open: \(Set(now).subtracting(bed.descriptors).sorted())")
    for line in bed.logged {
        require(line.last == "\n" && !line.dropLast().contains("\n"), "a log line that is not one line: \(line.debugDescription.prefix(300))")
        requireOneShortLine(String(line.dropLast()), max: 1000, "a log line")
    }
    return 0
}

/// What a scan found agrees with what was made: every unit a descriptor of its own directory, once; every unit made
/// directly in the user's app.slice or in system.slice (named in text, not hidden, a service or scope) found, as a
/// user's or the system's; what DesktopAppID makes of each name a valid ID or nothing.
func checkScan(_ scan: UnitCgroupScanner.Scan, made: [Made]) {
    var ids: Set<UInt64> = []
    for u in scan.cgroups.units {
        require(ids.insert(u.id).inserted, "unit \(u.path) found twice")
        require(UnitCgroups.isUnit(u.unit), "\(u.unit) is no unit")
        require(UnitCgroups.userLevels.contains(u.level) || UnitCgroups.levels.contains(u.level), "level \(u.level): \(u.path)")
        if let fd = u.handle {
            var st = stat()
            require(fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR && UInt64(st.st_ino) == u.id,
                    "the descriptor of \(u.path.prefix(200)) is not its directory")
        }
        if let id = DesktopAppID.from(unit: u.unit, slice: u.slice) {
            require(DesktopAppID.isValid(id) && id.utf8.count <= 255, "app id \(id.debugDescription.prefix(300)) of \(u.unit.prefix(300))")
        }
    }
    let units = Dictionary(scan.cgroups.units.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
    let userPath = "user.slice/user-\(bed.uid).slice/user@\(bed.uid).service/app.slice"
    for m in made {
        // Hidden names are passed over, as in every directory the daemon lists (Directory.entries).
        guard let first = m.dirs.first, first.name.first != 0x2E,
              let name = String(validating: first.name, as: UTF8.self) else { continue }
        var st = stat()
        guard fstatat(first.parent, first.name.map { CChar(bitPattern: $0) } + [0], &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
        let user = m.base == bed.userSlice
        let followed = user ? UnitCgroups.isUnit(name) : UnitCgroups.isMatchedUnit(name)
        let u = units[UInt64(st.st_ino)]
        require(followed == (u != nil), "\(name.prefix(200)) made in \(user ? "the user's" : "the system's") slice: found \(u != nil)")
        if let u {
            require(u.user == user && u.unit == name && u.path == (user ? userPath : "system.slice") + "/" + name,
                    "\(name.prefix(200)) found as \(u.path.prefix(300)), user \(u.user)")
        }
        if let id = DesktopAppID.from(unit: name) {
            require(DesktopAppID.isValid(id), "app id \(id.debugDescription.prefix(300)) of \(name.prefix(300))")
        }
        require(DesktopAppID.from(unit: name, slice: "session.slice") == nil, "an app in session.slice")
    }
}

/// The desktop files as the daemon reads a user's: exactly the regular files named `ID.desktop` (ID valid) whose
/// bytes parse, each as DesktopEntry.parse reads those bytes; never a symlink, FIFO or directory; every entry's
/// name and icon bounded and safe to show.
func checkDesktopFiles(files: [[UInt8]: [UInt8]], others: Set<[UInt8]>) {
    let reader = DesktopFiles(xdgDataDirs: "/nonexistent-npt-fuzz")
    let read = reader.read(users: [(uid: bed.uid, home: bed.home)])
    require(read.watched.contains(bed.apps), "the applications directory is not watched: \(read.watched)")
    let own = read.catalog.users[bed.uid] ?? [:]
    var want: [String: DesktopEntry] = [:]
    for (raw, content) in files {
        guard let name = String(validating: raw, as: UTF8.self), name.hasSuffix(".desktop") else { continue }
        guard let id = DesktopAppID.fileID(relativePath: [name]), let e = DesktopEntry.parse(content) else { continue }
        // As the reader completes a user's entry: TryExec's and Exec's programs looked up, the files they run.
        want[id] = reader.completed(e, owner: bed.uid)
    }
    require(own == want, "read \(own.keys.sorted()), made \(want.keys.sorted())")
    for raw in others {
        if let name = String(validating: raw, as: UTF8.self), name.hasSuffix(".desktop") {
            require(own[String(name.dropLast(8))] == nil, "\(name) is no regular file, yet read")
        }
    }
    for (_, e) in own {
        for text in [e.name, e.icon].compactMap({ $0 }) + Array(e.localizedNames.values) {
            requireOneShortLine(text, max: DesktopEntry.maxIconBytes, "a desktop entry's text")
        }
        require(e.localizedNames.count <= DesktopEntry.maxLocales, "\(e.localizedNames.count) locales")
    }
    for s in read.skipped { requireOneShortLine(s, max: 1000, "a skipped file's line") }
}
