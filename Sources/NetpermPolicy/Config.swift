// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// The daemon's configuration and per-app policy: the main file plus drop-ins, merged in order.
public struct Config: Equatable, Sendable {
    public var interfaces: [InterfaceOverride] = []
    /// `[Network SSID]` sections, in file order: later ones win, as for `[Interface]`.
    public var networks: [NetworkOverride] = []
    public var defaults = PermissionSet.builtIn
    /// Members of this group (and root) may name any app.
    public var adminGroup = "netperm"
    /// `adminGroup`'s gid, looked up when the policy was read (nil: no such group): never while a request is
    /// answered, so that what a request gets depends only on the engine's inputs.
    public internal(set) var adminGID: UInt32?
    /// How long a prompt waits for an agent's answer.
    public var promptTimeoutSec = 60
    /// `[Defaults] UserDecisions=`: whether an unprivileged user may answer the prompts of their own processes
    /// and decide for their own uid (docs/SECURITY.md, "Users deciding for their own apps").
    public var userDecisions = true
    /// `[Enforcement] Mode=`: whether the kernel is made to follow the verdicts (docs/ENFORCEMENT.md).
    public var enforcement = EnforcementMode.off
    /// `[Usage]`: whether traffic is counted per app, and the periods (docs/USAGE.md).
    public var usage = UsageSettings()
    /// `[Report]`: whether the privacy report is kept, and for how many days (docs/PRIVACY.md).
    public var report = ReportSettings()
    /// `[Defaults] DesktopApps=`: whether a desktop app (DesktopAppID: a unit of a user's manager named for its
    /// application ID) is an app by itself, with `[Defaults]`' permissions, when no `[App]` names it; and whether an
    /// `[App]` whose name is an application ID is that desktop app (docs/APPS.md, "Desktop apps").
    public var desktopApps: Bool {
        get { resolver.desktopApps }
        set { resolver.desktopApps = newValue }
    }
    /// `[Defaults] MeteredBudget=`: bytes an app no `[App]` gives its own may move over metered links per period.
    public var meteredBudget: UInt64?
    /// In the order first defined: the first matching `[App]` wins.
    public private(set) var apps: [AppPolicy] = []
    /// Where each app is in `apps`, by id. Public for the engine: a method called on the `Config` a class holds
    /// (`engine.state.config.app(named:)`) is called on a copy of the whole policy, every array and string of it
    /// retained and released, even inlined; read field by field, only this dictionary and the one app are.
    public private(set) var appIndex: [String: Int] = [:]
    /// Which app a process is, in the one order the rules follow too (AppResolver).
    public private(set) var resolver = AppResolver()
    /// The desktop entries installed, as each uid sees them: what makes a unit named for an ID that is not
    /// reverse-DNS (`app-gnome-firefox\x2desr-4242.scope`) an app (DesktopAppID). Not the policy's: the engine sets
    /// it from the desktop files it read (`policyOnly` drops it).
    public var installedDesktopApps: InstalledDesktopApps {
        get { resolver.installed }
        set { resolver.installed = newValue }
    }

    public init() {}

    public static func == (a: Config, b: Config) -> Bool {
        a.interfaces == b.interfaces && a.networks == b.networks && a.defaults == b.defaults && a.adminGroup == b.adminGroup
            && a.adminGID == b.adminGID && a.apps == b.apps && a.promptTimeoutSec == b.promptTimeoutSec && a.enforcement == b.enforcement
            && a.usage == b.usage && a.meteredBudget == b.meteredBudget
            && a.userDecisions == b.userDecisions && a.desktopApps == b.desktopApps
            && a.installedDesktopApps == b.installedDesktopApps
    }

    public func app(named id: String) -> AppPolicy? { appIndex[id].map { apps[$0] } }

    /// Parses files in the order given (main file first, then drop-ins in lexical order). Later keys override
    /// earlier ones; a section repeated in a later file merges into the earlier one, as systemd drop-ins do.
    /// Every file is read to the end whatever it finds, so one run reports every problem; at most `limit`
    /// errors and `limit` warnings are kept (the rest are counted), so even a huge broken file is cheap.
    public static func parse(files: [(path: String, text: String)], accounts: AccountResolver = NoAccounts(),
                             limit: Int = 100) -> ConfigParseResult {
        var parser = Parser(accounts: accounts, limit: limit)
        for file in files {
            parser.appsInThisFile = [:]
            for section in Ini.parse(file.text, path: file.path, into: &parser.problems) {
                parser.apply(section)
            }
        }
        // Only now, when every drop-in has had its say (DesktopApps= included).
        for (i, app) in parser.config.apps.enumerated() {
            if parser.config.desktopApps, DesktopAppID.isValid(app.id), !app.desktopIDs.contains(app.id) {
                parser.config.apps[i].desktopIDs.insert(app.id, at: 0)
            } else if !app.hasIdentity && !parser.badIdentity.contains(app.id) {
                parser.problems.error(app.path, app.line, in: IniSection.label("App", app.id),
                                      "no Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it"
                                        + (DesktopAppID.isValid(app.id) ? " (DesktopApps=no)" : ""))
            }
        }
        // A budget nothing counts against would never run out: said where it is set.
        if !parser.config.usage.count, let (path, line, label) = parser.firstBudget {
            parser.problems.error(path, line, in: label, "MeteredBudget= needs [Usage] Count=yes: nothing counts "
                + "what apps use without it")
        }
        // The report's rules live in the counting table, which tags connections in every mode (PRIVACY.md).
        if !parser.config.usage.count, parser.config.report.enabled, let (path, line, label) = parser.reportEnabledAt {
            parser.problems.error(path, line, in: label, "Enabled=yes needs [Usage] Count=yes: the report is learnt "
                + "through the counting table")
        }
        parser.problems.sort(files: files.map(\.path))
        var config: Config?
        if parser.problems.errorCount == 0 {
            parser.config.buildIndex()
            parser.config.adminGID = accounts.gid(forGroup: parser.config.adminGroup)
            config = parser.config
        }
        return ConfigParseResult(config: config, problems: parser.problems.kept,
                                 errorCount: parser.problems.errorCount, warningCount: parser.problems.warningCount)
    }

    private mutating func buildIndex() {
        resolver = AppResolver(apps: apps, installed: installedDesktopApps, desktopApps: desktopApps)
    }

    /// The app `peer` is, in the order AppResolver writes once (the rules' too).
    public func match(_ peer: PeerIdentity) -> AppMatch { resolve(peer).match }

    /// The app `peer` is, and the identity it was recognised by: in its enclosing unit when that unit is an app's.
    public func resolve(_ peer: PeerIdentity) -> (identity: PeerIdentity, match: AppMatch) {
        let r = resolver.resolve(peer)
        return (r.identity, appMatch(r))
    }

    /// The answer's app for a resolution: the policy's, a desktop app by itself, or `[Defaults]` under an id made
    /// from the executable's name.
    public func appMatch(_ r: AppResolver.Resolution) -> AppMatch {
        if let i = r.app { return AppMatch(id: apps[i].id, matchedBy: r.matchedBy, app: apps[i]) }
        if let id = r.desktopID { return AppMatch(id: id, matchedBy: .desktop, app: AppPolicy(discovered: id)) }
        // Never an id the policy uses: that app's verdict, events and decisions are not this program's.
        let base = Config.derivedID(r.identity)
        var id = base, n = 2
        while appIndex[id] != nil { id = "\(base)-\(n)"; n += 1 }
        return AppMatch(id: id, matchedBy: .defaults, app: nil)
    }

    /// The desktop app `peer`'s own unit is (DesktopAppID), if any `[App]` names it by `DesktopId=`, or desktop apps
    /// are apps.
    public func desktopAppID(_ peer: PeerIdentity) -> String? {
        guard case let .desktop(id)? = resolver.unitMatch(peer)?.kind else { return nil }
        return id
    }

    /// Whether `id` names a desktop app as `uid` (nil: everyone) sees it: a reverse-DNS ID, or one installed.
    public func isDesktopID(_ id: String, uid: UInt32?) -> Bool {
        DesktopAppID.isValid(id) || installedDesktopApps.contains(id, uid: uid)
    }

    /// The app a desktop application ID is: an `[App]` naming it, nil when none does.
    public func app(desktopID id: String) -> AppPolicy? { resolver.app(desktopID: id).map { apps[$0] } }

    /// This policy with an app of its own for each desktop app in `ids` no `[App]` names (in the order of their ids,
    /// after the policy's): what the engine judges, lists and enforces. Nothing with `DesktopApps=no`.
    public func addingDesktopApps(_ ids: some Sequence<String>) -> Config {
        guard desktopApps else { return self }
        let new = Set(ids).filter { resolver.app(desktopID: $0) == nil && appIndex[$0] == nil }.sorted()
        guard !new.isEmpty else { return self }
        var c = self
        for id in new { c.put(AppPolicy(discovered: id)) }
        c.buildIndex()
        return c
    }

    /// The policy without the apps `addingDesktopApps` added.
    public var policyOnly: Config {
        var c = self
        c.installedDesktopApps = InstalledDesktopApps()
        guard apps.contains(where: \.discovered) else { return c }
        c.apps.removeAll(where: \.discovered)
        c.appIndex = Dictionary(uniqueKeysWithValues: c.apps.enumerated().map { ($1.id, $0) })
        c.buildIndex()
        return c
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

    /// The app's `MeteredBudget=` per period, or `[Defaults]`'s where it sets none; nil: no budget.
    public func meteredBudget(for app: AppPolicy?) -> UInt64? {
        guard let app else { return meteredBudget }
        return app.meteredBudget(over: meteredBudget)
    }

    /// uid 0, the daemon's own uid (`daemonUID`: a process running as the daemon's user could act as the daemon
    /// anyway; under DynamicUser= it is the unit's own ExecReload=), or a member of `AdminGroup=`, whose gid
    /// `adminGID` gives (nil: no such group). The group is asked for only then: resolving a name may load NSS
    /// modules that a daemon only root talks to never needs.
    /// Over the system bus the group counts for nothing: polkit's answer for the call does (`PeerIdentity.via`).
    public func isPrivileged(_ peer: PeerIdentity, daemonUID: UInt32 = 0, adminGID: () -> UInt32?) -> Bool {
        if peer.uid == 0 || peer.uid == daemonUID { return true }
        switch peer.via {
        case .socket: return adminGID().map { peer.gids.contains($0) } ?? false
        case let .bus(authorized): return authorized
        case .busSignals: return false
        }
    }

    private mutating func put(_ app: AppPolicy) {
        if let i = appIndex[app.id] {
            apps[i] = app
        } else {
            appIndex[app.id] = apps.count
            apps.append(app)
        }
    }

    // MARK: - Sections

    /// One parse: the config so far and every problem found so far.
    private struct Parser {
        var config = Config()
        var problems: ConfigProblems
        let accounts: AccountResolver
        /// [App] sections of the file being read, by id: the same app twice in one file is a mistake.
        var appsInThisFile: [String: Int] = [:]
        /// Apps with a wrong Executable=, Unit=, UserUnit= or User= word: "nothing matches it" would only repeat that.
        var badIdentity: Set<String> = []
        /// Where a budget was first set, for the error when nothing counts.
        var firstBudget: (String, Int, String)?
        /// Where `[Report] Enabled=yes` was last set.
        var reportEnabledAt: (String, Int, String)?

        init(accounts: AccountResolver, limit: Int) {
            self.accounts = accounts
            problems = ConfigProblems(limit: limit)
        }

        /// Every message names its section, `[Interface usb*]: ...`, as one file often has many alike.
        mutating func fail(_ s: IniSection, _ line: Int, _ message: @autoclosure () -> String) {
            problems.error(s.path, line, in: s.label, message())
        }

        /// Unknown keys are ignored with a warning, as systemd does: a file written for a newer version still
        /// loads. Likely typos get a hint.
        mutating func unknownKey(_ s: IniSection, _ e: IniEntry, _ kind: SectionKind) {
            problems.warning(s.path, e.line, in: s.label, "unknown key \(ConfigError.quote(e.key)) ("
                + Hint.unknownKey(e.key, in: kind) + "); ignored")
        }

        mutating func permission(_ s: IniSection, _ e: IniEntry) -> Permission? {
            guard let p = Permission(rawValue: e.value.lowercased()) else {
                fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for \(e.key)= (expected allow, deny or ask)")
                return nil
            }
            return p
        }

        static func dimension(forKey key: String) -> PolicyDimension? {
            PermissionSet.dimensions.first { $0.key == key }?.dimension
        }

        mutating func apply(_ s: IniSection) {
            switch SectionKind(name: s.name) {
            case .defaults?: applyDefaults(s)
            case .app?: applyApp(s)
            case .interface?: applyInterface(s)
            case .enforcement?: applyEnforcement(s)
            case .usage?: applyUsage(s)
            case .report?: applyReport(s)
            case .network?: applyNetwork(s)
            case nil:
                // Its entries go unread: they would only repeat the warning.
                problems.warning(s.path, s.line, in: s.label, "unknown section (" + Hint.unknownSection(s) + "); ignored")
            }
        }

        mutating func applyDefaults(_ s: IniSection) {
            if s.argument != nil { fail(s, s.line, "[Defaults] takes no name") }
            for e in s.entries {
                if let k = Parser.dimension(forKey: e.key) {
                    if let p = permission(s, e) { config.defaults[k] = p }
                } else if e.key == "PromptTimeoutSec" {
                    if let n = Int(e.value), n > 0, n <= 86400 {
                        config.promptTimeoutSec = n
                    } else {
                        fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for PromptTimeoutSec= "
                            + "(expected seconds, 1 to 86400)")
                    }
                } else if e.key == "AdminGroup" {
                    if e.value.isEmpty { fail(s, e.line, "AdminGroup= needs a group name") } else { config.adminGroup = e.value }
                } else if e.key == "MeteredBudget" {
                    if let b = budget(s, e) {
                        switch b {
                        case .unlimited: config.meteredBudget = nil
                        case let .bytes(n): config.meteredBudget = n; noteBudget(s, e)
                        }
                    }
                } else if e.key == "DesktopApps" {
                    if let b = Ini.parseBool(e.value) {
                        config.desktopApps = b
                    } else {
                        fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for DesktopApps= (expected yes or no)")
                    }
                } else if e.key == "UserDecisions" {
                    if let b = Ini.parseBool(e.value) {
                        config.userDecisions = b
                    } else {
                        fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for UserDecisions= (expected yes or no)")
                    }
                } else {
                    unknownKey(s, e, .defaults)
                }
            }
        }

        mutating func applyApp(_ s: IniSection) {
            let id = appID(s)
            // A section without a usable name is still read, so that one run reports all its mistakes; it is
            // then dropped.
            var app = id.flatMap { config.app(named: $0) } ?? AppPolicy(id: id ?? "", path: s.path, line: s.line)
            // Identity lists set in a later file replace the earlier ones; within a section they accumulate.
            var replaced: Set<String> = []
            for e in s.entries {
                if let k = Parser.dimension(forKey: e.key) {
                    if let p = permission(s, e) { app.permissions.values[k] = p }
                    continue
                }
                if e.key == "MeteredBudget" {
                    // Empty: back to [Defaults]' budget.
                    if e.value.isEmpty {
                        app.meteredBudget = nil
                    } else if let b = budget(s, e) {
                        app.meteredBudget = b
                        if case .bytes = b { noteBudget(s, e) }
                    }
                    continue
                }
                guard ["DesktopId", "Executable", "Unit", "UserUnit", "User"].contains(e.key) else {
                    unknownKey(s, e, .app)
                    continue
                }
                let first = replaced.insert(e.key).inserted
                applyIdentity(s, e, to: &app, id: id, replacing: first)
            }
            if id != nil { config.put(app) }
        }

        /// The section's app name, checked: nil when it has none, or none usable.
        mutating func appID(_ s: IniSection) -> String? {
            guard let arg = s.argument else {
                fail(s, s.line, "needs a name, e.g. [App firefox]")
                return nil
            }
            guard AppPolicy.isValidID(arg) else {
                fail(s, s.line, "invalid app name: it must start with a letter, then letters, digits, '.', '-' or '_'")
                return nil
            }
            if let first = appsInThisFile[arg] {
                fail(s, s.line, "duplicate app (already defined at line \(first) of this file)")
            } else {
                appsInThisFile[arg] = s.line
            }
            return arg
        }

        /// A word of an identity list that is no good: said, and the app `id` marked as having a bad identity.
        mutating func badWord(_ s: IniSection, _ line: Int, app id: String?, _ message: String) {
            fail(s, line, message)
            if let id { badIdentity.insert(id) }
        }

        /// One of the app's identity lists (DesktopId=, Executable=, Unit=, UserUnit=, User=) into `app`; `replacing`:
        /// its first in this section, which replaces what an earlier file said (as does an empty one).
        mutating func applyIdentity(_ s: IniSection, _ e: IniEntry, to app: inout AppPolicy, id: String?,
                                    replacing: Bool) {
            let words = e.value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            let reset = replacing || words.isEmpty
            switch e.key {
            case "DesktopId":
                if replacing || e.value.isEmpty { app.desktopIDs = [] }
                for w in words {
                    // As a .desktop file's name is given, or as GApplication names itself.
                    let desktopID = w.hasSuffix(".desktop") ? String(w.dropLast(8)) : w
                    guard DesktopAppID.isFileID(desktopID) else {
                        badWord(s, e.line, app: id, "DesktopId= takes desktop-file IDs such as org.gnome.Maps or "
                            + "firefox-esr (a letter, then letters, digits, '.', '-' and '_'), got \(ConfigError.quote(w))")
                        continue
                    }
                    if !app.desktopIDs.contains(desktopID) { app.desktopIDs.append(desktopID) }
                }
            case "Executable":
                if reset { app.executables = [] }
                for w in words {
                    guard w.hasPrefix("/") else {
                        badWord(s, e.line, app: id, "Executable= must be an absolute path or glob, got \(ConfigError.quote(w))")
                        continue
                    }
                    do { app.executables.append(try Glob(w)) } catch { badWord(s, e.line, app: id, error.message) }
                }
            case "Unit":
                if reset { app.units = [] }
                for w in words {
                    do { app.units.append(try Glob(w)) } catch { badWord(s, e.line, app: id, error.message) }
                }
            case "UserUnit":
                if reset { app.userUnits = [] }
                for w in words {
                    do { app.userUnits.append(try Glob(w)) } catch { badWord(s, e.line, app: id, error.message) }
                }
            default: // User
                if reset { app.uids = [] }
                for w in words {
                    if let uid = UInt32(w) ?? accounts.uid(forUser: w) {
                        app.uids.append(uid)
                    } else {
                        badWord(s, e.line, app: id, "unknown user \(ConfigError.quote(w)) in User=")
                    }
                }
            }
        }

        mutating func applyEnforcement(_ s: IniSection) {
            if s.argument != nil { fail(s, s.line, "[Enforcement] takes no name") }
            for e in s.entries {
                guard e.key == "Mode" else { unknownKey(s, e, .enforcement); continue }
                switch e.value.lowercased() {
                case "off": config.enforcement = .off
                case "block": config.enforcement = .block
                case "steer": config.enforcement = .steer
                default: fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for Mode= (expected off, block or steer)")
                }
            }
        }

        /// `MeteredBudget=200M`: a size (bytes, or K, M, G, T: powers of 1024), or `infinity` for none.
        mutating func budget(_ s: IniSection, _ e: IniEntry) -> MeteredBudget? {
            if e.value.lowercased() == "infinity" { return .unlimited }
            guard let n = ByteSize.parse(e.value), n > 0 else {
                fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for MeteredBudget= (expected a size such as "
                    + "200M, 1.5G or 500000, or infinity)")
                return nil
            }
            return .bytes(n)
        }

        mutating func noteBudget(_ s: IniSection, _ e: IniEntry) {
            if firstBudget == nil { firstBudget = (s.path, e.line, s.label) }
        }

        mutating func applyUsage(_ s: IniSection) {
            if s.argument != nil { fail(s, s.line, "[Usage] takes no name") }
            for e in s.entries {
                switch e.key {
                case "Count":
                    if let b = Ini.parseBool(e.value) {
                        config.usage.count = b
                    } else {
                        fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for Count= (expected yes or no)")
                    }
                case "PeriodStart":
                    if let d = Int(e.value), (1...31).contains(d) {
                        config.usage.periodStart = d
                    } else {
                        fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for PeriodStart= (expected a day of the month, 1 to 31)")
                    }
                case "SaveIntervalSec":
                    if let n = Int(e.value), n > 0, n <= 86400 {
                        config.usage.saveIntervalSec = n
                    } else {
                        fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for SaveIntervalSec= (expected seconds, 1 to 86400)")
                    }
                case "MetricsApps":
                    if let n = Int(e.value), n >= 0, n <= 1_000_000 {
                        config.usage.metricsApps = n
                    } else {
                        fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for MetricsApps= (expected a number of apps, 0 to 1000000)")
                    }
                default:
                    unknownKey(s, e, .usage)
                }
            }
        }

        mutating func applyReport(_ s: IniSection) {
            if s.argument != nil { fail(s, s.line, "[Report] takes no name") }
            for e in s.entries {
                switch e.key {
                case "Enabled":
                    if let b = Ini.parseBool(e.value) {
                        config.report.enabled = b
                        reportEnabledAt = b ? (s.path, e.line, s.label) : nil
                    } else {
                        fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for Enabled= (expected yes or no)")
                    }
                case "Days":
                    if let n = Int(e.value), ReportSettings.dayRange.contains(n) {
                        config.report.days = n
                    } else {
                        fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for Days= (expected days, 1 to 31)")
                    }
                default:
                    unknownKey(s, e, .report)
                }
            }
        }

        mutating func applyInterface(_ s: IniSection) {
            guard let o = overrideSection(s, example: "[Interface wwan*]", kind: .interface) else { return }
            config.interfaces.append(InterfaceOverride(glob: o.glob, kind: o.kind, metered: o.metered, roaming: o.roaming))
        }

        /// `[Network SSID]`: the same keys as `[Interface]`, for a Wi-Fi network by its SSID (exact or glob).
        mutating func applyNetwork(_ s: IniSection) {
            guard let o = overrideSection(s, example: "[Network CoffeeShop]", kind: .network) else { return }
            config.networks.append(NetworkOverride(glob: o.glob, kind: o.kind, metered: o.metered, roaming: o.roaming))
        }

        /// The glob and the Kind=, Metered= and Roaming= of an `[Interface]` or `[Network]` section; nil when it has
        /// an error.
        mutating func overrideSection(_ s: IniSection, example: String, kind sectionKind: SectionKind)
            -> (glob: Glob, kind: LinkKind?, metered: Bool?, roaming: Bool?)? {
            var glob: Glob?
            if let arg = s.argument {
                do { glob = try Glob(arg) } catch { fail(s, s.line, error.message) }
            } else {
                fail(s, s.line, "needs a name or glob, e.g. \(example)")
            }
            var kind: LinkKind?, metered: Bool?, roaming: Bool?
            // A bad value is its own error; "sets none" is for a section with no Kind=, Metered= or Roaming= at all.
            var setsOne = false
            for e in s.entries {
                switch e.key {
                case "Kind":
                    setsOne = true
                    if let k = LinkKind(rawValue: e.value.lowercased()) {
                        kind = k
                    } else {
                        fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for Kind= (expected one of: "
                            + LinkKind.allCases.map(\.rawValue).joined(separator: ", ") + ")")
                    }
                case "Metered", "Roaming":
                    setsOne = true
                    if let flag = Ini.parseBool(e.value) {
                        if e.key == "Metered" { metered = flag } else { roaming = flag }
                    } else {
                        fail(s, e.line, "bad value \(ConfigError.quote(e.value)) for \(e.key)= (expected yes or no)")
                    }
                default:
                    unknownKey(s, e, sectionKind)
                }
            }
            guard let glob else { return nil }
            guard setsOne else {
                fail(s, s.line, "sets none of Kind=, Metered=, Roaming=")
                return nil
            }
            return (glob, kind, metered, roaming)
        }
    }
}

/// What parsing a policy found: the config if it is valid, and every problem, in file order.
public struct ConfigParseResult: Sendable {
    /// nil when there is any error: a policy is used whole or not at all.
    public let config: Config?
    /// Errors and warnings together, in file order (the files as given, then by line). At most `limit` of each
    /// (see `Config.parse`); `errorCount` and `warningCount` count them all.
    public let problems: [ConfigError]
    public let errorCount: Int
    public let warningCount: Int

    public var errors: [ConfigError] { problems.filter { $0.severity == .error } }
    public var warnings: [ConfigError] { problems.filter { $0.severity == .warning } }

    /// The first error, then " (and N more errors)": one short line for STATUS, the `policy` event and the
    /// RELOAD reply. nil when there is no error.
    public var failure: String? {
        guard let first = errors.first else { return nil }
        let more = errorCount - 1
        return more == 0 ? first.description : "\(first) (and \(more) more error\(more == 1 ? "" : "s"))"
    }

    /// The config, or the first error.
    public func get() throws(ConfigError) -> Config {
        if let config { return config }
        throw errors.first ?? ConfigError(path: "", line: 0, message: "invalid policy")
    }
}

extension ConfigParseResult {
    /// A policy whose files could not even be read: that one error.
    public init(unreadable: ConfigError) {
        self.init(config: nil, problems: [unreadable], errorCount: 1, warningCount: 0)
    }
}

/// The sections a policy may have, with their keys: what tells a typo from a key of another section.
enum SectionKind: CaseIterable {
    case defaults, app, interface, network, enforcement, usage, report

    init?(name: String) {
        guard let k = SectionKind.allCases.first(where: { $0.name == name }) else { return nil }
        self = k
    }

    var name: String {
        switch self {
        case .defaults: return "Defaults"
        case .app: return "App"
        case .interface: return "Interface"
        case .network: return "Network"
        case .enforcement: return "Enforcement"
        case .usage: return "Usage"
        case .report: return "Report"
        }
    }

    /// As messages show it.
    var header: String {
        switch self {
        case .defaults: return "[Defaults]"
        case .app: return "[App NAME]"
        case .interface: return "[Interface GLOB]"
        case .network: return "[Network SSID]"
        case .enforcement: return "[Enforcement]"
        case .usage: return "[Usage]"
        case .report: return "[Report]"
        }
    }

    var keys: [String] {
        let kinds = PermissionSet.dimensions.map(\.key)
        switch self {
        case .defaults: return kinds + ["AdminGroup", "PromptTimeoutSec", "UserDecisions", "MeteredBudget", "DesktopApps"]
        case .app: return ["Executable", "Unit", "UserUnit", "User", "DesktopId"] + kinds + ["MeteredBudget"]
        case .interface, .network: return ["Kind", "Metered", "Roaming"]
        case .enforcement: return ["Mode"]
        case .usage: return ["Count", "PeriodStart", "SaveIntervalSec", "MetricsApps"]
        case .report: return ["Enabled", "Days"]
        }
    }
}

/// What to say about an unknown key or section: the likely mistake when there is one, else what is expected.
enum Hint {
    static func unknownKey(_ key: String, in section: SectionKind) -> String {
        let keys = section.keys
        if let k = keys.first(where: { sameIgnoringCase($0, key) }) {
            return "did you mean \(k)=? keys are case-sensitive"
        }
        let elsewhere = SectionKind.allCases.filter { $0 != section && $0.keys.contains(key) }
        if !elsewhere.isEmpty { return "\(key)= belongs in " + list(elsewhere.map(\.header)) }
        if let k = closest(to: key, in: keys) { return "did you mean \(k)=?" }
        return "expected " + list(keys.map { $0 + "=" })
    }

    static func unknownSection(_ s: IniSection) -> String {
        let names = SectionKind.allCases.map(\.name)
        if let n = names.first(where: { sameIgnoringCase($0, s.name) }) {
            return "did you mean \(IniSection.label(n, s.argument))? section names are case-sensitive"
        }
        if let n = closest(to: s.name, in: names) { return "did you mean \(IniSection.label(n, s.argument))?" }
        return "expected " + list(SectionKind.allCases.map(\.header))
    }

    /// Names are ASCII: comparing lengths first keeps a huge key from being lowercased.
    static func sameIgnoringCase(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.lowercased() == b.lowercased()
    }

    /// "a, b or c".
    static func list(_ items: [String]) -> String {
        guard items.count > 1 else { return items.first ?? "" }
        return items.dropLast().joined(separator: ", ") + " or " + items[items.count - 1]
    }

    /// The first candidate within a few typos of `word` (ignoring case): one for short names, more for long.
    static func closest(to word: String, in candidates: [String]) -> String? {
        var best: (name: String, distance: Int)?
        for c in candidates {
            let allowed = max(1, c.utf8.count / 4)
            // The length difference alone rules most out, and keeps a 1 MB key from costing anything.
            guard abs(c.utf8.count - word.utf8.count) <= allowed else { continue }
            let d = distance(Array(word.lowercased().utf8), Array(c.lowercased().utf8))
            if d <= allowed && d < (best?.distance ?? Int.max) { best = (c, d) }
        }
        return best?.name
    }

    /// Levenshtein distance.
    static func distance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}

/// For parsing without a system: names do not resolve.
public struct NoAccounts: AccountResolver {
    public init() {}
    public func uid(forUser name: String) -> UInt32? { nil }
    public func gid(forGroup name: String) -> UInt32? { nil }
}
