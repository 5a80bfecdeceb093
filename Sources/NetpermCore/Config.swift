/// The daemon's configuration and per-app policy: the main file plus drop-ins, merged in order.
public struct Config: Equatable, Sendable {
    public var interfaces: [InterfaceOverride] = []
    public var defaults = PermissionSet.builtIn
    /// Members of this group (and root) may name any app.
    public var adminGroup = "netperm"
    /// How long a prompt waits for an agent's answer.
    public var promptTimeoutSec = 60
    /// In the order first defined: the first matching `[App]` wins.
    public private(set) var apps: [AppPolicy] = []
    private var appIndex: [String: Int] = [:]
    /// Literal executable paths, for matching without scanning every app.
    private var exactExecutables: [String: Int] = [:]
    private var globExecutableApps: [Int] = []

    public init() {}

    public static func == (a: Config, b: Config) -> Bool {
        a.interfaces == b.interfaces && a.defaults == b.defaults && a.adminGroup == b.adminGroup
            && a.apps == b.apps && a.promptTimeoutSec == b.promptTimeoutSec
    }

    public func app(named id: String) -> AppPolicy? { appIndex[id].map { apps[$0] } }

    /// Parses files in the order given (main file first, then drop-ins in lexical order). Later keys override
    /// earlier ones; a section repeated in a later file merges into the earlier one, as systemd drop-ins do.
    public static func parse(files: [(path: String, text: String)], accounts: AccountResolver = NoAccounts()) throws(ConfigError) -> Config {
        var config = Config()
        for file in files {
            var appsInThisFile: [String: Int] = [:]
            for section in try Ini.parse(file.text, path: file.path) {
                try config.apply(section, accounts: accounts, seenInFile: &appsInThisFile)
            }
        }
        for app in config.apps where !app.hasIdentity {
            throw ConfigError(path: app.path, line: app.line,
                              message: "[App \(app.id)] has no way to match it: set Executable=, Unit= or User=")
        }
        config.buildIndex()
        return config
    }

    private mutating func buildIndex() {
        exactExecutables = [:]
        globExecutableApps = []
        for (i, app) in apps.enumerated() {
            var hasGlob = false
            for g in app.executables {
                if g.isLiteral {
                    if exactExecutables[g.pattern] == nil { exactExecutables[g.pattern] = i }
                } else {
                    hasGlob = true
                }
            }
            if hasGlob { globExecutableApps.append(i) }
        }
    }

    /// Executable, then Unit, then User; within each, the first `[App]` (in definition order) that matches.
    public func match(_ peer: PeerIdentity) -> AppMatch {
        if let exe = peer.executable {
            var best = exactExecutables[exe]
            for i in globExecutableApps {
                if let b = best, b < i { break }
                if apps[i].executables.contains(where: { $0.matches(exe) }) { best = i; break }
            }
            if let i = best { return AppMatch(id: apps[i].id, matchedBy: .executable, app: apps[i]) }
        }
        if let unit = peer.unit, let app = apps.first(where: { $0.units.contains { $0.matches(unit) } }) {
            return AppMatch(id: app.id, matchedBy: .unit, app: app)
        }
        if let app = apps.first(where: { $0.uids.contains(peer.uid) }) {
            return AppMatch(id: app.id, matchedBy: .user, app: app)
        }
        // Never an id the policy uses: that app's verdict, events and decisions are not this program's.
        let base = Config.derivedID(peer)
        var id = base, n = 2
        while appIndex[id] != nil { id = "\(base)-\(n)"; n += 1 }
        return AppMatch(id: id, matchedBy: .defaults, app: nil)
    }

    /// An id for an app no section names: the executable's file name, made a valid id.
    public static func derivedID(_ peer: PeerIdentity) -> String {
        guard let exe = peer.executable, let base = exe.split(separator: "/").last else { return "uid-\(peer.uid)" }
        var id = String(base.unicodeScalars.map { c -> Character in
            AppPolicy.isLetter(c) || ("0"..."9").contains(c) || c == "." || c == "-" || c == "_" ? Character(c) : "_"
        })
        if let f = id.unicodeScalars.first, !AppPolicy.isLetter(f) { id = "app-" + id }
        return id
    }

    public func permissions(for app: AppPolicy?) -> PermissionSet {
        app?.permissions.resolved(over: defaults) ?? defaults
    }

    /// uid 0, the daemon's own uid (`daemonUID`: a process running as the daemon's user could act as the daemon
    /// anyway; under DynamicUser= it is the unit's own ExecReload=), or a member of `AdminGroup=`, whose gid
    /// `adminGID` gives (nil: no such group). The group is asked for only then: resolving a name may load NSS
    /// modules that a daemon only root talks to never needs.
    public func isPrivileged(_ peer: PeerIdentity, daemonUID: UInt32 = 0, adminGID: () -> UInt32?) -> Bool {
        peer.uid == 0 || peer.uid == daemonUID || (adminGID().map { peer.gids.contains($0) } ?? false)
    }

    // MARK: - Sections

    private mutating func apply(_ s: IniSection, accounts: AccountResolver,
                                seenInFile: inout [String: Int]) throws(ConfigError) {
        func fail(_ line: Int, _ message: String) -> ConfigError {
            ConfigError(path: s.path, line: line, message: message)
        }
        func permission(_ e: IniEntry) throws(ConfigError) -> Permission {
            guard let p = Permission(rawValue: e.value.lowercased()) else {
                throw fail(e.line, "bad value '\(e.value)' for \(e.key)= (expected allow, deny or ask)")
            }
            return p
        }
        func kindKey(_ key: String) -> LinkKind? { PermissionSet.keys.first { $0.key == key }?.kind }

        switch s.name {
        case "Interface":
            try applyInterface(s, fail: fail)
        case "Defaults":
            if let arg = s.argument { throw fail(s.line, "[Defaults] takes no name, got '\(arg)'") }
            for e in s.entries {
                if let k = kindKey(e.key) {
                    defaults[k] = try permission(e)
                } else if e.key == "PromptTimeoutSec" {
                    guard let n = Int(e.value), n > 0, n <= 86400 else {
                        throw fail(e.line, "bad value '\(e.value)' for PromptTimeoutSec= (expected seconds, 1 to 86400)")
                    }
                    promptTimeoutSec = n
                } else if e.key == "AdminGroup" {
                    guard !e.value.isEmpty else { throw fail(e.line, "AdminGroup= needs a group name") }
                    adminGroup = e.value
                } else {
                    throw fail(e.line, "unknown key '\(e.key)' in [Defaults] (expected WiFi=, WWAN=, Ethernet=, "
                        + "Other=, AdminGroup= or PromptTimeoutSec=)")
                }
            }
        case "App":
            guard let id = s.argument, !id.isEmpty else { throw fail(s.line, "[App] needs a name, e.g. [App firefox]") }
            guard AppPolicy.isValidID(id) else {
                throw fail(s.line, "invalid app name '\(id)': it must start with a letter, then letters, digits, "
                    + "'.', '-' or '_'")
            }
            if let first = seenInFile[id] {
                throw fail(s.line, "duplicate app [App \(id)] (already defined at line \(first) of this file)")
            }
            seenInFile[id] = s.line
            var app = app(named: id) ?? AppPolicy(id: id, path: s.path, line: s.line)
            // Identity lists set in a later file replace the earlier ones; within a section they accumulate.
            var replaced: Set<String> = []
            for e in s.entries {
                if let k = kindKey(e.key) {
                    app.permissions.values[k] = try permission(e)
                    continue
                }
                let words = e.value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
                if !replaced.contains(e.key) {
                    replaced.insert(e.key)
                    switch e.key {
                    case "Executable": app.executables = []
                    case "Unit": app.units = []
                    case "User": app.uids = []
                    default: break
                    }
                }
                switch e.key {
                case "Executable":
                    if words.isEmpty { app.executables = [] }
                    for w in words {
                        guard w.hasPrefix("/") else {
                            throw fail(e.line, "Executable= must be an absolute path or glob, got '\(w)'")
                        }
                        do { app.executables.append(try Glob(w)) } catch { throw fail(e.line, error.message) }
                    }
                case "Unit":
                    if words.isEmpty { app.units = [] }
                    for w in words {
                        do { app.units.append(try Glob(w)) } catch { throw fail(e.line, error.message) }
                    }
                case "User":
                    if words.isEmpty { app.uids = [] }
                    for w in words {
                        if let uid = UInt32(w) {
                            app.uids.append(uid)
                        } else if let uid = accounts.uid(forUser: w) {
                            app.uids.append(uid)
                        } else {
                            throw fail(e.line, "unknown user '\(w)' in User=")
                        }
                    }
                default:
                    throw fail(e.line, "unknown key '\(e.key)' in [App \(id)] (expected Executable=, Unit=, User=, "
                        + "WiFi=, WWAN=, Ethernet= or Other=)")
                }
            }
            if let i = appIndex[id] {
                apps[i] = app
            } else {
                appIndex[id] = apps.count
                apps.append(app)
            }
        default:
            throw fail(s.line, "unknown section [\(s.name)] (expected [Defaults], [App NAME] or [Interface GLOB])")
        }
    }

    private mutating func applyInterface(_ s: IniSection, fail: (Int, String) -> ConfigError) throws(ConfigError) {
        guard let arg = s.argument, !arg.isEmpty else {
            throw fail(s.line, "[Interface] needs a name or glob, e.g. [Interface wwan*]")
        }
        let glob: Glob
        do { glob = try Glob(arg) } catch { throw fail(s.line, error.message) }
        var o = InterfaceOverride(glob: glob, kind: nil, metered: nil)
        for e in s.entries {
            switch e.key {
            case "Kind":
                guard let k = LinkKind(rawValue: e.value.lowercased()) else {
                    throw fail(e.line, "bad value '\(e.value)' for Kind= (expected one of: "
                        + LinkKind.allCases.map(\.rawValue).joined(separator: ", ") + ")")
                }
                o.kind = k
            case "Metered":
                guard let m = Ini.parseBool(e.value) else {
                    throw fail(e.line, "bad value '\(e.value)' for Metered= (expected yes or no)")
                }
                o.metered = m
            default:
                throw fail(e.line, "unknown key '\(e.key)' in [Interface] (expected Kind= or Metered=)")
            }
        }
        if o.kind == nil && o.metered == nil {
            throw fail(s.line, "[Interface \(arg)] sets neither Kind= nor Metered=")
        }
        interfaces.append(o)
    }
}

/// For parsing without a system: names do not resolve.
public struct NoAccounts: AccountResolver {
    public init() {}
    public func uid(forUser name: String) -> UInt32? { nil }
    public func gid(forGroup name: String) -> UInt32? { nil }
}
