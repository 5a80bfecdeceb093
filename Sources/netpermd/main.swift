import Glibc
import NetpermControl
import NetpermCore
import NetpermIO
import NetpermNetlink
import NetpermSystemd

// Wiring only: options, config, loop, netlink, control socket, signals. Logic lives in the core.

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
        exit(code)
    }
    Log.level = options.logLevel

    let config: Config
    do { config = try ConfigLoader.load(path: options.configPath, required: options.configGiven) } catch {
        fail("configuration error: \(error)")
    }

    let loop: SDEventLoop
    do { loop = try SDEventLoop() } catch { fail("cannot create the event loop: \(error)") }

    let daemon = Daemon(config: config, sysfs: Sysfs(root: options.sysfsRoot))

    let watcher: NetlinkWatcher
    do { watcher = try NetlinkWatcher(loop: loop, receiveBuffer: options.netlinkReceiveBuffer) } catch {
        fail("cannot watch netlink: \(error)")
    }
    watcher.onChange = { daemon.kernelChanged($0) }
    daemon.kernelChanged(watcher.snapshot())
    daemon.markReady()

    let listenFD: Int32
    do { listenFD = try SocketPath.bindListening(options.socketPath) } catch { fail("\(error)") }

    let server: ControlServer
    do {
        server = try ControlServer(loop: loop, listenFD: listenFD) { _, frame in daemon.handle(frame) }
    } catch { fail("cannot serve the control socket: \(error)") }

    func shutdown(_ signal: String) {
        Log.notice("\(signal): stopping")
        server.stopListening()
        server.closeAll()
        unlink(options.socketPath)
        loop.exit(code: 0)
    }
    do {
        try loop.onSignal(SIGTERM) { shutdown("SIGTERM") }
        try loop.onSignal(SIGINT) { shutdown("SIGINT") }
    } catch { fail("cannot install signal handlers: \(error)") }
    signal(SIGPIPE, SIG_IGN)

    Log.notice("netpermd \(DaemonState.version) listening on \(options.socketPath)")
    let code = loop.run()
    return code < 0 ? 1 : code
}

exit(run())
