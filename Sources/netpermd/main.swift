import Glibc
import NetpermControl
import NetpermCore
import NetpermIO
import NetpermNetlink
import NetpermSystemd

// Wiring only: options, policy, loop, netlink, control socket, signals. Logic lives in the core.

func fail(_ message: String, code: Int32 = 1) -> Never {
    Log.err(message)
    exit(code)
}

func run() -> Int32 {
    let options: Options
    switch Options.parse(Array(CommandLine.arguments.dropFirst())) {
    case let .run(o): options = o
    case let .exit(code, text):
        Output.write(code == 0 ? STDOUT_FILENO : STDERR_FILENO, text)
        return code
    }
    Log.level = options.logLevel
    signal(SIGPIPE, SIG_IGN)
    // Block the signals the loop handles before the socket exists: a SIGTERM during start-up then waits for
    // the loop (whose handler unlinks the socket) instead of killing the daemon and leaving the file behind.
    var handled = sigset_t()
    sigemptyset(&handled)
    for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&handled, s) }
    sigprocmask(SIG_BLOCK, &handled, nil)

    // Every client is a descriptor: take the hard limit (systemd's default soft limit is 1024).
    var nofile = rlimit()
    if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max {
        nofile.rlim_cur = nofile.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &nofile)
    }

    let loop: SDEventLoop
    do { loop = try SDEventLoop() } catch { fail("cannot create the event loop: \(error)") }

    let daemon = Daemon(loop: loop, configPath: options.configPath, configRequired: options.configGiven,
                        sysfs: Sysfs(root: options.sysfsRoot), stateDir: options.stateDir)
    if let error = daemon.loadPolicy() { fail("configuration error: \(error)") }

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
    watcher.onChange = { daemon.kernelChanged($0) }
    daemon.kernelChanged(watcher.snapshot())

    let server: ControlServer
    do {
        server = try ControlServer(loop: loop, listenFD: listenFD) { client, frame in daemon.handle(client, frame) }
    } catch { fail("cannot serve the control socket: \(error)") }
    server.onConnect = { daemon.connected($0) }
    server.onDisconnect = { daemon.disconnected($0) }

    let reloader = PolicyReloader(loop: loop, configPath: options.configPath) { daemon.reload() }
    if loop.enableWatchdog() { Log.info("watchdog enabled") }

    func shutdown(_ signal: String) {
        Log.notice("\(signal): stopping")
        Notify.stopping()
        server.stopListening()
        daemon.stopping()
        server.closeAll()
        // A socket systemd passed belongs to the socket unit: leave its path alone.
        if let boundPath { unlink(boundPath) }
        loop.exit(code: 0)
    }
    do {
        try loop.onSignal(SIGTERM) { shutdown("SIGTERM") }
        try loop.onSignal(SIGINT) { shutdown("SIGINT") }
        try loop.onSignal(SIGHUP) { Log.info("SIGHUP: reloading policy"); reloader.reloadNow() }
    } catch { fail("cannot install signal handlers: \(error)") }

    daemon.markReady()
    CodePages.release()
    Log.notice("netpermd \(DaemonState.version) listening on \(boundPath ?? "the socket-activated socket")")
    let code = loop.run()
    withExtendedLifetime((watcher, server, reloader)) {}
    return code < 0 ? 1 : code
}

exit(run())
