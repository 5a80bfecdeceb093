// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermControl
import NetpermCore
import NetpermDaemon
import NetpermHost
import NetpermIO
import NetpermNetlink
import NetpermSystemd

// Wiring only: options, the loop, the engine and its interpreter, netlink, the control socket, signals.

func fail(_ message: String) -> Never {
    Log.err(message)
    exit(1)
}

/// Descriptors kept for the daemon itself when the limit on descriptors bounds the connections.
let reservedDescriptors = 32

func run() -> Int32 {
    let options: Options
    switch Options.parse(Array(CommandLine.arguments.dropFirst())) {
    case let .run(o): options = o
    case let .exit(code, text):
        Output.write(code == 0 ? STDOUT_FILENO : STDERR_FILENO, text)
        return code
    }
    Log.maxPriority = options.logLevel.rawValue
    // Under the service manager, lines go to the journal with their fields (`journalctl APP=maps`).
    if Journal.connectedToStderr { Log.journal = { Journal.send(priority: $0, message: $1, fields: $2) } }
    if options.removeRules { return RuleRemoval.run() }
    Heap.useOneArena()
    Signals.ignore(SIGPIPE)
    // Block the signals the loop handles before the socket exists: a SIGTERM during start-up then waits for
    // the loop (whose handler unlinks the socket) instead of killing the daemon and leaving the file behind.
    for s in [SIGTERM, SIGINT, SIGHUP] { try? Signals.block(s) }
    // Every client is a descriptor: take the hard limit (systemd's default soft limit is 1024).
    try? Limits.raiseOpenFilesToHardLimit()
    // While numbers below 1024 are free: libnftables' socket needs one (select(2)), whoever holds the rest.
    LowDescriptors.reserve()

    let loop: SDEventLoop
    do { loop = try SDEventLoop() } catch { fail("cannot create the event loop: \(error)") }
    let accounts = SystemAccounts()
    let store = DecisionStore(stateDir: options.stateDir)
    let usageStore = UsageStore(stateDir: options.stateDir)
    let tagStore = TagStore(stateDir: options.stateDir)
    let clock = WallClock(offsetFile: options.clockOffsetFile)
    let engine = Engine(settings: .init(daemonUID: geteuid(), logLevel: options.logLevel,
                                        wallClock: { Double(clock.now) },
                                        localDate: { let d = Clock.localDay($0); return CivilDate(year: d.year, month: d.month, day: d.day) },
                                        clockTrust: { [run = options.runRoot] in clock.trust(run: run) },
                                        bootClock: { Clock.bootSeconds() }, promptIDKey: UInt32.random(in: 1...UInt32.max),
                                        netns: (try? Files.fileID("/proc/self/ns/net"))?.inode),
                        decisions: store.load(), usage: usageStore.load(), tags: tagStore.load())
    let sysfs = Sysfs(root: options.sysfsRoot, proc: options.procRoot, run: options.runRoot)
    let interpreter = Interpreter(engine: engine, loop: loop, store: store, usageStore: usageStore, tagStore: tagStore,
                                  sysfs: sysfs, clock: clock) {
        ConfigFiles.load(options.configPath, required: options.configGiven, accounts: accounts)
    }
    let policy = ConfigFiles.load(options.configPath, required: options.configGiven, accounts: accounts)
    interpreter.feed(.policy(policy))
    if let error = policy.failure { fail("configuration error: \(error)") }

    // The socket systemd passed (socket activation), else our own. Bind first: a second daemon on the same path
    // must refuse before it does anything else.
    let listenFD: Int32
    var boundPath: String?
    if let fd = Activation.listeningSocket(preferredName: "netpermd.socket") {
        listenFD = fd
        Log.info("using the listening socket passed by the service manager")
    } else {
        do { listenFD = try SocketPath.bindListening(options.socketPath) } catch { fail("\(error)") }
        boundPath = options.socketPath
    }

    let watcher: NetlinkWatcher
    do { watcher = try NetlinkWatcher(loop: loop, receiveBuffer: options.netlinkReceiveBuffer) } catch {
        fail("cannot watch netlink: \(error)")
    }
    watcher.onChange = { interpreter.kernelChanged($0) }
    interpreter.steeringMarks = { watcher.marks = $0 }
    interpreter.lookUpRoute = { q in Result { () throws(NetlinkError) in try watcher.egress(toward: q) }.mapError { $0 } }
    // Wi-Fi networks, where the kernel has nl80211: one info line where it does not.
    let wifi = WifiWatcher.start(loop: loop)
    if let wifi {
        interpreter.wifiChanged(wifi.networks)
        wifi.onChange = { interpreter.wifiChanged($0) }
    }
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
    let modemManager = ModemManagerReader.follow(bus: systemBus, loop: loop)
    modemManager.onChange = { interpreter.modemsChanged($0.mapValues(ModemRegistration.init(dbus:))) }
    interpreter.kernelChanged(watcher.snapshot())
    // Desktop apps' names and icons: everyone's files, and those of each user whose manager runs.
    let desktopFiles = DesktopWatcher(loop: loop, files: DesktopFiles(xdgDataDirs: getenv("XDG_DATA_DIRS").map { String(cString: $0) })) {
        interpreter.feed(.desktopCatalog($0))
    }
    let cgroups = CgroupWatcher(loop: loop) { c in
        interpreter.feed(.cgroups(c))
        desktopFiles.users(Set(c.units.lazy.filter(\.user).compactMap { Ruleset.UnitOwner.userUID(path: $0.path) }))
    }
    cgroups.unitsNamed = { interpreter.feed(.unitsNamed($0, generation: $1, error: $2)) }
    cgroups.gone = { interpreter.feed(.unitsGone($0)) }
    interpreter.nameUnits = { cgroups.nameUnits(with: $0) }
    cgroups.namerStarted = { interpreter.alsoCommitting(port: $0, commits: $1) }
    interpreter.handlesInForce = { cgroups.inForce($0) }

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
    let server: ControlServer
    do { server = try ControlServer(loop: loop, listenFD: listenFD, limits: limits, delegate: interpreter) } catch {
        fail("cannot serve the control socket: \(error)")
    }
    interpreter.server = server

    let reloader = PolicyReloader(loop: loop, configPath: options.configPath) { interpreter.feed(.reload) }
    if loop.enableWatchdog() { Log.info("watchdog enabled") }

    func shutdown(_ signal: String) {
        Log.notice("\(signal): stopping")
        server.stopListening()
        interpreter.feed(.stopping)
        server.closeAll()
        // A socket systemd passed belongs to the socket unit: leave its path alone.
        if let boundPath { try? Files.remove(boundPath) }
        loop.exit(code: 0)
    }
    do {
        try loop.onSignal(SIGTERM) { shutdown("SIGTERM") }
        try loop.onSignal(SIGINT) { shutdown("SIGINT") }
        try loop.onSignal(SIGHUP) {
            Log.info("SIGHUP: reloading policy")
            reloader.reloadNow()
        }
    } catch { fail("cannot install signal handlers: \(error)") }

    interpreter.feed(.started)
    // Start-up's code and read-only data leave the RSS; what the running daemon uses comes back from the cache.
    CodePages.release()
    Log.notice("netpermd \(DaemonState.version) listening on \(boundPath ?? "the socket-activated socket")")
    let code = loop.run()
    withExtendedLifetime((watcher, wifi, server, reloader, cgroups, desktopFiles, systemBus, networkManager, modemManager)) {}
    return code < 0 ? 1 : code
}

exit(run())
