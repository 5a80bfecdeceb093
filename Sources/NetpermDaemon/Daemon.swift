// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermControl
import NetpermCore
import NetpermHost
import NetpermIO
import NetpermNetlink
import NetpermPolicyFiles
import NetpermProtocol
import NetpermSystemd

/// The daemon as one object with a lifecycle, as networkd's manager is: `init` brings its parts up in order (the
/// loop, the engine and its interpreter with the policy, the control socket's path, the kernel's links and Wi-Fi
/// networks, the system bus's services, the desktop files and unit cgroups, the server, the reloader, the
/// signals), each part that must be taken down registering how; `run` turns the loop until SIGTERM or SIGINT, whose
/// `stop` takes those parts down last first. main.swift parses the options and runs it.
public final class Daemon {
    /// Why the daemon could not start, in words for the log.
    public struct StartFailure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Descriptors kept for the daemon itself when the limit on descriptors bounds the connections.
    static let reservedDescriptors = 32

    private let loop: SDEventLoop
    /// What `stop` undoes, in the order the parts started; run last first.
    private var stops: [(part: String, stop: () -> Void)] = []
    /// The parts that work through the loop's callbacks only: kept alive while it turns.
    private var parts: [AnyObject] = []
    private var stopping = false

    public init(options: Options) throws(StartFailure) {
        loop = try Self.must("cannot create the event loop") { try SDEventLoop() }
        let loop = self.loop
        let accounts = SystemAccounts()
        let store = DecisionStore(stateDir: options.stateDir)
        let usageStore = UsageStore(stateDir: options.stateDir)
        let tagStore = TagStore(stateDir: options.stateDir)
        let reportStore = ReportStore(stateDir: options.stateDir)
        let clock = WallClock(offsetFile: options.clockOffsetFile)
        let engine = Engine(settings: .init(daemonUID: geteuid(), logLevel: options.logLevel,
                                            wallClock: { Double(clock.now) },
                                            localDate: { let d = Clock.localDay($0); return CivilDate(year: d.year, month: d.month, day: d.day) },
                                            clockTrust: { [run = options.runRoot] in clock.trust(run: run) },
                                            bootClock: { Clock.bootSeconds() }, promptIDKey: .random(),
                                            netns: (try? Files.fileID("/proc/self/ns/net"))?.inode),
                            decisions: store.load(), usage: usageStore.load(), tags: tagStore.load(),
                            report: reportStore.load(), reportFileExists: access(reportStore.path, F_OK) == 0)
        let sysfs = Sysfs(root: options.sysfsRoot, proc: options.procRoot, run: options.runRoot)
        let interpreter = Interpreter(engine: engine, loop: loop, store: store, usageStore: usageStore, tagStore: tagStore,
                                      reportStore: reportStore, sysfs: sysfs, clock: clock) {
            ConfigFiles.load(options.configPath, required: options.configGiven, accounts: accounts)
        }
        let policy = ConfigFiles.load(options.configPath, required: options.configGiven, accounts: accounts)
        interpreter.feed(.policy(policy))
        if let error = policy.failure { throw StartFailure(description: "configuration error: \(error)") }

        // The socket systemd passed (socket activation), else our own. Bind first: a second daemon on the same path
        // must refuse before it does anything else.
        let listenFD: Int32
        var boundPath: String?
        if let fd = Activation.listeningSocket(preferredName: "netpermd.socket") {
            listenFD = fd
            Log.info("using the listening socket passed by the service manager")
        } else {
            do { listenFD = try SocketPath.bindListening(options.socketPath) } catch {
                throw StartFailure(description: "\(error)")
            }
            boundPath = options.socketPath
            // A socket systemd passed belongs to the socket unit: only our own path is removed.
            stops.append(("the socket's path", { try? Files.remove(options.socketPath) }))
        }

        do throws(StartFailure) {
            try startParts(options, interpreter: interpreter, listenFD: listenFD)
        } catch {
            // What had started is taken down (the socket's path removed) before the process goes.
            for (_, stop) in stops.reversed() { stop() }
            throw error
        }
        // Start-up's code and read-only data leave the RSS once its work is done (READY=1 sent, the first desktop
        // files and usage counters read); what the running daemon uses comes back from the cache.
        interpreter.onStartupSettled = { CodePages.release() }
        interpreter.feed(.started)
        Log.notice("netpermd \(DaemonState.version) listening on \(boundPath ?? "the socket-activated socket")")
    }

    /// The parts after the policy and the socket's path: netlink, the system bus, the files, the server, signals.
    private func startParts(_ options: Options, interpreter: Interpreter, listenFD: Int32) throws(StartFailure) {
        let loop = self.loop
        let (watcher, wifi) = try watchKernel(options, interpreter: interpreter)
        // What NetworkManager and ModemManager say (metered, roaming), where they run: read over the system bus,
        // never waited for.
        let systemBus = SystemBus(loop: loop)
        let networkManager = NetworkManagerReader.follow(bus: systemBus, loop: loop)
        networkManager.onChange = { devices in
            interpreter.managedChanged(devices.mapValues {
                NetworkManagerDevice(metered: .init(dbus: $0.metered), deviceType: $0.deviceType,
                                     connectionID: $0.connectionID, connectionType: $0.connectionType)
            })
        }
        // The daemon's own face on the same bus (docs/DBUS.md): the socket's requests, for polkit's callers.
        let face = BusFace(bus: systemBus, interpreter: interpreter, daemonUID: geteuid())
        interpreter.bus = face
        face.start()
        let modemManager = ModemManagerReader.follow(bus: systemBus, loop: loop)
        modemManager.onChange = { interpreter.modemsChanged($0.mapValues(ModemRegistration.init(dbus:))) }
        interpreter.kernelChanged(watcher.snapshot())
        // Desktop apps' names and icons: everyone's files, and those of each user whose manager runs.
        let desktopFiles = DesktopWatcher(loop: loop, files: DesktopFiles(xdgDataDirs: getenv("XDG_DATA_DIRS").map { String(cString: $0) },
                                                                           path: getenv("PATH").map { String(cString: $0) })) {
            interpreter.feed(.desktopCatalog($0))
        }
        interpreter.awaitsDesktopFiles = desktopFiles.reads
        let cgroups = CgroupWatcher(loop: loop) { c in
            interpreter.feed(.cgroups(c))
            desktopFiles.users(Set(c.units.lazy.filter(\.user).compactMap { Ruleset.UnitOwner.userUID(path: $0.path) }))
        }
        cgroups.unitsNamed = { interpreter.feed(.unitsNamed($0, generation: $1, error: $2)) }
        cgroups.gone = { interpreter.feed(.unitsGone($0)) }
        interpreter.nameUnits = { cgroups.nameUnits(with: $0) }
        cgroups.namerStarted = { interpreter.alsoCommitting(port: $0, commits: $1) }
        interpreter.handlesInForce = { cgroups.inForce($0) }
        // Apps known by what they run (the kernel's exec events) or by the bus names they own (users' netpermctl
        // scopes), and scopes made through users' managers.
        // Made only once a scope is wanted: most machines never need one.
        var scopes: ScopeMaker?
        interpreter.makeScope = { [loop] request, done in
            if scopes == nil { scopes = ScopeMaker(loop: loop) }
            scopes?.make(request, done: done)
        }
        stops.append(("the scope makers", { scopes = nil }))
        // A scope made (by the daemon or a user's netpermctl scopes) is scanned for at once: its app joins the rules
        // with its unit.
        interpreter.scanCgroupsSoon = { cgroups.scanSoon() }
        if let exec = Self.execWatcher(loop: loop, netns: options.processEventsNetns, interpreter: interpreter) {
            interpreter.watchExecs = { exec.use($0) }
            parts.append(exec)
        }

        let (server, reloader) = try serve(options, interpreter: interpreter, listenFD: listenFD)
        parts += [interpreter, watcher, server, reloader, cgroups, desktopFiles, systemBus, face, networkManager, modemManager]
        if let wifi { parts.append(wifi) }
    }

    /// The kernel's links, routes and Wi-Fi networks, followed for the interpreter.
    private func watchKernel(_ options: Options, interpreter: Interpreter) throws(StartFailure)
        -> (NetlinkWatcher, WifiWatcher?) {
        let loop = self.loop
        let watcher = try Self.must("cannot watch netlink") {
            try NetlinkWatcher(loop: loop, receiveBuffer: options.netlinkReceiveBuffer)
        }
        watcher.onChange = { interpreter.kernelChanged($0) }
        interpreter.steeringMarks = { watcher.marks = $0 }
        interpreter.lookUpRoute = { q in
            Result { () throws(NetlinkError) in try watcher.egress(toward: q) }
                .mapError { EdgeError(.lookUpRoute, errno: $0.errno, "\($0)") }
        }
        // Wi-Fi networks, where the kernel has nl80211: one info line where it does not.
        let wifi = WifiWatcher.start(loop: loop)
        if let wifi {
            interpreter.wifiChanged(wifi.networks)
            wifi.onChange = { interpreter.wifiChanged($0) }
        }
        return (watcher, wifi)
    }

    /// The control socket served, the policy file watched, and the signals handled.
    private func serve(_ options: Options, interpreter: Interpreter, listenFD: Int32) throws(StartFailure)
        -> (ControlServer, PolicyReloader) {
        let loop = self.loop
        let server = try Self.must("cannot serve the control socket") {
            try ControlServer(loop: loop, listenFD: listenFD, limits: Self.limits(options), delegate: interpreter)
        }
        interpreter.server = server
        // Last first: no new client, then the engine's last words (the `stopping` event, the notify) to those
        // connected, then their connections closed.
        stops.append(("the connections", { server.closeAll() }))
        stops.append(("the engine", { interpreter.feed(.stopping) }))
        stops.append(("the listening socket", { server.stopListening() }))

        let reloader = PolicyReloader(loop: loop, configPath: options.configPath) { interpreter.feed(.reload) }
        if loop.enableWatchdog() { Log.info("watchdog enabled") }
        _ = try Self.must("cannot install signal handlers") {
            try loop.onSignal(SIGTERM) { [unowned self] in self.stop("SIGTERM") }
            try loop.onSignal(SIGINT) { [unowned self] in self.stop("SIGINT") }
            try loop.onSignal(SIGHUP) {
                Log.info("SIGHUP: reloading policy")
                reloader.reloadNow()
            }
        }
        return (server, reloader)
    }

    /// The watcher of the kernel's exec events, or nil (said once) where the kernel refuses them: without
    /// CAP_NET_ADMIN (bind fails with EPERM) or outside the initial network namespace (ECONNREFUSED). `netns`, for
    /// tests: the namespace to open the socket in (the calling thread enters it for the moment).
    private static func execWatcher(loop: EventLoop, netns: String?, interpreter: Interpreter) -> ExecWatcher? {
        do {
            let fd = try ProcessEvents.open(inNamespace: netns)
            return try ExecWatcher(loop: loop, fd: fd, counted: { interpreter.feed(.execsCounted($0)) }) {
                interpreter.feed(.execFound($0))
            }
        } catch {
            let why = error == .notPermitted ? "it needs CAP_NET_ADMIN" : error == Errno(ECONNREFUSED)
                ? "the daemon is not in the initial network namespace" : "\(error)"
            Log.info("process events: not heard (\(why)): apps without a unit of their own (D-Bus-activated, started "
                     + "by a desktop that makes no units, from a terminal) are not known by what they run")
            return nil
        }
    }

    /// `make`'s result, or why it failed as a start failure.
    private static func must<T>(_ what: String, _ make: () throws -> T) throws(StartFailure) -> T {
        do { return try make() } catch { throw StartFailure(description: "\(what): \(error)") }
    }

    /// Turns the loop until `stop`; the process's exit code.
    public func run() -> Int32 {
        let code = loop.run()
        parts = []
        // sd-event ends its loop when a source's dispatch fails: say why, or the service manager sees only "exit 1".
        if code < 0 { Log.err("the event loop failed: \(Errno(-code)); exiting") }
        return code < 0 ? 1 : code
    }

    /// Takes the parts down in the reverse order of their start, then ends the loop.
    func stop(_ why: String) {
        guard !stopping else { return }
        stopping = true
        Log.notice("\(why): stopping")
        for (part, stop) in stops.reversed() {
            Log.debug("stopping \(part)")
            stop()
        }
        stops = []
        loop.exit(code: 0)
    }

    /// The control server's limits from the options and the descriptors this process may open.
    static func limits(_ options: Options) -> ControlServer.Limits {
        var limits = ControlServer.Limits()
        limits.maxLine = Request.maxLine
        limits.maxLagMicroseconds = options.subscriberTimeoutSeconds * 1_000_000
        limits.maxConnections = options.maxConnections
        limits.maxConnectionsPerUID = options.maxConnectionsPerUID
        limits.unlimitedUIDs = [0, geteuid()]
        // Every client is a descriptor: promise no more than the limit leaves after the daemon's own (its sockets,
        // the loop's, /proc and policy files being read, a pidfd), so clients past it are told rather than left to
        // make accept fail.
        var descriptors = ""
        if let nofile = Limits.openFiles(), nofile - reservedDescriptors < limits.maxConnections {
            limits.maxConnections = max(nofile - reservedDescriptors, 1)
            descriptors = " (the descriptor limit is \(nofile))"
        }
        Log.info("control socket: at most \(limits.maxConnections) connections\(descriptors), "
            + "\(limits.maxConnectionsPerUID) per uid other than root's and the daemon's")
        return limits
    }
}
