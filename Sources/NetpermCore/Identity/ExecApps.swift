// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy

/// A file as the kernel knows it: its device and inode. Two paths, a copy or a symlink's name never make two files
/// one, and a copy is never the file it copies.
public struct FileKey: Hashable, Sendable, Comparable {
    public var device: UInt64
    public var inode: UInt64
    public init(device: UInt64, inode: UInt64) { self.device = device; self.inode = inode }
    public static func < (a: FileKey, b: FileKey) -> Bool { (a.device, a.inode) < (b.device, b.inode) }
}

/// Where a process of a person's session runs that has no app unit of its own (docs/APPS.md, "Apps known by what
/// they run"), from its cgroup path: the only places a process is looked at by what it runs.
public enum SessionPlace: Equatable, Sendable {
    /// `user@UID.service/session.slice/dbus.service`: Debian 12's dbus-daemon forks `DBusActivatable=true` apps
    /// there (a service file without `SystemdService=`).
    case dbusActivation
    /// Another unit of the user's `session.slice` (a desktop that makes no units of its own for what it starts).
    case sessionUnit(String)
    /// A login session's scope, `user-UID.slice/session-N.scope` (Phosh 0.24, sway started from a console).
    case loginSession(String)
    /// A terminal's per-command scope, `vte-spawn-X.scope` (GNOME Terminal, Console: inside
    /// `app-org.gnome.Terminal.slice`): what it runs is the terminal's unless it is an installed app.
    case terminal(String)

    /// The uid and place of a process from its /proc/PID/cgroup text; nil anywhere else (system services, the
    /// user's `background.slice`, app units, `init.scope` of the manager): those keep what they are.
    public static func of(cgroup text: some StringProtocol) -> (uid: UInt32, place: SessionPlace)? {
        var path: Substring?
        for line in text.split(separator: "\n") {
            let f = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard f.count == 3 else { continue }
            if f[0] == "0" && f[1].isEmpty { path = Substring(f[2]); break }
            if f[1] == "name=systemd" { path = Substring(f[2]) }
        }
        guard let path else { return nil }
        let parts = path.split(separator: "/")
        guard let last = parts.last, UnitCgroups.isUnit(last) else { return nil }
        let unit = String(last)
        if let m = parts.firstIndex(where: { UnitCgroups.isUserManager($0) }) {
            guard let uid = UInt32(parts[m].dropFirst(5).dropLast(8)) else { return nil }
            let below = parts[(m + 1)...]
            if below.count == 2, below.first == "session.slice" {
                return (uid, unit == "dbus.service" ? .dbusActivation : .sessionUnit(unit))
            }
            // A terminal's command scope in an app's slice (`app.slice/app-ID.slice/vte-spawn-X.scope`) or in app.slice.
            if below.first == "app.slice", below.count <= 3, DesktopAppID.isTerminalScope(unit),
               below.count == 2 || UnitCgroups.isSlice(below[below.startIndex + 1]) {
                return (uid, .terminal(unit))
            }
            return nil
        }
        // A login session: `user.slice/user-UID.slice/session-N.scope`.
        guard parts.count == 3, parts[0] == "user.slice", parts[1].hasPrefix("user-"), parts[1].hasSuffix(".slice"),
              let uid = UInt32(parts[1].dropFirst(5).dropLast(6)), unit.hasPrefix("session-"), unit.hasSuffix(".scope")
        else { return nil }
        return (uid, .loginSession(unit))
    }
}

/// The installed apps as the programs they run (docs/APPS.md, "Apps known by what they run"): each entry's `Exec=`
/// program (and `TryExec=`'s), or for an interpreted app its interpreter and script, by device and inode. Made by
/// the engine from the desktop files whenever they change, and handed to the edge that hears of execs
/// (`Effect.watchExecs`), whose first question for every exec of the system is `mayRun` (one lookup), so that a
/// compile's thousands of execs a second cost a `stat` each and nothing more. Pure.
public struct ExecIndex: Equatable, Sendable {
    /// An entry that runs a file: its ID, and whose it is (nil: everyone's).
    public struct Owner: Equatable, Sendable, Comparable {
        public var id: String
        public var uid: UInt32?
        public init(id: String, uid: UInt32?) { self.id = id; self.uid = uid }
        public static func < (a: Owner, b: Owner) -> Bool { (a.uid ?? 0, a.id) < (b.uid ?? 0, b.id) }
    }

    /// The programs entries run, each with the entries that run it, sorted.
    public private(set) var programs: [FileKey: [Owner]] = [:]
    /// Interpreters some entry's script runs in, and those scripts.
    public private(set) var interpreters: Set<FileKey> = []
    public private(set) var scripts: [FileKey: [Owner]] = [:]
    /// The IDs a user's own files name (installed or deleted): everyone's entry of such an ID is not theirs.
    private var own: [UInt32: Set<String>] = [:]
    /// Reverse-DNS IDs of entries menus show, which an app owns as its bus name, by name.
    private var names: [String: [Owner]] = [:]

    public init() {}

    /// Everyone's and each user's entries that menus show (a desktop's own pieces ship `NoDisplay=true` entries:
    /// `org.gnome.Shell.desktop`, `xdg-desktop-portal-gnome.desktop`; a desktop's process is never an app by what it
    /// runs) and that are installed; a program no file named could not be compared and is left out.
    public init(catalog: DesktopCatalog) {
        func add(_ e: DesktopEntry, _ owner: Owner) {
            guard e.isListed else { return }
            if DesktopAppID.isValid(owner.id) { names[owner.id, default: []].append(owner) }
            if let p = e.programFile { programs[p, default: []].append(owner) }
            if let i = e.interpreterFile, let s = e.scriptFile {
                interpreters.insert(i)
                scripts[s, default: []].append(owner)
            }
        }
        for (id, e) in catalog.system { add(e, Owner(id: id, uid: nil)) }
        for (uid, entries) in catalog.users {
            own[uid] = Set(entries.keys)
            for (id, e) in entries { add(e, Owner(id: id, uid: uid)) }
        }
        programs = programs.mapValues { $0.sorted() }
        scripts = scripts.mapValues { $0.sorted() }
        names = names.mapValues { $0.sorted() }
    }

    public var isEmpty: Bool { programs.isEmpty && scripts.isEmpty }

    /// Whether a process running `exe` may be an app: its program, or an interpreter of an app's script.
    public func mayRun(_ exe: FileKey) -> Bool { programs[exe] != nil || interpreters.contains(exe) }

    /// Whether `exe` is an interpreter, so the script it runs decides (read from /proc/PID/cmdline).
    public func interprets(_ exe: FileKey) -> Bool { interpreters.contains(exe) }

    /// The app a process of `uid` is by what it runs: its user's own entry first, then everyone's entry of an ID
    /// the user's own files do not name; the first by ID when several run the same file.
    /// The app whose ID is the well-known bus name `name` for `uid` (GApplication and D-Bus activation own the app's
    /// ID as its name): an entry menus show, installed for that uid.
    public func app(uid: UInt32, busName name: String) -> String? {
        names[name].flatMap { pick($0, uid: uid) }
    }

    public func app(uid: UInt32, exe: FileKey, script: FileKey?) -> String? {
        if let owners = programs[exe], let id = pick(owners, uid: uid) { return id }
        if interpreters.contains(exe), let script, let owners = scripts[script] { return pick(owners, uid: uid) }
        return nil
    }

    private func pick(_ owners: [Owner], uid: UInt32) -> String? {
        if let o = owners.first(where: { $0.uid == uid }) { return o.id }
        let mine = own[uid] ?? []
        return owners.first { $0.uid == nil && !mine.contains($0.id) }?.id
    }

    /// The script of an interpreter's command line (/proc/PID/cmdline's arguments): the first argument after the
    /// interpreter that is no option (`gjs -m /usr/bin/gnome-maps` is `/usr/bin/gnome-maps`; `python3 -E x.py`
    /// `x.py`); nil when there is none. What it names is compared by device and inode, never by name.
    public static func scriptArgument(_ argv: [String]) -> String? {
        argv.dropFirst().prefix(4).first { !$0.hasPrefix("-") && !$0.isEmpty }
    }
}

/// What the edge that hears of execs counted since the daemon started (Input.execsCounted, for METRICS): every exec
/// the kernel told of, those whose program is some app's (looked at further), and the times the kernel dropped
/// events. Most execs are no app's and never reach the engine otherwise.
public struct ExecCounts: Equatable, Sendable {
    public var execs = 0
    public var candidates = 0
    public var overruns = 0
    public init(execs: Int = 0, candidates: Int = 0, overruns: Int = 0) {
        self.execs = execs; self.candidates = candidates; self.overruns = overruns
    }
}

/// A process found by what it runs, to be given a scope of its own (Effect.makeScope).
public struct ExecFound: Equatable, Sendable {
    public var pid: Int32
    public var uid: UInt32
    public var app: String
    public var place: SessionPlace
    /// /proc/PID/exe, for the log and for `[App]`s that name it by `Executable=`.
    public var executable: String?
    public init(pid: Int32, uid: UInt32, app: String, place: SessionPlace, executable: String?) {
        self.pid = pid; self.uid = uid; self.app = app; self.place = place; self.executable = executable
    }
}

/// A scope of a user's manager to make for a process (StartTransientUnit with `PIDs=[pid]`), named as a launcher
/// names the apps it starts: `app-netpermd-ID-PID.scope` in `app.slice`.
/// A process `uid`'s own session bus says owns app `app`'s well-known name (`OWNS NAME PID`): to be checked at the
/// edge (the process is that uid's, in a session place) before it is taken as that app.
public struct ProcessClaim: Equatable, Sendable {
    public var pid: Int32
    public var uid: UInt32
    public var app: String
    public init(pid: Int32, uid: UInt32, app: String) { self.pid = pid; self.uid = uid; self.app = app }
}

public struct ScopeRequest: Equatable, Sendable {
    public var uid: UInt32
    public var pid: Int32
    public var app: String
    public var unit: String
    public init(uid: UInt32, pid: Int32, app: String) {
        self.uid = uid; self.pid = pid; self.app = app
        unit = DesktopAppID.unitName(launcher: "netpermd", id: app, random: String(pid))
    }
}
