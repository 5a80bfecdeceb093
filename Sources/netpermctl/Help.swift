// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// `netpermctl help [COMMAND]`: the text administrators read first, and what the man page follows.
enum Help {
    static func overview() -> String {
        var out = "usage: netpermctl [OPTIONS] COMMAND [ARGS]\n\n"
            + "Asks netpermd whether an app may use the network now, and if not, why.\n\ncommands:\n"
        for c in Command.allCases {
            let synopsis = "  " + c.synopsis
            out += synopsis.count < 25
                ? synopsis + String(repeating: " ", count: 25 - synopsis.count) + c.summary + "\n"
                : synopsis + "\n" + String(repeating: " ", count: 25) + c.summary + "\n"
        }
        return out + """

            options (before or after the command, never after --):
              --socket PATH   control socket (default $NETPERMD_SOCKET, else /run/netpermd/netpermd.sock)
              -j, --json      print the daemon's JSON replies as they are, one object a line
              -t, --terse     for scripts: no headers or alignment; tables one line per row, fields
                              separated by ':', else key:value lines; ':' and '\\' in values escaped
                              with '\\' (the fields: netpermctl help COMMAND)
              -h, --help      this help; after a command, that command's
              --version       print netpermctl's version and exit

            exit codes: 0 ok, 1 the daemon answered with an error (or check found one), 2 usage error,
              3 daemon not reachable, 4 wait (or run's wait for the rules) timed out, 5 run could not start
              its scope, 6 agent --notify found no notification server that shows actions, 7 agent may
              answer no prompts (UserDecisions=no); wait -- COMMAND and run exit with COMMAND's status

            'netpermctl help COMMAND' shows one command's usage, description and -t fields.

            """
    }

    static func usage(_ c: Command) -> String { "usage: netpermctl \(c.synopsis)\n" }

    static func command(_ c: Command) -> String {
        usage(c) + "\n" + details(c) + "\n\n" + terse(c) + "\n"
    }

    static func details(_ c: Command) -> String {
        switch c {
        case .status:
            return """
                The daemon's state: its version; whether it is ready (its first look at the links taken and
                the policy loaded); how many links it sees; whether the network is available (a link other
                than loopback is usable) and which link is the primary one; how many agents answer prompts;
                the policy's generation (how many successful loads), number of apps and warnings (each
                listed); the error of the last reload, while it failed and an older policy is still in
                force; enforcement: its mode, its state and, when loading the rules failed, why; and usage
                counting: off, or its state and period, how many apps have a budget and how many used it up.
                """
        case .links:
            return """
                Without IFACE, one row per link: index, name, kind, metered, state, the families with a default
                route and its metric, whether the link is usable, and its first address (+N for the others).
                The state is off (admin down), no-carrier, carrier (up, no default route), routable (up, with a
                default route), or the kernel's operstate when it is neither up nor unknown (e.g. dormant).
                With IFACE, that link in detail: how its kind was decided, admin state, carrier, operstate,
                every address, default routes, and if it is not usable, why. A link is usable when it is admin
                up, has carrier and has a default route.
                """
        case .query:
            return """
                May APP use the network now? If not, why: no usable network, every usable link is of a kind
                APP is denied, a decision is awaited, or the kernel routes its traffic by a link it may not
                use (and which link it could bind to instead). Each permission says where it comes from when
                the policy does not: (decided), (once), or (no agent) for an ask with nobody to ask, which
                counts as a deny. Whether the kernel enforces it, and if not, why. Without APP, the app this
                program is taken for (by its executable, unit or user), with what the kernel says about it;
                naming another app needs root or the policy's admin group.
                """
        case .apps:
            return """
                Every app with its verdict and its five permissions (the four kinds and metered), and its
                name from its desktop file. Root and the admin group: every [App] of the policy, the desktop
                apps running and those installed for everyone. Anyone else: their own apps, as their uid has
                them, and the desktop apps installed for everyone and for them (docs/APPS.md).
                """
        case .reload:
            return """
                Reloads the configuration and its drop-ins now, and prints the new generation with the
                policy's warnings, as check does. When they are invalid, the error is printed, the exit status
                is 1, and the previous policy stays in force. Needs root or the admin group.
                """
        case .check:
            return """
                Validates a configuration file and its drop-ins (PATH.d/*.conf) with the daemon's own parser,
                without asking the daemon: every error and warning, then a summary. PATH defaults to
                /etc/netpermd/netpermd.conf, which may be missing, as for the daemon (built-in defaults); a
                PATH given must exist. PATH may be - (standard input) or a pipe, read to its end (at most
                16 MiB, as for a file). Exits 1 when the policy is invalid.
                """
        case .monitor:
            return """
                Follows the daemon's events: the current state first, then each change, old -> new:
                  [5] wlan0 (wifi): carrier on -> off, usable yes -> no
                  [6] app updater: yes, via wlan0 (wifi) -> no: denied on wwan
                  [7] policy: generation 3 -> 4, 12 apps
                Links that come and go say so (link added, link removed); a failed reload says why and which
                generation stays in force. With APP, only that app's verdict, with every link and policy
                change. Reconnects when the daemon restarts, starting again from its state. Ctrl-C stops it.
                """
        case .wait:
            return """
                Waits until the app may use the network (the app this program is taken for, or with --app a
                policy app, which needs root or the admin group), then runs COMMAND in its place, or exits 0.
                Without --timeout it waits for as long as it takes; SECONDS may have a fraction (0.5) and is
                below 100000000, as the daemon takes it. When the time-out passes it exits 4 and says why the app
                may not use the network. While the daemon cannot be reached because it is not running (yet),
                it keeps trying within the time-out.
                Meant for ExecStartPre= of services that need the network.
                """
        case .run:
            return """
                Runs COMMAND as app APP of the policy, so that with [Enforcement] Mode=block the kernel enforces
                APP's permissions for it and its children, whatever APP's keys (an app matched only by
                Executable= has no other way into the kernel's rules). netpermctl moves itself into a new
                transient scope, app-netpermd-APP-TAG.scope, through the caller's own service manager over
                D-Bus (the system's as root, else the user's own), checks that netpermd now takes it for APP,
                waits (at most 10 s) until the kernel's rules name the scope, and execs COMMAND: its exit
                status, signals and terminal are COMMAND's. Root's scope is a
                system unit; a user's is their own unit, which can only narrow what their uid may do. A user
                needs their user manager running (user@UID.service: while logged in, or after loginctl
                enable-linger) and XDG_RUNTIME_DIR set as a login session sets it (/run/user/UID). Exits 1
                when APP is not in the policy, 3 when netpermd cannot be reached, 4 when the rules did not
                name the scope within 10 s, 5 when no service manager could start the scope (saying what
                was tried).
                """
        case .prompts:
            return """
                The open prompts: apps that asked about themselves (or whose traffic the kernel rejected) while
                the only usable links they might use are kept off by kinds set to ask for them, undecided, and an
                agent was there to be asked. One prompt per app asks about every such kind at once. Root and the
                admin group see every prompt; with [Defaults] UserDecisions=yes (the default) any other user
                sees those of their own processes.
                """
        case .decide:
            return """
                Answers for APP and KIND (wifi, wwan, ethernet or other; metered: may APP use metered links;
                roaming: may APP use a modem while it roams abroad) where the policy says ask: kept in the
                daemon's state directory, or with --once only until the
                daemon restarts or the policy changes. Open prompts for that app and kind close. Root and the
                admin group decide for everyone; with [Defaults] UserDecisions=yes any other user decides for
                their own processes only (a decision for everyone wins over it).
                """
        case .forget:
            return """
                Removes APP's stored and --once decisions, for KIND (a kind, metered or roaming) or for every
                kind: as root or the admin group, everyone's and every user's own; as any other user, their own.
                """
        case .decisions:
            return """
                Every decision: app, kind (or metered, or roaming), allow or deny, stored or until the daemon
                restarts or the policy changes (--once), and for whom: everyone, or one uid's own processes. Root
                and the admin group see them all, any other user their own (with [Defaults] UserDecisions=yes).
                """
        case .scopes:
            return """
                Makes the scopes netpermd wants for this user's apps found by what they run (a D-Bus-activated
                app in dbus.service, an app a desktop started without a unit, an installed app typed in a
                terminal): each in app-netpermd-ID-PID.scope of this user's own service manager, as GNOME Shell
                makes the scopes of the apps it starts, so that the kernel's rules name it. netpermd under its
                shipped unit cannot reach a user's manager; netpermd-scopes.service (a user unit) runs this in
                every session. Runs until netpermd closes the connection (exit 3).
                """
        case .agent:
            return """
                Registers with the daemon as an agent and asks, one prompt at a time, whether an app may use the
                kinds of network it would use now (its link's kind and, on a metered link, metered links),
                naming the app, who asked (its executable or unit, or its first blocked connection) and the
                link. One key answers: y allow, n not this kind (Wi-Fi only, for WWAN), o allow once (until the
                daemon restarts or its policy changes), s skip (the prompt stays open until it expires). A
                question whose prompt expires, is answered elsewhere or whose asker exits is taken off the
                screen; a key that comes too late is refused by the daemon and stores nothing. Answers may come
                from a pipe. Ctrl-D (the end of input) or Ctrl-C stops it; an agent that stops mid-question
                leaves its prompt open for the next.
                With --notify, prompts are desktop notifications on the session bus
                (org.freedesktop.Notifications), their choices as their buttons (a click on the body
                grants nothing): at most three at once, picked in turn by uid, and one that says how
                many others wait; each closed when its prompt closes and when the agent stops (a killed
                agent's by the next one), shown again by a notification server that restarts;
                without a notification server that shows actions it says so and exits 6.
                The netpermd-agent.service user unit runs it in graphical sessions. It asks a person: -t and
                --json are refused (a script subscribes to prompts itself: SUBSCRIBE prompts, then ANSWER).
                Root and the admin group answer for everyone; with [Defaults] UserDecisions=yes any other user
                answers the prompts of their own processes, for their own uid.
                """
        case .metrics:
            return """
                The daemon's counters and gauges in Prometheus' text format (docs/METRICS.md lists each):
                links by kind, metered and usable; the policy's apps by the reason of their verdict; prompts
                raised, answered and expired; decisions; enforcement; connections and subscribers; policy
                loads. With --output FILE, written to FILE.tmp and renamed over FILE (mode 0644), so that a
                reader such as node_exporter's textfile collector never sees half of it. Needs root or the
                admin group.
                """
        case .usage:
            return """
                What each app sent and received, per kind of link and whether it was metered, this period, the
                last one and since the app's last reset, with each metered budget (MeteredBudget=): how much of it
                is used, and whether the kernel enforces it. Counted in the kernel with [Usage] Count=yes
                (docs/USAGE.md). Without APP, your own apps (the app this program is taken for, and those whose
                User= is you); root and the admin group see every app and other processes, and may name any
                app. usage reset [APP] starts APP's counts of this period (with nothing named, everyone's) from
                zero and opens a used-up budget again; it needs root or the admin group.
                """
        case .report:
            return """
                The privacy report (docs/PRIVACY.md): for each app, the destinations it reached over the days kept
                ([Report] Days=), by the name the app itself resolved where the machine can know it (else the
                address), with the kind of link, metered or roaming, the first and last time, the connections,
                the bytes where usage is counted, and what was refused (denied, waiting for an answer, budget).
                Without APP, your own apps; root and the admin group see every app. report on records your own
                apps (off until you turn it on, and only while the admin has [Report] Enabled=yes); report off
                stops and deletes them; report clear [APP] deletes your apps' entries (root and the admin group:
                anyone's, or every app's).
                """
        case .ping:
            return "Checks that the daemon answers: prints pong."
        case .help:
            return "Every command with a summary, or one command's usage and description."
        }
    }

    /// The -t fields, for scripts: what Terse+Fields.swift prints.
    static func terse(_ c: Command) -> String {
        switch c {
        case .status:
            return """
                With -t, key:value lines: version, ready (yes|no), agents, links, available (yes|no), primary,
                primary-kind, primary-over (the carrier of a stacked link or tunnel, else empty), policy-generation,
                policy-apps, policy-error (empty unless the last reload failed), policy-warnings,
                enforcement-mode (off, block, steer), enforcement-state (off, applying, enforcing, failed),
                enforcement-error, steering-state and steering-error (empty unless Mode=steer), usage-counting
                (yes|no), usage-state (off, applying, counting, failed), usage-error.
                """
        case .links:
            return """
                With -t, one line per link:
                  index:name:kind:metered:state:default-route:metric:usable:addresses
                and with IFACE, key:value lines: index, name, kind, classified-by, over (the link whose kind a
                stacked link or tunnel took, else empty), metered, metered-by (config, networkmanager, kind,
                tethering, dhcp or default), state, admin-up, carrier, operstate, default-route, metric, usable,
                unusable-because, addresses, ssid, bssid (the Wi-Fi network, empty when none), roaming (yes, no,
                empty when unknown), roaming-by (config or modemmanager), connection and connection-type
                (NetworkManager's active connection, empty when none).
                default-route lists ipv4 and ipv6 when there is one; unusable-because lists admin-down,
                no-carrier and no-default-route; addresses lists every address. Lists are separated by ','.
                """
        case .query:
            return """
                With -t, key:value lines: app, matched-by, available, reason, via, via-kind, via-metered, via-over,
                denied-kinds, pending-kinds, the permissions wifi, wwan, ethernet, other, metered (allow, deny,
                ask), where each comes from: wifi-source, wwan-source, ethernet-source, other-source,
                metered-source (policy, decision, once, user-decision, user-once, no-agent), where the kernel
                sends its traffic per family: egress-ipv4 (the link, empty when none), egress-ipv4-blocked
                (blackhole, unreachable, prohibit), egress-ipv4-usable, egress-ipv4-allowed, and the same for
                ipv6; bind-to and bind-to-kind (the link to bind to when routed-elsewhere); enforced (yes|no),
                enforced-why; the metered budget: budget (bytes, empty without one), budget-used, budget-exhausted,
                budget-enforced; who asked: pid, uid, executable, unit, problem (empty when APP is named); and
                roaming: via-roaming, roaming (the permission), roaming-source.
                reason is ok, no-network, routed-elsewhere, denied, budget-exhausted, awaiting-decision or starting;
                metered-source may also be budget (the budget is used up).
                """
        case .apps:
            return """
                With -t, one line per app, these fields of query -t separated by ':':
                  app available reason via via-kind via-metered denied-kinds pending-kinds
                  wifi wwan ethernet other metered
                """
        case .reload:
            return "With -t, key:value lines: policy-generation, policy-apps, policy-warnings."
        case .check:
            return """
                With -t, one line per error or warning: file:line:section:severity:message (line and section
                empty for a whole file), nothing else; with --json, one object: ok, path, files, defaults,
                apps, interfaces, errors, warnings and findings, each {file, line, section, severity, message}.
                """
        case .monitor:
            return """
                With -t, one line per event: SEQ:EVENT:SUBJECT, then FIELD:OLD:NEW for each field that changed.
                EVENT is link, link-added, link-removed, app, policy, stopping, resync or overflow (which has no
                SEQ);
                SUBJECT is the link's or the app's name, empty for the others. The FIELDs of links are those of
                links -t IFACE; of apps, those of query -t from available to metered-source; of the policy,
                policy-generation, policy-apps and policy-error. The snapshot that starts each connection is a
                link line per link, an app line per app and a policy line, each with every field and an empty
                OLD, as is link-added; link-removed, stopping and overflow have no fields. A resync (events were
                lost) is SEQ:resync:WHY[:DROPPED], then a line for each link, app or policy that differs from
                what the monitor knew, with the resync's SEQ.
                """
        case .wait:
            return """
                With -t, the verdict as query -t prints it, once the app may use the network or when the
                time-out passes (then nothing on stderr).
                """
        case .run:
            return "-t does not apply: COMMAND's own output is all there is."
        case .prompts:
            return """
                With -t, one line per prompt: id:app:kinds:link:metered:executable:unit:uid (kinds separated by
                ',').
                """
        case .decisions:
            return "With -t, one line per decision: app:kind:decision:once:for-uid (empty for everyone)."
        case .decide:
            return """
                With -t, key:value lines: app, kind, decision, once, overridden-by-policy (yes when the policy
                sets this kind and wins), for-uid (empty: for everyone), then the app's verdict as query -t prints
                it from available to metered-source.
                """
        case .forget:
            return "With -t, key:value lines: forgotten (yes|no), app, kind (empty for every kind), for-uid."
        case .agent:
            return "Asks and answers in words; -t and --json change nothing."
        case .scopes:
            return "Prints nothing but failures (on standard error); -t and --json change nothing."
        case .metrics:
            return "Prints the same text with -t; --json prints the daemon's reply, the text in its metrics member."
        case .report:
            return """
                With -t, one line per app and destination:
                  app:uid:host:address:port:protocol:kind:metered:roaming:first:last:connections:bytes:denied:
                  ask:budget
                (one line, wrapped here). uid is empty for an app that is no one person's; first and last are
                seconds since the epoch. report on|off -t prints key:value lines: yours, enabled.
                """
        case .usage:
            return """
                With -t, one line per app, period and kind of link:
                  app:period:kind:metered:sent-bytes:received-bytes:sent-packets:received-packets:budget:
                  budget-used:roaming:uid
                (one line, wrapped here). period is current, previous or since_reset; an app that used nothing
                has one current line with kind, metered and roaming empty; budget and budget-used are empty
                without a budget; roaming says whether the link was roaming (counted apart); other processes'
                lines have an empty app. uid is empty but on the lines of a user's own app (a desktop app, the
                app of a unit of their own), which come last and are parts of their uid's lines, not more.
                usage reset -t prints key:value lines: reset (the app, empty for every app) and at (when, in
                seconds since the epoch).
                """
        case .ping:
            return "Prints pong with -t too."
        case .help:
            return "Help is the same with -t."
        }
    }

    static var version: String { "netpermctl \(NetpermVersion.version)\n" }
}
