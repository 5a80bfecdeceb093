# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 23, an installed app started where dbus-daemon starts D-Bus-activated apps: exec -> the daemon's decision
to give it a scope (BENCHMARKS.md). The scope itself and the first datagram refused are not measured here: the
bench has no user manager to make the scope."""

import os
import subprocess

from ..common import TPUT_UID, BenchError, fmt, log, triple
from .f22_execload import EXEC_APP

PHASE = "execfound"


class ExecFoundFigure:
    def bench_execfound(self):
        """23: exec of an identified app (issue 47). A user manager's tree of the bench's own at the root of the
        hierarchy (npbench-PID-exec.slice/npbench-PID-user.slice/user@UID.service/session.slice/dbus.service, where
        Debian 12's dbus-daemon forks D-Bus-activated apps); the app's program started there, and the time until the
        daemon's log says which scope it asks the user's manager for. No user manager answers: the daemon's request
        fails at once (no /run/user/UID/systemd/private), which the figure does not include."""
        c = self.c
        self.exec_setup()
        root = os.path.join(self.cgroup_root(), f"npbench-{os.getpid()}-exec.slice")
        dbus = os.path.join(root, f"npbench-{os.getpid()}-user.slice", f"user@{TPUT_UID}.service", "session.slice",
                            "dbus.service")
        os.makedirs(dbus)
        d = None
        try:
            d, sock = self.start_exec_daemon("exec-found", True)
            log(f"execfound: {c['exec_rounds']} starts of {EXEC_APP}'s program in a session's dbus.service")
            out = self.tool_json([self.tool("execfound"), dbus, self.exec_program,
                                  os.path.join(self.dir, "netpermd-exec-found.log"), str(c["exec_rounds"]),
                                  str(c["exec_gap_ms"]), "2000"], timeout=c["exec_rounds"] * 3 + 60, name="execfound")
            metrics = self.exec_metrics(sock)
            self.stop(d)
        finally:
            if d and d.poll() is None:
                d.kill()
                d.wait()
            p = dbus
            while p != os.path.dirname(root):
                try:
                    os.rmdir(p)
                except OSError as e:
                    log(f"warning: {p}: {e}")
                p = os.path.dirname(p)
        out["found"] = metrics.get("netpermd_process_exec_apps_found_total", 0)
        if out["missed"] or out["found"] < out["rounds"]:
            raise BenchError(f"of {out['rounds']} starts of the app, {out['missed']} never got a scope asked for "
                             f"(the daemon found {out['found']})")
        self.results["execfound"] = out


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "execfound" in r:
        e = r["execfound"]
        f = e["found_us"]
        rows.append((f"23 exec of an installed app's program in a session's dbus.service -> the daemon asks its "
                     f"user's manager for a scope ({e['rounds']} starts) (ms)", triple(f, "ms"), "", 
                     f"max {fmt(f['max'], 'ms')} ms; scope made and first datagram refused: not measured (no user "
                     "manager in the bench)", "p99 < 20 ms (exec -> in its scope, refused)",
                     target("exec of an identified app -> its scope asked for, p99 < 20 ms (the scope and the refusal "
                            "not measured)", f["p99"] < 20000, f"{fmt(f['p99'], 'ms')} ms")))
    return rows
