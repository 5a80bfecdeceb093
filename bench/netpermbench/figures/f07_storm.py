# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 7, storm: 10,000 link toggles as fast as one socket sends them, to the daemon's view matching the kernel's
(BENCHMARKS.md)."""

import os

from ..common import FANOUT_LINK, WIFI, WIFI_PEER, BenchError, log

PHASE = "storm"


class Storm:
    def bench_storm(self):
        c = self.c
        log(f"storm: {c['storm']} toggles")
        logpath = os.path.join(self.dir, "netpermd.log")
        before = os.path.getsize(logpath)
        res = self.tool_json([self.tool("storm"), self.sock, WIFI_PEER, WIFI, FANOUT_LINK, "10.98.0.1",
                              str(c["storm"])], in_ns=True, timeout=120)
        with open(logpath, errors="replace") as f:
            f.seek(before)
            text = f.read()
        res["daemon_resyncs_after_overrun"] = text.count("reading everything again")
        res["daemon_alive"] = self.ask(self.sock, "PING") == '{"ok":true,"pong":true}'
        if not res["daemon_alive"]:
            raise BenchError("netpermd stopped answering after the storm" + self.daemon_log_tail())
        self.results["storm"] = res


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "storm" in r:
        s = r["storm"]
        conv = s["converge_ms"]
        rows.append((f"7 storm, {s['toggles']} toggles: last toggle -> daemon's view = kernel's (ms)",
                     f"{conv:.1f}", f"kernel's last message: {s['kernel_settle_ms']:.1f}",
                     f"burst {s['burst_ms']:.0f} ms long; marker seen after {s['marker_ms']:.1f}", "< 1000 ms",
                     target("storm converges within 1 s", s["converged"] and conv < 1000, f"{conv:.1f} ms")))
        rows.append(("7 storm: events per toggle", f"{s['events_per_toggle']:.3f} ({s['events']} events)",
                     f"kernel messages: {s['kernel_msgs_per_toggle']:.2f}",
                     f"{s['daemon_resyncs_after_overrun']} overrun resync(s)", "fewer events than toggles",
                     target("storm: fewer events than toggles", s["events"] < s["toggles"],
                            f"{s['events']} events for {s['toggles']} toggles")))
    return rows
