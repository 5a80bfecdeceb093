// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermCore

/// Command-line options of netpermd.
public struct Options: Sendable {
    public var socketPath = "/run/netpermd/netpermd.sock"
    public var configPath = "/etc/netpermd/netpermd.conf"
    public var configGiven = false
    public var stateDir = "/var/lib/netpermd"
    public var sysfsRoot = "/sys"
    /// Where classification reads PPP sessions and pppd's descriptors, and pppd's and networkd's run-time files.
    public var procRoot = "/proc"
    public var runRoot = "/run"
    public var logLevel = Priority.info
    /// SO_RCVBUF of the netlink event socket; tests shrink it to force overruns.
    public var netlinkReceiveBuffer: Int32 = 4 << 20
    /// How long a subscriber that fell behind may take to catch up before it is disconnected.
    public var subscriberTimeoutSeconds: UInt64 = 30

    /// Connections at once, everyone's together (fewer if the descriptor limit leaves less room).
    public var maxConnections = 16384
    /// Connections at once per uid other than root and the daemon's own.
    public var maxConnectionsPerUID = 256
    /// `--remove-rules`: remove what enforcement left in the kernel and exit.
    public var removeRules = false
    /// `--clock-offset-file PATH`, for tests: seconds added to the wall clock, read again before each reading of
    /// the usage counters, so that a test moves time to the next period.
    public var clockOffsetFile: String?
    /// `--process-events-netns PATH`, for tests whose daemon runs in a network namespace of its own: the process
    /// connector answers only in the initial one, whose /proc/PID/ns/net this names.
    public var processEventsNetns: String?

    public static let usage = """
        usage: netpermd [--socket PATH] [--config PATH] [--state-dir PATH] [--log-level LEVEL] [--sysfs PATH]
                        [--proc PATH] [--run PATH] [--netlink-rcvbuf BYTES] [--subscriber-timeout SECONDS] [--max-connections N]
                        [--max-connections-per-uid N] [--remove-rules] [--clock-offset-file PATH] [--process-events-netns PATH]
                        [--version] [--help]
          --socket PATH      control socket (default /run/netpermd/netpermd.sock)
          --config PATH      configuration file (default /etc/netpermd/netpermd.conf; drop-ins in PATH.d/*.conf)
          --state-dir PATH   where decisions and usage totals are kept (default /var/lib/netpermd)
          --log-level LEVEL  err, warning, notice, info (default) or debug
          --sysfs PATH       sysfs root used for classification (default /sys)
          --proc PATH        proc root classification reads PPP sessions from (default /proc)
          --run PATH         run-time root classification reads pppd pid files and networkd leases from
                             (default /run)
          --netlink-rcvbuf BYTES  receive buffer of the netlink socket (default 4194304)
          --subscriber-timeout SECONDS  how long a subscriber that fell 1 MiB behind may take to read its
                             queue empty before it is disconnected (default 30)
          --max-connections N  clients served at once (default 16384, and never more than the descriptor limit
                             leaves room for); others get a too-many-connections error
          --max-connections-per-uid N  clients one uid may have at once (default 256; root and the daemon's
                             own uid are not limited)
          --process-events-netns PATH  for tests: open the kernel's process events in the network namespace
                             PATH names (the kernel gives them only in the initial one)
          --remove-rules     remove what enforcement and counting left in the kernel (the nft tables,
                             steering's routing rules and tables; a stopped daemon leaves them in force) and exit
          --clock-offset-file PATH  for tests: seconds to add to the wall clock, read from PATH before each
                             reading of the usage counters (to start the next usage period now), then
                             optionally what the machine says of the clock: synchronized, waiting or free
          --version          print the version and exit
          -h, --help         print this help and exit
        """

    public enum ParseResult { case run(Options), exit(Int32, String) }

    public static func parse(_ args: [String]) -> ParseResult {
        var o = Options()
        var i = 0
        func value() -> String? {
            i += 1
            return i < args.count ? args[i] : nil
        }
        while i < args.count {
            let a = args[i]
            switch a {
            case "--socket": guard let v = value() else { return missing(a) }; o.socketPath = v
            case "--config": guard let v = value() else { return missing(a) }; o.configPath = v; o.configGiven = true
            case "--state-dir": guard let v = value() else { return missing(a) }; o.stateDir = v
            case "--sysfs": guard let v = value() else { return missing(a) }; o.sysfsRoot = v
            case "--proc": guard let v = value() else { return missing(a) }; o.procRoot = v
            case "--run": guard let v = value() else { return missing(a) }; o.runRoot = v
            case "--process-events-netns": guard let v = value() else { return missing(a) }; o.processEventsNetns = v
            case "--log-level":
                guard let v = value(), let l = Priority(name: v) else {
                    return .exit(2, "netpermd: --log-level takes err, warning, notice, info or debug\n")
                }
                o.logLevel = l
            case "--netlink-rcvbuf":
                guard let v = value(), let n = Int32(v), n > 0 else {
                    return .exit(2, "netpermd: --netlink-rcvbuf takes a positive number of bytes\n")
                }
                o.netlinkReceiveBuffer = n
            case "--subscriber-timeout":
                guard let v = value(), let n = UInt64(v), n > 0, n <= 86400 else {
                    return .exit(2, "netpermd: --subscriber-timeout takes a number of seconds from 1 to 86400\n")
                }
                o.subscriberTimeoutSeconds = n
            case "--max-connections", "--max-connections-per-uid":
                guard let v = value(), let n = Int(v), n > 0 else {
                    return .exit(2, "netpermd: \(a) takes a positive number\n")
                }
                if a == "--max-connections" { o.maxConnections = n } else { o.maxConnectionsPerUID = n }
            case "--remove-rules": o.removeRules = true
            case "--clock-offset-file": guard let v = value() else { return missing(a) }; o.clockOffsetFile = v
            case "--version": return .exit(0, "netpermd \(DaemonState.version)\n")
            case "-h", "--help": return .exit(0, usage + "\n")
            default: return .exit(2, "netpermd: unknown argument '\(a)'\n" + usage + "\n")
            }
            i += 1
        }
        return .run(o)
    }

    private static func missing(_ flag: String) -> ParseResult { .exit(2, "netpermd: \(flag) needs a value\n") }
}
