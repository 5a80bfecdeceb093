// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
@testable import NetpermDaemon
import NetpermIO
import TestSupport
import XCTest

/// The exec watcher on the test loop: datagrams as the process connector sends them, /proc as a fake. It tells of a
/// process of a person's session that runs an installed app's program, by the file it runs, and of nothing else;
/// most execs cost one look at the executable.
final class ExecWatcherTests: XCTestCase {
    static let home = "/user.slice/user-1000.slice/user@1000.service"
    static let maps = FileKey(device: 8, inode: 1)
    static let make = FileKey(device: 8, inode: 2)

    final class FakeProc: ProcessReading {
        struct Process { var exe: FileKey; var path: String; var cgroup: String; var argv: [String] = [] }
        var processes: [Int32: Process] = [:]
        var files: [String: FileKey] = [:]
        /// Pids that exit as soon as they are pinned (their pid then names nobody).
        var exitOnPin: Set<Int32> = []
        var exeReads = 0
        var cgroupReads = 0
        var pinned: Set<Int32> = []
        var open = 0
        func pin(_ pid: Int32) -> Int32? {
            guard processes[pid] != nil else { return nil }
            open += 1
            if exitOnPin.contains(pid) { processes[pid] = nil } else { pinned.insert(pid) }
            return pid
        }
        func isAlive(_ pin: Int32) -> Bool { pinned.contains(pin) }
        func release(_ pin: Int32) { open -= 1; pinned.remove(pin) }
        func executableFile(_ pid: Int32) -> FileKey? { exeReads += 1; return processes[pid]?.exe }
        func executablePath(_ pid: Int32) -> String? { processes[pid]?.path }
        func cgroup(_ pid: Int32) -> String? { cgroupReads += 1; return processes[pid].map { "0::\($0.cgroup)\n" } }
        func arguments(_ pid: Int32) -> [String]? { processes[pid]?.argv }
        func file(_ path: String, of pid: Int32) -> FileKey? { files[path] }
    }

    private var sockets: [Int32] = [-1, -1]
    private let loop = TestLoop()
    private let proc = FakeProc()
    private var found: [ExecFound] = []
    private var counted: [ExecCounts] = []
    private var watcher: ExecWatcher?

    override func setUpWithError() throws {
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &sockets), 0)
        watcher = try ExecWatcher(loop: loop, fd: sockets[0], proc: proc, counted: { [unowned self] in self.counted.append($0) }) {
            [unowned self] in self.found.append($0)
        }
        var maps = DesktopEntry(name: "Maps")
        maps.programFile = Self.maps
        watcher?.use(ExecIndex(catalog: DesktopCatalog(system: ["org.example.Maps": maps])))
    }

    override func tearDown() {
        watcher = nil
        FD.close(sockets[1])
    }

    private func send(_ pids: Int32...) {
        for pid in pids {
            let d = ProcessEvents.execDatagram(pid: pid, tgid: pid)
            XCTAssertEqual(d.withUnsafeBytes { Glibc.send(sockets[1], $0.baseAddress, $0.count, 0) }, d.count)
        }
    }

    /// The execs sent and read, and the pause after the read over (a quiet one: the socket is watched again).
    private func exec(_ pids: Int32...) {
        for pid in pids { send(pid) }
        loop.runOnce()
        loop.advance(byMicroseconds: ExecWatcher.pauseMicroseconds)
    }

    /// Under a burst the socket is read once per pause, every exec that came meanwhile at once; a pause in which
    /// nothing came ends the pausing, so that the next exec is read as it comes.
    func testABurstIsReadOncePerPause() {
        for pid in Int32(200)..<205 {
            proc.processes[pid] = .init(exe: Self.make, path: "/usr/bin/cc", cgroup: "/system.slice/x.service")
        }
        send(200)
        loop.runOnce()
        XCTAssertEqual(watcher?.counts.execs, 1, "an exec after a quiet moment is read at once")
        send(201, 202)
        loop.runOnce(timeoutMilliseconds: 20)
        XCTAssertEqual(watcher?.counts.execs, 1, "the socket rests after a read")
        send(203)
        loop.advance(byMicroseconds: ExecWatcher.pauseMicroseconds)
        XCTAssertEqual(watcher?.counts.execs, 4, "what came during the pause, read in one go when it ends")
        loop.advance(byMicroseconds: ExecWatcher.pauseMicroseconds)
        XCTAssertEqual(watcher?.counts.execs, 4)
        send(204)
        loop.runOnce()
        XCTAssertEqual(watcher?.counts.execs, 5, "watched again after a quiet pause")
    }

    /// A launcher's chain of execs (`sh` -> `setpriv` -> `env` -> the app) read in one batch: /proc shows the app's
    /// program for each, and the process is told once.
    func testAProcesssExecsReadTogetherAreToldOnce() {
        proc.processes[10] = .init(exe: Self.maps, path: "/usr/bin/maps", cgroup: Self.home + "/session.slice/dbus.service")
        send(10, 10, 10)
        loop.runOnce()
        XCTAssertEqual(found.map(\.pid), [10])
        XCTAssertEqual(watcher?.counts.execs, 3, "every exec counted")
    }

    func testAnAppActivatedByDBusIsFound() {
        proc.processes[10] = .init(exe: Self.maps, path: "/usr/bin/maps", cgroup: Self.home + "/session.slice/dbus.service")
        exec(10)
        XCTAssertEqual(found, [ExecFound(pid: 10, uid: 1000, app: "org.example.Maps", place: .dbusActivation,
                                         executable: "/usr/bin/maps")])
        XCTAssertEqual(proc.open, 0, "the pidfd closed")
    }

    func testACompileCostsALookAtTheExecutableEach() {
        for pid in Int32(100)..<1100 {
            proc.processes[pid] = .init(exe: Self.make, path: "/usr/bin/cc", cgroup: Self.home + "/app.slice/app-org.gnome.Terminal.slice/vte-spawn-1.scope")
        }
        for pid in Int32(100)..<1100 { exec(pid) }
        XCTAssertEqual(found, [])
        XCTAssertEqual(watcher?.counts.execs, 1000)
        XCTAssertEqual(watcher?.counts.candidates, 0)
        XCTAssertEqual(proc.exeReads, 1000, "one look each")
        XCTAssertEqual(proc.cgroupReads, 0, "no cgroup read")
    }

    /// The counts reach the engine (METRICS) once per interval while execs come, not once per datagram, and not
    /// at all while nothing changes.
    func testCountsAreToldOncePerInterval() {
        proc.processes[40] = .init(exe: Self.maps, path: "/usr/bin/maps", cgroup: "/system.slice/cron.service")
        for pid in Int32(40)..<60 { exec(pid) }
        XCTAssertEqual(counted, [], "not at once")
        XCTAssertEqual(loop.armedTimers, 1, "one timer for the burst")
        loop.advance(byMicroseconds: ExecWatcher.reportMicroseconds)
        XCTAssertEqual(counted, [ExecCounts(execs: 20, candidates: 1)])
        XCTAssertEqual(loop.armedTimers, 0, "nothing to tell")
        exec(61)
        loop.advance(byMicroseconds: ExecWatcher.reportMicroseconds)
        XCTAssertEqual(counted.last, ExecCounts(execs: 21, candidates: 1))
    }

    func testOnlyProcessesOfASessionWithoutAnAppUnit() {
        proc.processes[20] = .init(exe: Self.maps, path: "/usr/bin/maps", cgroup: Self.home + "/app.slice/app-gnome-org.example.Maps-20.scope")
        proc.processes[21] = .init(exe: Self.maps, path: "/usr/bin/maps", cgroup: "/system.slice/cron.service")
        proc.processes[22] = .init(exe: Self.maps, path: "/usr/bin/maps", cgroup: Self.home + "/background.slice/x.service")
        proc.processes[23] = .init(exe: Self.maps, path: "/usr/bin/maps", cgroup: Self.home + "/app.slice/app-org.gnome.Terminal.slice/vte-spawn-2.scope")
        exec(20, 21, 22, 23)
        XCTAssertEqual(found.map(\.pid), [23], "a terminal's command that is an installed app")
    }

    /// A process gone (or its pid another's) by the time it is read is not told of.
    func testAProcessGoneIsNotTold() {
        proc.processes[30] = .init(exe: Self.maps, path: "/usr/bin/maps", cgroup: Self.home + "/session.slice/dbus.service")
        proc.exitOnPin = [30]
        exec(30, 31)
        XCTAssertEqual(found, [])
        XCTAssertEqual(proc.open, 0)
    }

    /// Until the engine gives an index, nothing is looked at.
    func testNothingIsLookedAtWithoutAnIndex() {
        watcher?.use(ExecIndex())
        proc.processes[40] = .init(exe: Self.maps, path: "/usr/bin/maps", cgroup: Self.home + "/session.slice/dbus.service")
        exec(40)
        XCTAssertEqual(found, [])
        XCTAssertEqual(proc.exeReads, 0)
    }

    /// A process found by the bus name it owns (NameClaims): taken where it is the claimant's, in a session place,
    /// alive after the reads; another uid's, one in an app's unit, one gone are not.
    func testAClaimIsTakenOnlyForTheClaimantsProcessOfASessionPlace() {
        let proc = FakeProc()
        let home = "/user.slice/user-1000.slice/user@1000.service"
        proc.processes[10] = .init(exe: FileKey(device: 1, inode: 1), path: "/usr/bin/python3.11",
                                   cgroup: home + "/session.slice/dbus.service")
        proc.processes[11] = .init(exe: FileKey(device: 1, inode: 1), path: "/usr/bin/python3.11",
                                   cgroup: "/user.slice/user-1001.slice/user@1001.service/session.slice/dbus.service")
        proc.processes[12] = .init(exe: FileKey(device: 1, inode: 1), path: "/usr/bin/python3.11",
                                   cgroup: home + "/app.slice/app-gnome-org.npt.Maps-1.scope")
        proc.processes[13] = .init(exe: FileKey(device: 1, inode: 1), path: "/usr/bin/python3.11",
                                   cgroup: home + "/session.slice/dbus.service")
        proc.exitOnPin = [13]
        let claims = NameClaims(proc: proc)
        XCTAssertEqual(claims.check(ProcessClaim(pid: 10, uid: 1000, app: "org.npt.Maps")),
                       ExecFound(pid: 10, uid: 1000, app: "org.npt.Maps", place: .dbusActivation,
                                 executable: "/usr/bin/python3.11"))
        XCTAssertNil(claims.check(ProcessClaim(pid: 11, uid: 1000, app: "org.npt.Maps")), "another uid's process")
        XCTAssertNil(claims.check(ProcessClaim(pid: 12, uid: 1000, app: "org.npt.Maps")), "in an app's unit already")
        XCTAssertNil(claims.check(ProcessClaim(pid: 13, uid: 1000, app: "org.npt.Maps")), "gone (a reused pid)")
        XCTAssertNil(claims.check(ProcessClaim(pid: 14, uid: 1000, app: "org.npt.Maps")), "no such process")
        XCTAssertEqual(proc.open, 0, "every pin released")
    }
}
