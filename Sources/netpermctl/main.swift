import Glibc
import NetpermCore
import NetpermIO

// netpermctl: the command-line client. Exit codes: 0 ok, 1 the daemon answered with an error (or `check`
// found one), 2 usage error, 3 the daemon is not running or cannot be reached.

let usage = """
    usage: netpermctl [--socket PATH] [--json] COMMAND [ARGS]
    commands:
      status          the daemon's state: readiness, links, network, policy generation
      links           every link with its kind, state and default routes
      query [APP]     may APP (default: this process's app) use the network now, and if not, why
      apps            every app in the policy with its verdict (privileged)
      reload          reload the policy now (privileged)
      check [PATH]    validate a policy file and its drop-ins offline (default /etc/netpermd/netpermd.conf)
      monitor [APP]   follow link, app and policy events (reconnects when the daemon restarts)
      wait [--app APP] [--timeout SECONDS] [-- COMMAND ARGS...]
                      wait until the app may use the network, then run COMMAND (or exit 0)
      prompts         the open prompts (privileged)
      decide APP KIND allow|deny [--once]
                      answer for an app and kind set to ask (privileged)
      forget APP [KIND]
                      remove stored decisions (privileged)
      agent           answer prompts on the terminal (or from a pipe), one at a time (privileged)
      ping            check that the daemon answers
    options:
      --socket PATH   control socket (default /run/netpermd/netpermd.sock, or $NETPERMD_SOCKET)
      --json          print the daemon's JSON reply instead of a table
    exit codes: 0 ok, 1 error reply or invalid policy, 2 usage, 3 daemon not reachable,
                4 wait timed out (the reason is printed); wait -- COMMAND exits with COMMAND's status
    """

func die(_ message: String, _ code: Int32) -> Never {
    Output.err("netpermctl: \(message)\n")
    exit(code)
}

var socketPath = getenv("NETPERMD_SOCKET").map { String(cString: $0) } ?? "/run/netpermd/netpermd.sock"
var json = false
var rest: [String] = []
var argv = Array(CommandLine.arguments.dropFirst())
var waitApp: String?
var waitTimeout: Double?
var command: [String] = []
while !argv.isEmpty {
    let a = argv.removeFirst()
    switch a {
    case "--":
        command = argv
        argv = []
    case "--app":
        guard !argv.isEmpty else { die("--app needs an app id", 2) }
        waitApp = argv.removeFirst()
    case "--timeout":
        guard let v = argv.first, let t = Processor.parseSeconds(v) else { die("--timeout needs seconds, e.g. 30", 2) }
        argv.removeFirst()
        waitTimeout = Double(t) / 1e6
    case "--socket":
        guard !argv.isEmpty else { die("--socket needs a path", 2) }
        socketPath = argv.removeFirst()
    case "--json": json = true
    case "--once": rest.append(a)
    case "-h", "--help": Output.out(usage + "\n"); exit(0)
    default:
        if a.hasPrefix("--") { die("unknown option '\(a)'\n\(usage)", 2) }
        rest.append(a)
    }
}
guard let verb = rest.first else { Output.err(usage + "\n"); exit(2) }
let args = Array(rest.dropFirst())
if !command.isEmpty && verb != "wait" { die("'-- COMMAND' is only for wait", 2) }
if (waitApp != nil || waitTimeout != nil) && verb != "wait" { die("--app and --timeout are only for wait", 2) }

func needArgs(_ range: ClosedRange<Int>) {
    guard range.contains(args.count) else { die("wrong number of arguments for '\(verb)'\n\(usage)", 2) }
}

let request: String
let render: (JSON) -> String
switch verb {
case "status": needArgs(0...0); request = "STATUS"; render = Render.status
case "links": needArgs(0...0); request = "LINKS"; render = Render.links
case "ping": needArgs(0...0); request = "PING"; render = { _ in "pong\n" }
case "query": needArgs(0...1); request = (["QUERY"] + args).joined(separator: " "); render = Render.query
case "apps": needArgs(0...0); request = "APPS"; render = Render.apps
case "reload": needArgs(0...0); request = "RELOAD"; render = Render.reload
case "check": needArgs(0...1); check(args.first ?? "/etc/netpermd/netpermd.conf")
case "prompts": needArgs(0...0); request = "PROMPTS"; render = Render.prompts
case "decide": needArgs(3...4); request = (["DECIDE"] + args).joined(separator: " "); render = Render.decided
case "forget": needArgs(1...2); request = (["FORGET"] + args).joined(separator: " "); render = Render.forgotten
case "agent": needArgs(0...0); Agent.run(socketPath: socketPath)
case "monitor": needArgs(0...1); Monitor.run(socketPath: socketPath, app: args.first, json: json)
case "wait": needArgs(0...0); Wait.run(socketPath: socketPath, app: waitApp, timeout: waitTimeout, command: command, json: json)
default: die("unknown command '\(verb)'\n\(usage)", 2)
}

let conn: Connection
do { conn = try Connection(path: socketPath) } catch {
    die("cannot reach netpermd at \(socketPath): \(error) (is the daemon running?)", 3)
}
let line: String
do {
    guard let l = try conn.request(request) else { die("netpermd closed the connection without answering", 3) }
    line = l
} catch { die("lost the connection to netpermd: \(error)", 3) }

let reply: JSON
do { reply = try JSONParser.parse(line) } catch { die("unreadable reply from netpermd: \(line)", 1) }
if json { Output.out(line + "\n") }
guard reply["ok"]?.boolValue == true else {
    if !json {
        die("\(reply["error"]?.stringValue ?? "error"): \(reply["message"]?.stringValue ?? line)", 1)
    }
    exit(1)
}
if !json { Output.out(render(reply)) }
exit(0)
