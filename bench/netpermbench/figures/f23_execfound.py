# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 23, an installed app started where dbus-daemon starts D-Bus-activated apps, under a real user manager:
exec -> the app in the scope netpermd had its user's manager make, and exec -> its first datagram over a denied
link refused by the kernel, with the datagrams that passed before (BENCHMARKS.md)."""

import json
import os

from ..common import BenchError, fmt, log, run, stats, triple
from ..usermanager import UserManager
from .f22_execload import EXEC_APP, OTHER_APP

PHASE = "execfound"
# The uid of the bench's user manager (no passwd entry on the host: the manager's mount namespace gives it one).
UM_UID = 4743
# A link the policy calls wwan and denies, both ends in the bench namespace, the peer's neighbour entry static so
# that every datagram leaves at once.
LINK, LINK_PEER, LINK_ADDR, LINK_PROBE, PROBE_PORT = "bxw0", "bxw0p", "10.93.0.1/24", "10.93.0.2", "9"
# The app sends a datagram this often from its exec on.
SEND_US = 200


class ExecFoundFigure:
    def execfound_conf(self):
        path = os.path.join(self.dir, "execfound.conf")
        with open(path, "w") as f:
            f.write(f"[Interface {LINK}]\nKind=wwan\n\n[Enforcement]\nMode=block\n\n[Defaults]\nWWAN=deny\n")
        return path

    def execfound_link(self):
        ipn = ["ip", "-n", self.ns]
        run(ipn + ["link", "add", LINK, "type", "veth", "peer", "name", LINK_PEER])
        run(ipn + ["addr", "add", LINK_ADDR, "dev", LINK])
        for link in (LINK, LINK_PEER):
            run(ipn + ["link", "set", link, "up"])
        run(ipn + ["neigh", "replace", LINK_PROBE, "lladdr", "02:00:5e:00:53:01", "dev", LINK, "nud", "permanent"])

    def bench_execfound(self):
        """23: exec of an identified app (issue 47). A real user manager of UM_UID (UserManager); the app's program
        started as that uid in its session.slice/dbus.service (where Debian 12's dbus-daemon forks D-Bus-activated
        apps), `exec_gap_ms` apart; each start says when it was in its scope and when its first datagram over the
        denied wwan link was refused, from just before its execve. First a quarter of the starts with no other app
        running (the first app a person starts after the policy is loaded), then `exec_rounds` with another app in
        its scope, as on a desktop."""
        c = self.c
        self.exec_setup()
        self.execfound_link()
        manager = UserManager(self.cgroup_root(), self.ns, UM_UID)
        d = None
        try:
            manager.start()
            dbus = manager.make_cgroup("session.slice/dbus.service")
            d, sock = self.start_exec_daemon("exec-found", True, conf=self.execfound_conf(), enforcing=True)
            log(f"execfound: starts of {EXEC_APP}'s program in a real user manager's dbus.service, alone, then with "
                "another app running")
            alone = self.execfound_starts(dbus, max(2, c["exec_rounds"] // 4))
            self.start_other_app(manager, sock)
            starts = self.execfound_starts(dbus, c["exec_rounds"])
            metrics = self.exec_metrics(sock)
            self.stop(d)
            self.remove_rules()
        finally:
            if d and d.poll() is None:
                d.kill()
                d.wait()
            manager.stop()
            # Its own link goes with it: the namespace outlives the figure (`--compare` runs it again there).
            run(["ip", "-n", self.ns, "link", "del", LINK], check=False)
        self.results["execfound"] = execfound_results(starts, alone, metrics)
        self.results["execfound"]["kernel"] = self.kernel_moves(c["exec_rounds"],
                                                                self.results["execfound"]["scoped_us"]["median"])

    def kernel_moves(self, rounds, after_us):
        """The baseline: the kernel alone moving a process, which moved itself at its fork as execfound's app does,
        into a new cgroup `after_us` later (the figure's median exec -> in its scope), `exec_gap_ms` apart (cgmove);
        and whether the hierarchy is mounted `favordynmods` (which spares a move its wait for an RCU grace period)."""
        root = self.cgroup_root()
        with open("/proc/self/mountinfo") as f:
            options = next(line.partition(" - ")[2].split()[2] for line in f
                           if line.partition(" - ")[2].split(" ")[0] == "cgroup2" and line.split(" ")[4] == root)
        parent = os.path.join(root, f"npbench-{os.getpid()}-cgmove.slice")
        os.mkdir(parent)
        try:
            out = self.tool_json([self.tool("cgmove"), parent, str(rounds), str(self.c["exec_gap_ms"]), str(after_us / 1000)],
                                 timeout=rounds + 60, name="cgmove")
        finally:
            for leftover in os.listdir(parent):
                if leftover.startswith("cgmove-"):  # left by a failed run
                    os.rmdir(os.path.join(parent, leftover))
            os.rmdir(parent)
        return {"move_us": out["move_us"], "favordynmods": "favordynmods" in options.split(",")}

    def execfound_starts(self, dbus, rounds):
        out = self.tool_json(["nsenter", f"--net=/run/netns/{self.ns}", self.tool("execfound"), dbus, str(UM_UID),
                              self.exec_program, LINK_PROBE, PROBE_PORT, str(SEND_US), str(rounds),
                              str(self.c["exec_gap_ms"]), "3000"], timeout=rounds * 7 + 60, name="execfound")
        return out["starts"]

    def start_other_app(self, manager, sock):
        """The desktop's other app (OTHER_APP), started by a unit of the session and found by what it runs, like the
        measured one; until the manager stops. While it runs, app.slice is not removed and made again between
        starts, and the rules keep someone off wwan (so they hold the drops of its membership reports, which a unit
        named as it is made needs): as on a desktop, where some app always runs."""
        shell = manager.make_cgroup("session.slice/npbench-shell.service")
        p = self.spawn(["nsenter", f"--net=/run/netns/{self.ns}", "sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"',
                        shell] + manager.as_user([self.exec_other]), log_name="otherapp.log")

        def enforced():
            if p.poll() is not None:
                raise BenchError(f"{OTHER_APP} exited with {p.returncode}")
            return json.loads(self.ask(sock, "STATUS", timeout=5))["enforcement"]["unit_cgroups"] >= 1
        self.wait_for(enforced, f"{OTHER_APP} in its scope and the rules", 20)


def execfound_results(starts, alone, metrics):
    bad = [i for i, s in enumerate(starts + alone) if not s or s["scoped_us"] < 0 or s["refused_us"] < 0]
    if bad:
        raise BenchError(f"of {len(starts + alone)} starts of the app, {len(bad)} were never scoped or never refused "
                         f"(the first: {(starts + alone)[bad[0]]}); the daemon counted {metrics}")
    return {"rounds": len(starts), "send_us": SEND_US,
            "scoped_us": stats([s["scoped_us"] for s in starts]),
            "refused_us": stats([s["refused_us"] for s in starts]),
            "passed": stats([s["passed"] for s in starts]),
            "started_us": stats([s["started_us"] for s in starts]),
            "max_gap_us": stats([s["max_gap_us"] for s in starts]),
            "early_socket_passed": sum(1 for s in starts if s["early_socket_passed"]),
            "alone": {"rounds": len(alone), "scoped_us": stats([s["scoped_us"] for s in alone]),
                      "refused_us": stats([s["refused_us"] for s in alone]),
                      "passed": stats([s["passed"] for s in alone])},
            "scopes_made": metrics.get('netpermd_process_exec_scopes_total{outcome="made"}', 0),
            "starts": starts}


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "execfound" in r:
        e = r["execfound"]
        s, f, p, a = e["scoped_us"], e["refused_us"], e["passed"], e["alone"]
        where = f"({e['rounds']} starts in a real user manager's session.slice/dbus.service, another app running)"
        rows.append((f"23 exec of an installed app's program -> in its app-netpermd scope {where} (ms)",
                     triple(s, "ms"), f"the app's own first instruction: {triple(e['started_us'], 'ms')}",
                     f"max {fmt(s['max'], 'ms')} ms; scopes made: {e['scopes_made']}", "", ""))
        rows.append(("23 the same: exec -> its first datagram over the denied wwan link refused (ms)", triple(f, "ms"),
                     f"no other app running ({a['rounds']} starts): {triple(a['refused_us'], 'ms')}",
                     f"max {fmt(f['max'], 'ms')} ms; one send every {e['send_us']} µs (longest gap: median "
                     f"{fmt(e['max_gap_us']['median'], 'ms')} ms)", "p99 < 20 ms",
                     target("exec of an identified app -> in its scope and its first datagram refused, p99 < 20 ms",
                            f["p99"] < 20000, f"{fmt(f['p99'], 'ms')} ms")))
        k = e["kernel"]
        rows.append(("23 the kernel alone: a just-started process moved into a new cgroup (cgroup.procs) as long "
                     "after its start as the median scope, the same gap apart (ms)", triple(k["move_us"], "ms"), "", f"max {fmt(k['move_us']['max'], 'ms')} ms; "
                     f"the hierarchy {'is' if k['favordynmods'] else 'is not'} mounted favordynmods", "", ""))
        rows.append(("23 the same: datagrams that passed before the refusal, a socket opened for each (what escapes)",
                     f"{p['min']:.0f} / {p['median']:.0f} / {p['p99']:.0f}",
                     f"no other app running: {a['passed']['min']:.0f} / {a['passed']['median']:.0f} / "
                     f"{a['passed']['p99']:.0f}",
                     f"max {p['max']:.0f}; a socket opened at the exec still passed after the refusal in "
                     f"{e['early_socket_passed']} of {e['rounds']} starts", "", ""))
    return rows
