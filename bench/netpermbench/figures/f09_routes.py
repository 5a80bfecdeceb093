# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 9, routes: a route change's daemon CPU with a full non-main table, beside an empty one (BENCHMARKS.md)."""

import os
import time

from ..common import APP, WIFI, WIFI_PEER, fmt, log, run, triple

PHASE = "routes"


class Routes:
    def bench_routes(self):
        """9: a route change's cost with a full table in a non-main table, beside an empty one in the same run."""
        c = self.c
        n, k = c["big_routes"], c["route_changes"]
        log(f"routes: {k} changes with an empty table 200, then with {n} routes in it")
        empty = self.route_changes(200, k)
        path = os.path.join(self.dir, "full-table.batch")
        with open(path, "w") as f:
            for i in range(n):
                f.write(f"route add 10.{100 + i // 65536}.{(i // 256) % 256}.{i % 256}/32 dev {WIFI} table 200\n")
        t0 = self.cpu_ns(self.daemon.pid)
        started = time.monotonic()
        run(["ip", "-n", self.ns, "-batch", path], timeout=600)
        self.settle_cpu(self.daemon.pid)
        fill = {"routes": n, "daemon_cpu_ms": (self.cpu_ns(self.daemon.pid) - t0) / 1e6,
                "wall_ms": (time.monotonic() - started) * 1000}
        full = self.route_changes(200, k)
        lat = self.tool_json([self.tool("nllat"), self.sock, WIFI_PEER, WIFI, APP, str(c["route_latency_toggles"]),
                              str(c["latency_gap_ms"])], in_ns=True, timeout=120)
        run(["ip", "-n", self.ns, "route", "flush", "table", "200"], timeout=120)
        self.settle_cpu(self.daemon.pid)
        self.results["routes"] = {"changes": k, "empty_us_per_change": empty, "full_us_per_change": full,
                                  "fill": fill, "latency_full": lat, "rss_kb_full": self.rss_kb(self.daemon.pid)}


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "routes" in r:
        rt = r["routes"]
        ratio = rt["full_us_per_change"] / max(rt["empty_us_per_change"], 0.001)
        rows.append((f"9 route change with {rt['fill']['routes']} routes in table 200: daemon CPU (µs)",
                     f"{rt['full_us_per_change']:.1f}", f"empty table: {rt['empty_us_per_change']:.1f}",
                     f"x{ratio:.2f} ({rt['changes']} changes each)", "within 2x of an empty table",
                     target("route change cost bounded by the table's size", ratio <= 2, f"ratio {ratio:.2f}")))
        rows.append((f"9 adding {rt['fill']['routes']} routes: daemon CPU (ms)", f"{rt['fill']['daemon_cpu_ms']:.0f}",
                     f"the ip -batch: {rt['fill']['wall_ms']:.0f} ms wall", "", "", ""))
        lf = rt["latency_full"]
        rows.append((f"9 event latency with {rt['fill']['routes']} routes in table 200 (µs)", triple(lf["netpermd_us"], "us"),
                     "raw RTMGRP_LINK listener: " + triple(lf["kernel_us"], "us"),
                     f"added: median {fmt(lf['added_us']['median'], 'us')} µs; RSS {rt['rss_kb_full'] / 1024:.1f} MiB",
                     "", ""))
    return rows
