// SPDX-License-Identifier: LGPL-2.1-or-later
// The config / policy parser: Ini, then Config with drop-ins merged. The input is up to four files separated by
// NUL bytes: the main file, then drop-ins in the order the daemon reads them. The same bytes go through SafeText,
// which every message quoting them uses.
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol

let paths = ["/etc/netpermd/netpermd.conf"] + (1...3).map { "/etc/netpermd/netpermd.conf.d/\($0)0-local.conf" }
let limit = 5

func lineCount(_ text: String) -> Int { text.utf8.reduce(1) { $0 + ($1 == 0x0A ? 1 : 0) } }

func check(_ r: ConfigParseResult, files: [(path: String, text: String)]) {
    require((r.config == nil) == (r.errorCount > 0), "config \(r.config == nil ? "nil" : "set") with \(r.errorCount) errors")
    require((r.failure == nil) == (r.config != nil), "failure \(r.failure ?? "nil") with config \(r.config == nil ? "nil" : "set")")
    require(r.errors.count <= limit && r.warnings.count <= limit, "\(r.errors.count) errors, \(r.warnings.count) warnings kept")
    require(r.errors.count == min(limit, r.errorCount) && r.warnings.count == min(limit, r.warningCount),
            "kept \(r.errors.count)/\(r.errorCount) errors, \(r.warnings.count)/\(r.warningCount) warnings")
    var last = (-1, -1)
    for p in r.problems {
        guard let file = files.firstIndex(where: { $0.path == p.path }) else { return require(false, "a problem in no file: \(p)") }
        require(p.line >= 1 && p.line <= lineCount(files[file].text), "line \(p.line) of \(p.path): \(p)")
        require((file, p.line) >= last, "problems out of file order: \(r.problems)")
        last = (file, p.line)
        // Issue 14.3: a problem quotes a short excerpt, escaped, never the whole line.
        requireOneShortLine(p.description, max: 300, "a problem")
    }
    if let f = r.failure { requireOneShortLine(f, max: 340, "the failure line") }
}

/// What a valid policy answers: every peer gets an app, from the policy or a derived id the policy does not use.
func checkMatching(_ config: Config, exe: String) {
    let peers = [
        PeerIdentity(pid: 1, uid: 0, gids: [0], executable: exe, unit: nil),
        PeerIdentity(pid: 2, uid: 1000, gids: [1000, 990], executable: "/usr/bin/firefox", unit: "app-x.scope"),
        PeerIdentity(pid: 3, uid: 1001, gids: [], executable: nil, unit: "apt-daily.service"),
        PeerIdentity(pid: 4, uid: 1001, gids: [], executable: "/" + exe, unit: exe),
        PeerIdentity(pid: 5, uid: 1000, gids: [], executable: nil, unit: exe, userUnit: true),
        PeerIdentity(pid: 6, uid: 1000, gids: [], executable: nil, unit: "app-gnome-org.example.Maps-1.scope", userUnit: true,
                     slice: "app.slice"),
    ]
    for peer in peers {
        let m = config.match(peer)
        switch m.matchedBy {
        case .defaults:
            require(m.app == nil && config.app(named: m.id) == nil, "a derived id the policy uses: \(m.id)")
            require(AppPolicy.isValidID(m.id), "a derived id that is not a valid id: \(m.id.debugDescription)")
        case .executable, .unit, .user:
            require(m.app != nil && config.app(named: m.id) == m.app, "matched \(m.id), which the policy does not hold")
            // A user's own unit never matches Unit=, a system unit never UserUnit=.
            if m.matchedBy == .unit, let unit = peer.unit, let app = m.app {
                require((peer.userUnit ? app.userUnits : app.units).contains { $0.matches(unit) },
                        "\(m.id) matched unit \(unit) (user: \(peer.userUnit)) by the wrong key")
            }
        case .desktop:
            // The unit's application ID names it: an [App] of the policy, or the desktop app by itself.
            let id = peer.unit.flatMap { DesktopAppID.from(unit: $0, slice: peer.slice) }
            require(peer.userUnit && id != nil && m.app?.desktopIDs.contains(id!) == true,
                    "\(m.id) matched as a desktop app from \(peer.unit ?? "no unit")")
            require(config.app(named: m.id) == m.app || (m.app?.discovered == true && m.id == id && config.desktopApps),
                    "desktop app \(m.id) is neither the policy's nor discovered")
        case .name:
            require(false, "matched by name without a name")
        }
    }
    for app in config.apps {
        require(AppPolicy.isValidID(app.id), "an app with an invalid id: \(app.id.debugDescription)")
        require(app.hasIdentity, "an app with no identity in a valid policy: \(app.id)")
        for g in app.executables + app.units + app.userUnits where g.isLiteral {
            require(g.matches(g.pattern), "literal glob \(g.pattern.debugDescription) does not match itself")
        }
    }
}

/// SafeText's promises: nothing unsafe comes out, escaping twice changes nothing, bytes that are valid UTF-8
/// escape as their string does, and an excerpt is a bounded prefix of the escaped text.
func checkSafeText(_ b: [UInt8]) {
    let s = String(decoding: b, as: UTF8.self)
    let e = SafeText.escape(s)
    require(!e.unicodeScalars.contains(where: SafeText.isUnsafe), "escape left an unsafe scalar: \(e.debugDescription.prefix(300))")
    require(SafeText.escape(e) == e, "escaping twice changed \(e.debugDescription.prefix(300))")
    let kept = SafeText.escape(s, keepingNewlines: true)
    require(kept.split(separator: "\n", omittingEmptySubsequences: false).map { SafeText.escape($0) }
            .joined(separator: "\\n") == e, "keepingNewlines differs on more than newlines")
    let u = SafeText.escape(utf8: b)
    require(!u.unicodeScalars.contains(where: SafeText.isUnsafe), "escape(utf8:) left an unsafe scalar: \(u.debugDescription.prefix(300))")
    require(SafeText.escape(utf8: Array(u.utf8)) == u, "escape(utf8:) twice changed \(u.debugDescription.prefix(300))")
    if String(validating: b, as: UTF8.self) != nil {
        require(u == e, "valid UTF-8 escapes differently as bytes: \(u.debugDescription.prefix(200)) vs \(e.debugDescription.prefix(200))")
    }
    for maxBytes in [0, 1, 7, 60, 240] {
        let x = SafeText.excerpt(s, maxBytes: maxBytes)
        // By scalar: a cut may fall inside a grapheme (a letter and its combining mark).
        let cut = x.utf8.last == UInt8(ascii: ".") && x.utf8.count - 3 <= maxBytes
            && e.utf8.starts(with: x.utf8.dropLast(3)) && x.utf8.suffix(3).elementsEqual("...".utf8)
        require(x.utf8.elementsEqual(e.utf8) && e.utf8.count <= maxBytes || cut, "excerpt \(maxBytes) of \(e.debugDescription.prefix(200)): \(x.debugDescription)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    checkSafeText(input)
    let pieces = split(input, on: 0)
    let files = zip(paths, pieces).map { (path: $0, text: String(decoding: $1, as: UTF8.self)) }
    let r = Config.parse(files: files, accounts: Accounts(), limit: limit)
    check(r, files: files)

    // Deterministic, and the limit changes only how many problems are kept.
    let again = Config.parse(files: files, accounts: Accounts(), limit: 1000)
    require(again.config == r.config && again.errorCount == r.errorCount && again.warningCount == r.warningCount,
            "a second parse with a higher limit differs")
    require(Array(again.problems.prefix(r.problems.count)).count == r.problems.count, "fewer problems with a higher limit")

    // Ini alone: the throwing form fails exactly when the collecting form finds an error, with the first one.
    for f in files {
        var problems = ConfigProblems(limit: 1)
        let sections = Ini.parse(f.text, path: f.path, into: &problems)
        do {
            let thrown = try Ini.parse(f.text, path: f.path)
            require(problems.errorCount == 0 && thrown == sections, "Ini.parse accepted what had \(problems.errorCount) errors")
        } catch {
            require(problems.kept.first == error, "Ini.parse threw \(error), not the first problem")
        }
        for s in sections {
            require(!s.name.isEmpty && s.line >= 1, "a section with no name or line: \(s)")
            for e in s.entries {
                require(!e.key.isEmpty && e.line > s.line, "an entry with no key or before its section: \(e)")
                require(e.key == e.key.trimmingSpace && e.value == e.value.trimmingSpace, "untrimmed entry: \(e)")
            }
        }
    }

    // Drop-ins: an empty one changes nothing; the same files read twice give the same apps and defaults (a
    // section repeated in a later file merges into the first), with each [Interface] override twice.
    if files.count < paths.count {
        let withEmpty = Config.parse(files: files + [(path: paths[files.count], text: "")], accounts: Accounts(), limit: limit)
        require(withEmpty.config == r.config && withEmpty.errorCount == r.errorCount, "an empty drop-in changed the policy")
    }
    if files.count <= 2 {
        let twice = files + zip(paths.dropFirst(files.count), files).map { (path: $0, text: $1.text) }
        let t = Config.parse(files: twice, accounts: Accounts(), limit: limit)
        require((t.config == nil) == (r.config == nil), "the same files twice: valid \(t.config != nil), once: \(r.config != nil)")
        if let a = r.config, let b = t.config {
            require(a.apps.map(\.id) == b.apps.map(\.id), "apps \(a.apps.map(\.id)) became \(b.apps.map(\.id))")
            for (x, y) in zip(a.apps, b.apps) {
                require(x.permissions == y.permissions && x.executables == y.executables && x.units == y.units
                        && x.userUnits == y.userUnits && x.uids == y.uids, "app \(x.id) read twice differs")
            }
            require(a.defaults == b.defaults && a.adminGroup == b.adminGroup && a.promptTimeoutSec == b.promptTimeoutSec,
                    "defaults read twice differ")
            require(b.interfaces == a.interfaces + a.interfaces, "interfaces read twice: \(b.interfaces.count) vs \(a.interfaces.count)")
        }
    }

    if let config = r.config {
        checkMatching(config, exe: files.first.map { String($0.text.prefix(200)) } ?? "")
    }
    return 0
}

extension String {
    /// Without the blanks Ini trims (space, tab, CR), by scalar as Ini does by byte.
    var trimmingSpace: String {
        var s = Substring(self).unicodeScalars
        let blank: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        while let f = s.first, blank(f) { s = s.dropFirst() }
        while let l = s.last, blank(l) { s = s.dropLast() }
        return String(s)
    }
}
