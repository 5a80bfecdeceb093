import Glibc
import NetpermCore
import NetpermIO

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
    Output.out(Help.version)
    exit(.ok)
case .help(nil):
    Output.out(Help.overview())
    exit(.ok)
case let .help(c?):
    Output.out(Help.command(c))
    exit(.ok)
case let .run(c):
    command = c
}

let socketPath = invocation.socketPath
let args = invocation.args
let json = invocation.json

/// Asks once and prints the reply: as it is with --json, else as `render` puts it.
func ask(_ request: String, _ render: (JSON) -> String) -> Never {
    let (line, reply) = Exchange.run(request, socketPath: socketPath, json: json)
    Output.out(json ? line + "\n" : render(reply))
    exit(.ok)
}

switch command {
case .status: ask("STATUS", Render.status)
case .links:
    let (line, reply) = Exchange.run("LINKS", socketPath: socketPath, json: json)
    guard let name = args.first else {
        Output.out(json ? line + "\n" : LinkText.table(reply))
        exit(.ok)
    }
    // LINKS has every link: one is picked here, so the protocol needs no verb for it.
    guard let link = reply["links"]?.arrayValue?.first(where: { $0["name"]?.stringValue == name }) else {
        die("no link named '\(name)'", .failed)
    }
    Output.out(json ? link.encoded() + "\n" : LinkText.detail(LinkView(link)))
    exit(.ok)
case .query: ask((["QUERY"] + args).joined(separator: " "), Render.query)
case .apps: ask("APPS", Render.apps)
case .reload: ask("RELOAD", Render.reload)
case .check: check(args.first ?? "/etc/netpermd/netpermd.conf")
case .monitor: Monitor.run(socketPath: socketPath, app: args.first, json: json)
case .wait:
    Wait.run(socketPath: socketPath, app: invocation.waitApp, timeout: invocation.waitTimeout,
             command: invocation.program, json: json)
case .prompts: ask("PROMPTS", Render.prompts)
case .decide: ask((["DECIDE"] + args + (invocation.once ? ["--once"] : [])).joined(separator: " "), Render.decided)
case .forget: ask((["FORGET"] + args).joined(separator: " "), Render.forgotten)
case .agent: Agent.run(socketPath: socketPath)
case .ping: ask("PING") { _ in "pong\n" }
case .help: Output.out(Help.overview())
}
