// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermProtocol

// netpermctl: the command-line client of netpermd. `netpermctl help` lists the commands.

let invocation: Invocation
do {
    invocation = try Invocation.parse(Array(CommandLine.arguments.dropFirst()),
                                      defaultSocket: getenv("NETPERMD_SOCKET").map { String(cString: $0) }
                                          ?? "/run/netpermd/netpermd.sock")
} catch {
    error.report()
}

let command: Command
switch invocation.action {
case .version:
    Screen.out(Help.version)
    exit(.ok)
case .help(nil):
    Screen.out(Help.overview())
    exit(.ok)
case let .help(c?):
    Screen.out(Help.command(c))
    exit(.ok)
case let .run(c):
    command = c
}

let socketPath = invocation.socketPath
let args = invocation.args
let mode = invocation.mode

/// Prints one reply in the mode asked for; `json` is the daemon's text for it, printed as it is.
func show(json: String, human: @autoclosure () -> String, terse: @autoclosure () -> String) -> Never {
    switch mode {
    case .json: Output.out(json + "\n")
    case .human: Screen.out(human())
    case .terse: Screen.out(terse())
    }
    exit(.ok)
}

func ask(_ request: String, human: (JSON) -> String, terse: (JSON) -> String) -> Never {
    let (line, reply) = Exchange.run(request, socketPath: socketPath, mode: mode)
    show(json: line, human: human(reply.forTerminal), terse: terse(reply.forTerminal))
}

switch command {
case .status: ask("STATUS", human: Render.status) { Terse.lines(Terse.status($0)) }
case .links:
    let (line, reply) = Exchange.run("LINKS", socketPath: socketPath, mode: mode)
    guard let name = args.first else {
        show(json: line, human: LinkText.table(reply.forTerminal), terse: Terse.links(reply.forTerminal))
    }
    // LINKS has every link: one is picked here, so the protocol needs no verb for it.
    guard let link = reply["links"]?.arrayValue?.first(where: { $0["name"]?.stringValue == name }) else {
        die("no link named '\(name)'", .failed)
    }
    let shown = LinkView(link.forTerminal)
    show(json: link.encoded(), human: LinkText.detail(shown), terse: Terse.lines(Terse.link(shown)))
case .query: ask((["QUERY"] + args).joined(separator: " "), human: Render.query) { Terse.lines(Terse.query($0)) }
case .apps: ask("APPS", human: Render.apps, terse: Terse.apps)
case .reload: ask("RELOAD", human: Render.reload) { Terse.lines(Terse.reload($0)) }
case .check: Check.run(args.first, mode: mode)
case .monitor: Monitor.run(socketPath: socketPath, app: args.first, mode: mode)
case .wait:
    Wait.run(socketPath: socketPath, app: invocation.waitApp, timeout: invocation.waitTimeout,
             command: invocation.program, mode: mode)
case .run: Run.run(socketPath: socketPath, app: invocation.waitApp!, command: invocation.program)
case .prompts: ask("PROMPTS", human: Render.prompts, terse: Terse.prompts)
case .decide:
    ask((["DECIDE"] + args + (invocation.once ? ["--once"] : [])).joined(separator: " "), human: Render.decided) {
        Terse.lines(Terse.decided($0))
    }
case .forget:
    ask((["FORGET"] + args).joined(separator: " "), human: Render.forgotten) { Terse.lines(Terse.forgotten($0)) }
case .agent: invocation.notify ? NotifyAgent.run(socketPath: socketPath) : Agent.run(socketPath: socketPath)
case .scopes: Scopes.run(socketPath: socketPath)
case .decisions: ask("DECISIONS", human: Render.decisions, terse: Terse.decisions)
case .metrics: Metrics.run(socketPath: socketPath, output: invocation.output, mode: mode)
case .usage:
    if args.first == "reset" {
        ask((["RESET-USAGE"] + args.dropFirst()).joined(separator: " "), human: Usage.resetHuman) {
            Terse.lines(Usage.resetTerse($0))
        }
    }
    ask((["USAGE"] + args).joined(separator: " "), human: Usage.human, terse: Usage.terse)
case .report:
    switch args.first {
    case "clear"?: ask((["RESET-REPORT"] + args.dropFirst()).joined(separator: " "), human: Report.clearedHuman) {
            Terse.lines([("cleared", Terse.value($0["cleared"]))])
        }
    case "on"?, "off"?:
        ask("KEEP-REPORT " + (args.first == "on" ? "yes" : "no"), human: Report.keptHuman) { Terse.lines(Report.keptTerse($0)) }
    default: ask((["REPORT"] + args).joined(separator: " "), human: Report.human, terse: Report.terse)
    }
case .ping: ask("PING", human: { _ in "pong\n" }, terse: { _ in "pong\n" })
case .help: Screen.out(Help.overview())   // Invocation turns `help [COMMAND]` into .help(_) above
}
