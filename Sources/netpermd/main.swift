// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermDaemon
import NetpermIO
import NetpermSystemd

// The process: options, logging, what every start needs of the process itself; then the daemon (Daemon.swift).

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
    Log.takeLibraryLines()
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
    do {
        return try Daemon(options: options).run()
    } catch {
        Log.err(error.description)
        return 1
    }
}

exit(run())
