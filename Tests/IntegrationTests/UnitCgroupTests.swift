// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The cgroups under `Unit=` and `UserUnit=` globs as others make them (issue 22, points 6, 10 and 11): names that
/// are not UTF-8, made by root or by a user in their own delegated tree; cgroups that go while the rules are being
/// loaded; a slice removed and made again; units deeper than the rules follow. None of them may keep the rules of
/// other apps from loading. Each test makes its tree under a top-level slice of its own (`npt-cg-PID-N.slice`, so
/// that nothing of the host's slices is touched) and removes it at teardown.
final class UnitCgroupTests: IntegrationTestCase {
    private var bed: EnforcementBed!
    private var dir = ""
    private var socket: String { dir + "/netpermd.sock" }
    /// Directories made by the test (as raw path bytes), deepest last; removed deepest first.
    private var made: [[CChar]] = []
    private var root = ""
    private var slices = 0

    static let policy = """
        [Enforcement]
        Mode=block

        [Interface wwan*]
        Kind=wwan

        [App denied]
        User=4001
        WWAN=deny

        """

    override func setUpWithError() throws {
        try super.setUpWithError()
        try EnforcementBed.requireTools()
        bed = try EnforcementBed(self)
        dir = try makeTempDir()
        root = try EnforcementBed.cgroupRoot()
        try bed.addLink("wwan0", subnet: 71)
        showOnFailure("nft list ruleset") { (try? self.bed.nft("list", "ruleset").stdout) ?? "(nft failed)" }
        addTeardownBlock { [unowned self] in EnforcementBed.removeCgroups(self.made) }
    }

    /// `parent/name`, where `name` may hold any bytes.
    private static func path(_ parent: String, _ name: [UInt8]) -> [CChar] {
        Array(parent.utf8CString.dropLast()) + [CChar(bitPattern: 0x2F)] + name.map { CChar(bitPattern: $0) } + [0]
    }

    @discardableResult
    private func mkdirs(_ parent: String, _ name: String) throws -> String {
        try mkdirs(parent, Array(name.utf8))
        return parent + "/" + name
    }

    private func mkdirs(_ parent: String, _ name: [UInt8]) throws {
        let p = Self.path(parent, name)
        guard mkdir(p, 0o755) == 0 else {
            throw HarnessError("mkdir \(parent)/\(String(decoding: name, as: UTF8.self)): \(String(cString: strerror(errno)))")
        }
        made.append(p)
    }

    /// A top-level slice of the test's own.
    private func makeSlice() throws -> String {
        slices += 1
        return try mkdirs(root, "npt-cg-\(getpid())-\(slices).slice")
    }

    /// A path a shell can write to for a directory whose name is not text: through a descriptor this process holds.
    private func handle(_ parent: String, _ name: [UInt8]) throws -> String {
        let fd = open(Self.path(parent, name), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw HarnessError("open: \(String(cString: strerror(errno)))") }
        addTeardownBlock { close(fd) }
        return "/proc/\(getpid())/fd/\(fd)"
    }

    @discardableResult
    private func start(_ config: String, release: Bool = false) throws -> DaemonProcess {
        let path = try writeConfig(config, in: dir)
        let d = try startDaemon(in: bed.ns, socket: socket, config: path, nsenter: true, binary: release ? releaseNetpermd : nil)
        try waitForEnforcing(socket)
        try waitUntil("the peer of wwan0 accepts connections") {
            let p = try self.bed.probe(link: "wwan0")
            return (p.passed, "\(p)")
        }
        return d
    }


    private func query(_ app: String) throws -> [String: Any] { try request(socket, "QUERY \(app)") }

    private func waitForEnforced(_ app: String, timeout: Double = 5) throws {
        try waitUntil("\(app) is enforced", timeout: timeout) {
            let q = try self.query(app)
            return (q["enforced"] as? Bool == true, "\(q["enforced_why"] ?? "")")
        }
    }

    /// Lines the daemon logged at notice or above (what a journal keeps by default), and at err.
    private func loud(_ d: DaemonProcess) -> (lines: [Substring], errors: [Substring]) {
        let lines = d.log.split(separator: "\n").filter { $0.hasPrefix("<3>") || $0.hasPrefix("<4>") || $0.hasPrefix("<5>") }
        return (lines, lines.filter { $0.hasPrefix("<3>") })
    }

    /// Point 10: a cgroup whose name is not UTF-8 under a `Unit=` glob made every load fail (the name, decoded
    /// with a replacement character, was no path nft could find) for as long as it existed, and so can a user in
    /// their own delegated tree under a `UserUnit=` glob. Now nft is given the daemon's descriptor of each cgroup,
    /// never its name: every rule loads, those cgroups are enforced too, and a user's units past what one user
    /// manager may have followed are left out, said once.
    func testCgroupNamesThatAreNotTextStopNoRules() throws {
        let slice = try makeSlice()
        try mkdirs(slice, "npt-ok.service")
        let hostileName = Array("npt-".utf8) + [0xFF, 0xFE] + Array(".service".utf8)
        try mkdirs(slice, hostileName)
        // A user's delegated tree, as systemd hands it over (the manager's directory and its files are the user's).
        let uid = 4100
        let users = try mkdirs(slice, "user-\(uid).slice")
        let manager = try mkdirs(users, "user@\(uid).service")
        let apps = try mkdirs(manager, "app.slice")
        try Subprocess.check(["chown", "-R", "\(uid):\(uid)", manager])
        let asUser = ["setpriv", "--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups"]
        let userMade = try Subprocess.run(asUser + ["sh", "-c", #"mkdir "$0/app-ok.scope" "$0/app-$(printf '\377').scope""#, apps])
        XCTAssertEqual(userMade.status, 0, "a user may name cgroups in their own tree as they like: \(userMade.summary)")
        made.append(Self.path(apps, Array("app-ok.scope".utf8)))
        made.append(Self.path(apps, Array("app-".utf8) + [0xFF] + Array(".scope".utf8)))

        let d = try start(Self.policy + """
            [App hostile]
            Unit=npt-*.service
            WWAN=deny

            [App narrow]
            UserUnit=app-*.scope
            WWAN=deny

            """)
        assertBlocked(try bed.probe(uid: 4001, link: "wwan0"), "a User= app")
        assertBlocked(try bed.probe(cgroup: slice + "/npt-ok.service", link: "wwan0"), "a Unit= app's good cgroup")
        assertBlocked(try bed.probe(cgroup: try handle(slice, hostileName), link: "wwan0"), "the cgroup named with 0xFF 0xFE")
        assertBlocked(try bed.probe(uid: UInt32(uid), cgroup: apps + "/app-ok.scope", link: "wwan0"), "a user's unit")
        assertBlocked(try bed.probe(uid: UInt32(uid), cgroup: try handle(apps, Array("app-".utf8) + [0xFF] + Array(".scope".utf8)),
                                    link: "wwan0"), "the user's unit named with 0xFF")
        XCTAssertTrue(try bed.probe(uid: 4002, link: "wwan0").passed, "a uid no [App] names")

        // A User= app added while they exist is enforced at once (it used to send freely: every load failed).
        _ = try writeConfig(Self.policy + "[App late]\nUser=4006\nWWAN=deny\n\n[App hostile]\nUnit=npt-*.service\nWWAN=deny\n\n"
            + "[App narrow]\nUserUnit=app-*.scope\nWWAN=deny\n", in: dir)
        XCTAssertEqual(try request(socket, "RELOAD")["ok"] as? Bool, true)
        try waitForEnforcing(socket)
        assertBlocked(try bed.probe(uid: 4006, link: "wwan0"), "the app added by the reload")

        // More units than one user manager may have followed: the user's first ones in name order are, the rest
        // are left out and the log says so once, and everyone else's rules still load.
        let many = try Subprocess.run(asUser + ["sh", "-c",
            #"i=0; while [ $i -lt 1030 ]; do mkdir "$0/app-x$i.scope" || exit 1; i=$((i+1)); done"#, apps], timeout: 60)
        XCTAssertEqual(many.status, 0, many.summary)
        for i in 0..<1030 { made.append(Self.path(apps, Array("app-x\(i).scope".utf8))) }
        try waitUntil("the log says the user's units past the limit are left out") {
            (d.log.contains("user@\(uid).service has more than 1024 units"), "")
        }
        try waitForEnforcing(socket)
        assertBlocked(try bed.probe(uid: 4001, link: "wwan0"), "a User= app while the user has 1,032 units")
        assertBlocked(try bed.probe(uid: 4006, link: "wwan0"), "the late app, still")
        // STATUS counts what is in force: the last change may still be loading.
        try waitUntil("the followed units are in force") {
            let s = try self.request(self.socket, "STATUS")["enforcement"] as? [String: Any]
            return (s?["unit_cgroups"] as? Int == 2 + 1024, "\(s ?? [:])")
        }
        // Said once, though the rescans that follow the next changes see the same.
        try mkdirs(slice, "npt-more.service")
        try waitUntil("npt-more.service is in the rules") {
            let s = try self.request(self.socket, "STATUS")["enforcement"] as? [String: Any]
            return (s?["unit_cgroups"] as? Int == 3 + 1024, "\(s ?? [:])")
        }
        XCTAssertEqual(d.log.components(separatedBy: "has more than 1024 units").count - 1, 1, d.logTail)
        XCTAssertEqual(loud(d).errors, [], "no load failed")
    }

    /// Point 11: scopes made and removed under a matched slice as fast as the kernel takes them (5,000 at a time)
    /// while the daemon follows them: a scope gone between the scan and the load used to fail the load (89 failed
    /// in 20 s, 139 KB of log). No load fails now, the log stays quiet, and a good client keeps being answered.
    func testCgroupChurnFailsNoLoad() throws {
        let slice = try makeSlice()
        let d = try start(Self.policy + "[App churn]\nUnit=npt-churn-*.scope\nWWAN=deny\n")
        let stop = Locked(false)
        let rounds = Locked(0)
        let churn = Thread {
            let base = Array(slice.utf8CString.dropLast())
            var n = 0
            while !stop.get() {
                var paths: [[CChar]] = []
                for i in 0..<5000 where !stop.get() {
                    let p = base + Array("/npt-churn-\(n)-\(i).scope".utf8CString)
                    if mkdir(p, 0o755) == 0 { paths.append(p) }
                }
                for p in paths { rmdir(p) }
                n += 1
                rounds.set(n)
            }
        }
        churn.start()
        defer { stop.set(true) }
        // A good client asks all along: every answer comes, and in time.
        let client = try EvChannel.connect(socket, name: "good")
        defer { client.close() }
        var took: [Double] = []
        let until = monotonicNow() + 3
        while monotonicNow() < until {
            let t = monotonicNow()
            XCTAssertEqual(try client.request("QUERY denied")["ok"] as? Bool, true)
            took.append(monotonicNow() - t)
            usleep(2_000)
        }
        stop.set(true)
        try waitUntil("the churn stopped") { (churn.isFinished, "") }
        took.sort()
        let p99 = took[took.count * 99 / 100], worst = took.last ?? 0
        print("cgroup churn: \(rounds.get()) rounds of 5,000 scopes, \(took.count) queries, p99 \(Int(p99 * 1000)) ms, "
            + "the slowest \(Int(worst * 1000)) ms")
        XCTAssertGreaterThan(rounds.get(), 0)
        // Generous (a debug build on a shared machine): the loop is never held for long, and mostly not at all. The
        // figures for a release build are bench/bench.py's `churn` phase.
        XCTAssertLessThan(p99, 0.5, "QUERY p99 under churn")
        XCTAssertLessThan(worst, 2.0, "a QUERY waited \(worst) s")
        try waitForEnforcing(socket)
        assertBlocked(try bed.probe(uid: 4001, link: "wwan0"), "a User= app after the churn")
        let scope = try mkdirs(slice, "npt-churn-last.scope")
        // Asked from inside: the app may be enforced through scopes of the churn's last scan still.
        try waitUntil("the last scope is in the rules") {
            let q = try self.askFromInside(scope)
            return (q["enforced"] as? Bool == true, "\(q)")
        }
        assertBlocked(try bed.probe(cgroup: scope, link: "wwan0"), "a scope made after the churn")
        let (lines, errors) = loud(d)
        XCTAssertEqual(errors, [], "no load failed")
        XCTAssertFalse(d.log.contains("changing only what differs failed"), "no change of elements failed")
        XCTAssertLessThan(lines.count, 20, "the log at notice and above stays short: \(lines.suffix(20))")
    }

    /// Issue 37: a unit made while thousands of others come and go was refused only after 0.3-3 s (it waited for a
    /// scan of them all and a load of their rules). Its cgroup is named to the kernel by a change of its own now:
    /// each of scopes made at random moments during the churn is refused within 100 ms of its mkdir.
    func testANewUnitIsRefusedAtOnceUnderChurn() throws {
        let slice = try makeSlice()
        let d = try start(Self.policy + "[App churn]\nUnit=npt-churn-*.scope\nWWAN=deny\n", release: true)
        let churn = try Churn(in: slice, prefix: "npt-churn", count: 5000)
        defer { churn.stop() }
        // Once the churn's units are in the rules (the issue's scope came halfway through 20 s of it): the first
        // unit at a level no unit of the policy's apps was at waits for its scan (docs/ENFORCEMENT.md).
        try waitForEnforced("churn")
        var firsts: [Double] = []
        for i in 0..<10 {
            usleep(UInt32.random(in: 50_000...300_000))
            let (ms, passed) = try bed.firstRefused(scope: slice + "/npt-churn-probe-\(i).scope", link: "wwan0")
            guard let ms else { XCTFail("probe \(i): never refused (\(passed) datagrams passed)"); continue }
            firsts.append(ms)
        }
        // Meanwhile the person asking hears of the units named as they are made, apart from those in the rules.
        try waitUntil("netpermctl status counts the units restricted as they were made") {
            let r = try Subprocess.run([self.netpermctl, "--socket", self.socket, "status"])
            return (r.stdout.contains(" new units restricted)"), r.stdout)
        }
        let rounds = churn.stop()
        firsts.sort()
        print("new scopes during the churn (\(rounds) rounds of 5,000): first refused after "
            + firsts.map { String(format: "%.1f", $0) }.joined(separator: ", ") + " ms")
        XCTAssertGreaterThan(rounds, 0, "the churn ran")
        XCTAssertEqual(firsts.count, 10)
        XCTAssertLessThan(firsts.last ?? .infinity, 100, "a new scope refused within 100 ms of its mkdir: \(firsts)")
        // Once it settles, STATUS counts what the kernel holds: the one unit there is, and no element of the
        // 30,000 gone (deleted by their descriptors or their ids, not left behind).
        let last = try mkdirs(slice, "npt-churn-last.scope")
        try waitUntil("the last scope is in the rules, and nothing else", timeout: 30) {
            let q = try self.askFromInside(last)
            let s = try self.request(self.socket, "STATUS")["enforcement"] as? [String: Any]
            let inMap = try self.elements(of: "unit2_wwan")
            return (q["enforced"] as? Bool == true && s?["unit_cgroups"] as? Int == 1 && s?["units_restricted"] as? Int == 0
                        && inMap == 1, "\(q["enforced_why"] ?? "enforced"), \(s ?? [:]), \(inMap) elements in unit2_wwan")
        }
        XCTAssertEqual(loud(d).errors, [], "no load failed")
    }

    /// How many elements the kernel's map `name` of the daemon's table holds.
    private func elements(of map: String) throws -> Int {
        let r = try bed.nft("-j", "list", "map", "inet", "netpermd", map)
        guard r.status == 0, let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any],
              let items = o["nftables"] as? [[String: Any]], let m = items.compactMap({ $0["map"] as? [String: Any] }).first
        else { throw HarnessError("nft list map \(map): \(r.summary)") }
        return (m["elem"] as? [Any])?.count ?? 0
    }

    /// Issue 37: one user's tree churning costs others nothing: a user making and removing 3,000 units of a
    /// `UserUnit=` app in their own manager's tree, a system unit made meanwhile is refused within 100 ms, and so is
    /// another user's unit. (A unit of the system app runs at that level already, as system services do: the first
    /// unit at a level no unit of the policy's apps was at since it was loaded waits for its scan.)
    func testAUsersChurnDelaysNoOneElse() throws {
        let slice = try makeSlice()
        try mkdirs(slice, "npt-sys-up.service")
        let uid = 4110
        let users = try mkdirs(slice, "user-\(uid).slice")
        let manager = try mkdirs(users, "user@\(uid).service")
        let apps = try mkdirs(manager, "app.slice")
        try Subprocess.check(["chown", "-R", "\(uid):\(uid)", manager])
        let other = 4111
        let otherApps = try mkdirs(try mkdirs(try mkdirs(slice, "user-\(other).slice"), "user@\(other).service"), "app.slice")
        let d = try start(Self.policy + """
            [App mine]
            Unit=npt-sys-*.service
            WWAN=deny

            [App theirs]
            UserUnit=app-*.scope
            WWAN=deny

            """, release: true)
        let churn = try Churn(in: apps, prefix: "app-churn", count: 3000, uid: uid)
        defer { churn.stop() }
        var system: [Double] = [], others: [Double] = []
        for i in 0..<6 {
            usleep(UInt32.random(in: 50_000...300_000))
            let (ms, passed) = try bed.firstRefused(scope: slice + "/npt-sys-\(i).service", link: "wwan0")
            if let ms { system.append(ms) } else { XCTFail("system unit \(i): never refused (\(passed) passed)") }
            let (oms, opassed) = try bed.firstRefused(scope: otherApps + "/app-probe-\(i).scope", link: "wwan0")
            if let oms { others.append(oms) } else { XCTFail("the other user's unit \(i): never refused (\(opassed) passed)") }
        }
        let rounds = churn.stop()
        let sys = system.sorted().map { String(format: "%.1f", $0) }.joined(separator: ", ")
        let oth = others.sorted().map { String(format: "%.1f", $0) }.joined(separator: ", ")
        print("a user's churn (\(rounds) rounds of 3,000): system units refused after \(sys) ms, another user's after \(oth) ms")
        XCTAssertGreaterThan(rounds, 0, "the churn ran")
        XCTAssertLessThan(system.max() ?? .infinity, 100, "system units: \(system)")
        XCTAssertLessThan(others.max() ?? .infinity, 100, "another user's units: \(others)")
        XCTAssertEqual(loud(d).errors, [], "no load failed")
    }

    /// Scopes `DIR/PREFIX-ROUND-I.scope` made and removed, `count` at a time, as fast as the kernel takes them (as
    /// `uid` if given, in their own tree), until `stop()`; which returns the rounds made.
    private final class Churn {
        private let process: Process
        private let out = Pipe()
        init(in dir: String, prefix: String, count: Int, uid: Int? = nil) throws {
            process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            let script = """
                import os, signal, sys
                d, p, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
                stop = False
                def done(*_):
                    global stop
                    stop = True
                signal.signal(signal.SIGTERM, done)
                r = 0
                while not stop:
                    made = []
                    for i in range(n):
                        if stop: break
                        path = f"{d}/{p}-{r}-{i}.scope"
                        try:
                            os.mkdir(path)
                            made.append(path)
                        except OSError:
                            pass
                    for path in made: os.rmdir(path)
                    r += 1
                print(r)
                """
            let who = uid.map { ["--reuid", "\($0)", "--regid", "\($0)", "--clear-groups"] } ?? ["--"]
            process.arguments = who + ["/usr/bin/python3", "-c", script, dir, prefix, String(count)]
            process.standardOutput = out
            try process.run()
        }

        @discardableResult
        func stop() -> Int {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        }
    }

    /// Issue 48: a cgroup name of 256 bytes or more (cgroupfs takes it; any user can make one in their delegated tree)
    /// made sd-event's inotify read fail with EINVAL, and the loop ended: every daemon watching the tree exited 1
    /// without a word. Names of 256, 1,000 and 3,000 bytes, made where the daemon watches (by root under a matched
    /// slice, by a user in their own tree): the daemon lives on, answers, and still follows the units made after them.
    func testCgroupNamesLongerThanAnyFileNameStopNothing() throws {
        let slice = try makeSlice()
        let uid = 4100
        let users = try mkdirs(slice, "user-\(uid).slice")
        let manager = try mkdirs(users, "user@\(uid).service")
        let apps = try mkdirs(manager, "app.slice")
        try Subprocess.check(["chown", "-R", "\(uid):\(uid)", manager])
        let d = try start(Self.policy + "[App late]\nUnit=npt-late.service\nWWAN=deny\n\n[App mine]\nUserUnit=app-mine.scope\nWWAN=deny\n")
        let asUser = ["setpriv", "--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups"]
        for length in [256, 1000, 3000] {
            let long = "npt-" + String(repeating: "x", count: length - "npt-.service".count) + ".service"
            try mkdirs(slice, long)
            let scope = "app-" + String(repeating: "y", count: length - "app-.scope".count) + ".scope"
            let made = try Subprocess.run(asUser + ["mkdir", apps + "/" + scope])
            XCTAssertEqual(made.status, 0, "a user may make a \(length)-byte name in their own tree: \(made.summary)")
            self.made.append(Self.path(apps, Array(scope.utf8)))
        }
        XCTAssertEqual(try request(socket, "PING")["ok"] as? Bool, true, d.logTail)
        // Made after them: seen only if the loop and its watches live on.
        let unit = try mkdirs(slice, "npt-late.service")
        try waitForEnforced("late")
        assertBlocked(try bed.probe(cgroup: unit, link: "wwan0"), "a unit made after the long names")
        let mine = apps + "/app-mine.scope"
        XCTAssertEqual(try Subprocess.run(asUser + ["mkdir", mine]).status, 0)
        made.append(Self.path(apps, Array("app-mine.scope".utf8)))
        try waitUntil("the user's unit made after the long names is in the rules") {
            let p = try self.bed.probe(uid: UInt32(uid), cgroup: mine, link: "wwan0")
            return (!p.passed, "\(p)")
        }
        XCTAssertTrue(d.isRunning, d.logTail)
        XCTAssertEqual(loud(d).errors, [], "nothing failed")
    }

    /// Point 6: a slice removed and made again within the rescan's delay was never watched again (its watch was
    /// kept by path, and the path's new directory had none), so a unit made in it later was never enforced.
    func testASliceMadeAgainIsWatchedAgain() throws {
        let slice = try makeSlice()
        try start(Self.policy + "[App again]\nUnit=npt-again.service\nWWAN=deny\n")
        XCTAssertEqual(try query("again")["enforced_why"] as? String, "cgroup-absent")
        XCTAssertEqual(rmdir(slice), 0)
        XCTAssertEqual(mkdir(slice, 0o755), 0, "made again within the 10 ms the rescan waits")
        // Let the rescan of that pair pass before the unit comes, so only a watch on the new slice can see it.
        usleep(100_000)
        let unit = try mkdirs(slice, "npt-again.service")
        try waitForEnforced("again", timeout: 2)
        assertBlocked(try bed.probe(cgroup: unit, link: "wwan0"), "in the unit of the slice made again")
    }

    /// Point 6: a system unit one slice deeper than the rules used to follow (level 4: `Slice=` of a slice in a
    /// slice of a slice) was never enforced, and its processes' QUERY said `cgroup-pending` forever. System units
    /// are followed down to level 6 now; deeper ones, and units inside another unit's cgroup, are not, and a
    /// process in one hears `cgroup-unfollowed` at once.
    func testDeeperUnitsAreEnforcedOrSaySoAtOnce() throws {
        let slice = try makeSlice()
        var deep = slice
        for n in 1...5 { deep = try mkdirs(deep, "npt-cg-\(getpid())-s\(n).slice") }
        // Levels: the slice is 1, its slices 2 to 6.
        let level4 = try mkdirs(slice + "/npt-cg-\(getpid())-s1.slice/npt-cg-\(getpid())-s2.slice", "npt-deep4.service")
        let level6 = try mkdirs(deep.components(separatedBy: "/").dropLast().joined(separator: "/"), "npt-deep6.service")
        let level7 = try mkdirs(deep, "npt-deep7.service")
        let delegated = try mkdirs(try mkdirs(slice, "npt-host.service"), "npt-inner.scope")
        try start(Self.policy + """
            [App deep4]
            Unit=npt-deep4.service
            WWAN=deny

            [App deep6]
            Unit=npt-deep6.service
            WWAN=deny

            [App deep7]
            Unit=npt-deep7.service
            WWAN=deny

            [App inner]
            Unit=npt-inner.scope
            WWAN=deny

            """)
        for (app, cgroup) in [("deep4", level4), ("deep6", level6)] {
            try waitForEnforced(app)
            assertBlocked(try bed.probe(cgroup: cgroup, link: "wwan0"), "\(app): in its unit")
            XCTAssertEqual(try askFromInside(cgroup)["enforced"] as? Bool, true, "\(app): its own QUERY")
        }
        for (app, cgroup) in [("deep7", level7), ("inner", delegated)] {
            XCTAssertEqual(try query(app)["enforced_why"] as? String, "cgroup-absent", app)
            let own = try askFromInside(cgroup)
            XCTAssertEqual(own["app"] as? String, app, "\(own)")
            XCTAssertEqual(own["enforced_why"] as? String, "cgroup-unfollowed", "\(app): \(own)")
        }
    }

    /// Issue 47: a unit inside a user's app unit (a terminal's tab scope inside its own) was refused by the kernel as
    /// the app (the rules match the enclosing unit's cgroup) while its QUERY answered `[Defaults]` under its
    /// executable, `enforced:false`. The answer is the kernel's now.
    func testAUnitInsideAnAppsUnitIsThatAppInTheAnswerAsInTheKernel() throws {
        let slice = try makeSlice()
        let uid = 4100
        let manager = try mkdirs(try mkdirs(slice, "user-\(uid).slice"), "user@\(uid).service")
        let apps = try mkdirs(manager, "app.slice")
        let term = try mkdirs(apps, "app-org.example.Term-1.scope")
        let tab = try mkdirs(term, "tab-2.scope")
        try Subprocess.check(["chown", "-R", "\(uid):\(uid)", manager])
        try start(Self.policy + "[App tabs]\nUserUnit=app-org.example.Term-*.scope\nWWAN=deny\n")
        try waitForEnforced("tabs")
        assertBlocked(try bed.probe(uid: UInt32(uid), cgroup: tab, link: "wwan0"), "the kernel: the tab is the terminal")
        // Moved into the tab by root, then the user's own process (which may reach the socket's directory).
        chmod(dir, 0o755)
        let r = try Subprocess.run(["sh", "-c", #"echo $$ > "$0/cgroup.procs" && exec setpriv --reuid "$2" --regid "$2" --clear-groups socat -t 2 - "UNIX-CONNECT:$1""#,
                                    tab, socket, "\(uid)"], input: Array("QUERY\n".utf8), timeout: 10)
        let own = try JSONValue.object(String(try XCTUnwrap(r.stdout.split(separator: "\n").first, r.summary)))
        XCTAssertEqual(own["app"] as? String, "tabs", "\(own)")
        XCTAssertEqual(own["matched_by"] as? String, "unit", "\(own)")
        XCTAssertEqual(own["enforced"] as? Bool, true, "\(own)")
    }

    /// `QUERY` from a process in `cgroup`: what a unit's own process hears.
    private func askFromInside(_ cgroup: String) throws -> [String: Any] {
        let r = try Subprocess.run(["sh", "-c", #"echo $$ > "$0/cgroup.procs" && exec socat -t 2 - "UNIX-CONNECT:$1""#,
                                    cgroup, socket], input: Array("QUERY\n".utf8), timeout: 10)
        guard r.status == 0, let line = r.stdout.split(separator: "\n").first else { throw HarnessError(r.summary) }
        return try JSONValue.object(String(line))
    }
}
