import Glibc
import NetpermCore
import NetpermIO

// netpermctl: the command-line client. Exit codes: 0 ok, 1 the daemon answered with an error,
// 2 usage error, 3 the daemon is not running or cannot be reached.

let usage = """
    usage: netpermctl [--socket PATH] [--json] COMMAND
    commands:
      status    the daemon's state: readiness, links, whether the network is available
      links     every link with its kind, state and default routes
      ping      check that the daemon answers
    options:
      --socket PATH   control socket (default /run/netpermd/netpermd.sock, or $NETPERMD_SOCKET)
      --json          print the daemon's JSON reply instead of a table
    """

func die(_ message: String, _ code: Int32) -> Never {
    Output.err("netpermctl: \(message)\n")
    exit(code)
}

var socketPath = getenv("NETPERMD_SOCKET").map { String(cString: $0) } ?? "/run/netpermd/netpermd.sock"
var json = false
var rest: [String] = []
var argv = Array(CommandLine.arguments.dropFirst())
while !argv.isEmpty {
    let a = argv.removeFirst()
    switch a {
    case "--socket":
        guard !argv.isEmpty else { die("--socket needs a path", 2) }
        socketPath = argv.removeFirst()
    case "--json": json = true
    case "-h", "--help": print(usage); exit(0)
    default: rest.append(a)
    }
}
guard let command = rest.first else { Output.err(usage + "\n"); exit(2) }

let request: String
let render: (JSON) -> String
switch command {
case "status": request = "STATUS"; render = Render.status
case "links": request = "LINKS"; render = Render.links
case "ping": request = "PING"; render = { _ in "pong\n" }
default: die("unknown command '\(command)'\n\(usage)", 2)
}
guard rest.count == 1 else { die("\(command) takes no arguments", 2) }

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
if json { print(line) }
guard reply["ok"]?.boolValue == true else {
    if !json {
        die("\(reply["error"]?.stringValue ?? "error"): \(reply["message"]?.stringValue ?? line)", 1)
    }
    exit(1)
}
if !json { Output.out(render(reply)) }
exit(0)
