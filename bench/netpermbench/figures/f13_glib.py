# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 13, the GLib module: g_network_monitor_get_default(), its RSS and its signal, beside GLib's netlink monitor
(BENCHMARKS.md)."""

import json
import os
import subprocess

from ..common import GIO_MODULES, WIFI, WIFI_PEER, BenchError, fmt, log, stats, triple

PHASE = "glib"


class GLib:
    def bench_glib(self):
        """13: the GLib module in a GLib process against GLib's own netlink monitor, and its signal's latency."""
        c = self.c
        if not os.path.exists(os.path.join(GIO_MODULES, "libgionetpermd.so")):
            raise BenchError(f"{GIO_MODULES}/libgionetpermd.so is missing: build it (make gio-module)")
        env = {k: v for k, v in self.env.items() if k not in ("GIO_EXTRA_MODULES", "GIO_USE_NETWORK_MONITOR")}
        module = dict(env, GIO_EXTRA_MODULES=GIO_MODULES, NETPERMD_SOCKET=self.sock)
        glib = dict(env, GIO_USE_NETWORK_MONITOR="netlink")
        out = {"module": [], "netlink": []}
        log(f"GLib: get_default() and RSS, {c['glib_inits']} processes with the module and as many with GLib's netlink monitor")
        for _ in range(c["glib_inits"]):
            for side, e in (("module", module), ("netlink", glib)):
                r = subprocess.run(["ip", "netns", "exec", self.ns, self.tool("glibmon"), "init"], env=e, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
                if r.returncode != 0:
                    raise BenchError(f"glibmon init ({side}) failed: {r.stderr.strip()[-2000:]}")
                o = json.loads(r.stdout.strip().splitlines()[-1])
                want = "NetpermdNetworkMonitor" if side == "module" else "GNetworkMonitorNetlink"
                if o["type"] != want:
                    raise BenchError(f"glibmon init ({side}): GLib chose {o['type']}, not {want}: {r.stderr[-2000:]}")
                out[side].append(o)
        self.results["glib"] = {side: {"init_us": stats([o["init_us"] for o in v]),
                                       "rss_kb": stats([o["rss_kb_after"] for o in v]),
                                       "rss_kb_before": stats([o["rss_kb_before"] for o in v])}
                                for side, v in out.items()}
        log(f"GLib: verdict change -> network-changed, {c['glib_toggles']} toggles")
        self.results["glib"]["latency"] = self.tool_json(
            ["env", f"GIO_EXTRA_MODULES={GIO_MODULES}", f"NETPERMD_SOCKET={self.sock}", self.tool("glibmon"),
             "latency", self.sock, WIFI_PEER, str(c["glib_toggles"]), str(c["latency_gap_ms"])], in_ns=True,
            timeout=120)
        self.wait_for(lambda: self.kernel_link(WIFI)["operstate"] == "UP", "bwifi0 back up", 5)


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "glib" in r:
        g = r["glib"]
        mi, ni = g["module"]["init_us"], g["netlink"]["init_us"]
        rows.append(("13 GLib: g_network_monitor_get_default() with the module (ms)", triple(mi, "ms"),
                     "GLib's netlink monitor: " + triple(ni, "ms"),
                     f"median x{mi['median'] / max(ni['median'], 0.001):.2f} "
                     f"({mi['median'] / 1000 - ni['median'] / 1000:+.2f} ms)", "", ""))
        mr, nr = g["module"]["rss_kb"], g["netlink"]["rss_kb"]
        rows.append(("13 GLib: RSS of the process after get_default() (MiB)",
                     f"{mr['min'] / 1024:.1f} / {mr['median'] / 1024:.1f} / {mr['p99'] / 1024:.1f}",
                     f"GLib's netlink monitor: {nr['min'] / 1024:.1f} / {nr['median'] / 1024:.1f} / {nr['p99'] / 1024:.1f}",
                     f"extra: median {mr['median'] - nr['median']:+.0f} kB", "", ""))
        lat = g["latency"]
        rows.append(("13 GLib: verdict change -> network-changed (µs)", triple(lat["module_us"], "us"),
                     "the app event read raw: " + triple(lat["raw_us"], "us"),
                     f"added: median {fmt(lat['added_us']['median'], 'us')}, p99 {fmt(lat['added_us']['p99'], 'us')} µs",
                     "", ""))
    return rows
