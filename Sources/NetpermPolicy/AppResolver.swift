// SPDX-License-Identifier: LGPL-2.1-or-later
/// Which app a process is: the one order of matching, written here once, that the daemon's answers
/// (`Config.resolve`) and the kernel's rules (the owner of each unit cgroup and uid, Ruleset) both read, so that
/// they cannot disagree (docs/APPS.md, "Who is who"):
///
/// 1. the unit the process is known by is a `netpermctl run --app NAME` scope (RunScope): app NAME;
/// 2. `Executable=` (the kernel cannot see it: such an answer says `executable-only` unless the rules hold the
///    process to the same app by its unit or uid, `heldApp`);
/// 3. that unit is named by `Unit=` (a system unit) or `UserUnit=` (a unit of a user's own manager);
/// 4. that unit is a desktop app's (DesktopAppID): the `[App]` with that `DesktopId=`, or the desktop app by itself;
/// 5. `User=`;
/// 6. `[Defaults]`.
/// Within each, the first `[App]` in definition order. "The unit the process is known by" is the unit whose cgroup
/// encloses its own (a terminal's tab scope inside the terminal's, a browser's sandbox scopes) when that one is an
/// app's, for any of 1, 3 and 4, because the rules match the enclosing cgroup; otherwise its own unit. The rules
/// follow the same order without 2: a unit's app (1, 3, 4: `unitMatch`), else the uid's (5: `uidOwner`). A unit of
/// a user's own manager only narrows what its uid may do (docs/ENFORCEMENT.md), which no order can express: the
/// kernel refuses what either that unit's app or the uid's `User=` app refuses (`narrowingApp`). Pure.
public struct AppResolver: Equatable, Sendable {
    /// Each app's index in the policy's order, by id.
    public private(set) var appIndex: [String: Int] = [:]
    private var exactExecutables: [String: Int] = [:]
    private var globExecutableApps: [Int] = []
    private var exactUnits: [String: Int] = [:], exactUserUnits: [String: Int] = [:]
    private var globUnitApps: [Int] = [], globUserUnitApps: [Int] = []
    /// Apps by desktop application ID: the first app naming it.
    private var desktopIndex: [String: Int] = [:]
    private var uidIndex: [UInt32: Int] = [:]
    private var apps: [AppPolicy] = []
    /// What makes a unit named for an ID that is not reverse-DNS an app (DesktopAppID), for its user.
    public var installed = InstalledDesktopApps()
    /// `[Defaults] DesktopApps=`: a desktop app no `[App]` names is an app by itself (with `[Defaults]`').
    public var desktopApps = true

    public init() {}

    public init(apps: [AppPolicy], installed: InstalledDesktopApps = InstalledDesktopApps(), desktopApps: Bool = true) {
        self.installed = installed
        self.desktopApps = desktopApps
        self.apps = apps
        for (i, app) in apps.enumerated() {
            if appIndex[app.id] == nil { appIndex[app.id] = i }
            for d in app.desktopIDs where desktopIndex[d] == nil { desktopIndex[d] = i }
            for uid in app.uids where uidIndex[uid] == nil { uidIndex[uid] = i }
            if Self.index(app.executables, i, into: &exactExecutables) { globExecutableApps.append(i) }
            if Self.index(app.units, i, into: &exactUnits) { globUnitApps.append(i) }
            if Self.index(app.userUnits, i, into: &exactUserUnits) { globUserUnitApps.append(i) }
        }
    }

    /// Literal globs by their text (the first app's); whether any is a pattern.
    private static func index(_ globs: [Glob], _ i: Int, into exact: inout [String: Int]) -> Bool {
        var glob = false
        for g in globs {
            if g.isLiteral { if exact[g.pattern] == nil { exact[g.pattern] = i } } else { glob = true }
        }
        return glob
    }

    /// The first app whose globs (`keyPath`) match `name`: the literal index, then the apps with patterns before it.
    private func first(_ name: String, exact: [String: Int], globbed: [Int], _ globs: (AppPolicy) -> [Glob]) -> Int? {
        var best = exact[name]
        for i in globbed {
            if let b = best, b < i { break }
            if globs(apps[i]).contains(where: { $0.matches(name) }) { best = i; break }
        }
        return best
    }

    /// How a unit is an app's.
    public struct UnitMatch: Equatable, Sendable {
        public enum Kind: Equatable, Sendable {
            /// A `netpermctl run --app` scope (RunScope).
            case runScope
            /// `Unit=` or `UserUnit=`.
            case unit
            /// A desktop app by its application ID (DesktopAppID).
            case desktop(String)
        }
        public var kind: Kind
        /// The app's index; nil for a desktop app no `[App]` names (an app by itself with `DesktopApps=yes`).
        public var app: Int?

        public var matchedBy: MatchedBy {
            switch kind {
            case .runScope, .unit: return .unit
            case .desktop: return .desktop
            }
        }
    }

    /// The app unit `unit` (in `slice`; `user`: of user `uid`'s own manager) is, in the order above (1, 3, 4).
    /// `followed`: the rules can follow its cgroup; a desktop app is one only then (its ID names nothing else).
    public func unitMatch(unit: String, slice: String?, user: Bool, uid: UInt32?, followed: Bool = true) -> UnitMatch? {
        // A desktop app found by what it runs gets a scope of the same form, `app-netpermd-ID-PID.scope`; `run --app`
        // takes only the policy's apps, so a scope of an app the policy does not name is that desktop app's (4).
        if let i = RunScope.app(fromUnit: unit).flatMap({ appIndex[$0] }), !apps[i].discovered {
            return UnitMatch(kind: .runScope, app: i)
        }
        let named = user ? first(unit, exact: exactUserUnits, globbed: globUserUnitApps, \.userUnits)
                         : first(unit, exact: exactUnits, globbed: globUnitApps, \.units)
        if let i = named { return UnitMatch(kind: .unit, app: i) }
        guard user, followed, let uid,
              let id = DesktopAppID.from(unit: unit, slice: slice, uid: uid, installed: installed) else { return nil }
        if let i = desktopIndex[id] { return UnitMatch(kind: .desktop(id), app: i) }
        return desktopApps ? UnitMatch(kind: .desktop(id), app: nil) : nil
    }

    /// `peer`'s own unit as `unitMatch` reads it.
    public func unitMatch(_ peer: PeerIdentity) -> UnitMatch? {
        guard let unit = peer.unit else { return nil }
        return unitMatch(unit: unit, slice: peer.slice, user: peer.userUnit, uid: peer.uid, followed: peer.unitFollowed)
    }

    /// The first app naming desktop application ID `id` (`DesktopId=`, or its own name).
    public func app(desktopID id: String) -> Int? { desktopIndex[id] }

    /// The first app naming `uid` by `User=`.
    public func uidOwner(_ uid: UInt32) -> Int? { uidIndex[uid] }

    /// The first app whose `Executable=` matches `path`.
    public func executableOwner(_ path: String) -> Int? {
        first(path, exact: exactExecutables, globbed: globExecutableApps, \.executables)
    }

    /// What `resolve` found.
    public struct Resolution: Equatable, Sendable {
        /// The process as it was recognised: in its enclosing unit, when that unit's app it is.
        public var identity: PeerIdentity
        public var matchedBy: MatchedBy
        /// The app's index; nil for `[Defaults]`, and for a desktop app no `[App]` names (`desktopID`).
        public var app: Int?
        public var desktopID: String?
        /// The app the rules hold the process to (its followed unit's app, else its uid's), nil when none: what the
        /// kernel does to its packets, whatever `app` is.
        public var heldApp: Int?
        /// Whether the rules hold it to the app it is: its `heldApp` is `app`. Never for `Executable=` alone.
        public var held: Bool { app != nil && heldApp == app }
        /// For a process in a unit of its user's own manager: its uid's `User=` app, which the kernel asks too (a
        /// user's unit only narrows), when that is another app than `app`.
        public var narrowingApp: Int?
    }

    /// The app `peer` is, in the order above.
    public func resolve(_ peer: PeerIdentity) -> Resolution {
        // The unit the process is known by: its enclosing unit when that is an app's, else its own.
        var known: (identity: PeerIdentity, match: UnitMatch)?
        if let e = peer.enclosed, let m = unitMatch(e) {
            known = (e, m)
        } else if let m = unitMatch(peer) {
            known = (peer, m)
        }
        // What the rules see: the followed unit (the enclosing one, or its own), else the uid.
        let followed = peer.enclosed ?? (peer.unitFollowed ? peer : nil)
        let heldByUnit = followed.flatMap { unitMatch($0)?.app }
        let heldApp = heldByUnit ?? uidOwner(peer.uid)
        let user = followed?.userUnit == true && heldByUnit != nil
        func result(_ p: PeerIdentity, _ by: MatchedBy, _ app: Int?, desktop: String? = nil) -> Resolution {
            let narrowing = user ? uidOwner(peer.uid).flatMap { $0 == app ? nil : $0 } : nil
            return Resolution(identity: p, matchedBy: by, app: app, desktopID: desktop, heldApp: heldApp,
                              narrowingApp: narrowing)
        }
        if let (p, m) = known, m.kind == .runScope { return result(p, .unit, m.app) }
        if let exe = peer.executable, let i = executableOwner(exe) { return result(peer, .executable, i) }
        if let (p, m) = known {
            switch m.kind {
            case .runScope, .unit: return result(p, .unit, m.app)
            case let .desktop(id): return result(p, .desktop, m.app, desktop: id)
            }
        }
        if let i = uidOwner(peer.uid) { return result(peer, .user, i) }
        return result(peer, .defaults, nil)
    }
}
