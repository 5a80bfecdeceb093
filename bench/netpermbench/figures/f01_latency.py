# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 1, event latency: a carrier toggle to the link and app events read, beside a raw RTMGRP_LINK listener
(BENCHMARKS.md)."""

from ..common import APP, WIFI, WIFI_PEER, fmt, log, triple

PHASE = "latency"


class Latency:
    def bench_latency(self):
        c = self.c
        log(f"event latency: {c['latency_toggles']} toggles")
        self.results["latency"] = self.tool_json(
            [self.tool("nllat"), self.sock, WIFI_PEER, WIFI, APP, str(c["latency_toggles"]),
             str(c["latency_gap_ms"])], in_ns=True, timeout=120)
        self.wait_for(lambda: self.kernel_link(WIFI)["operstate"] == "UP", "bwifi0 back up", 5)


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "latency" in r:
        lat = r["latency"]
        added = lat["added_us"]
        rows.append(("1 event latency: toggle -> link+app events read (µs)", triple(lat["netpermd_us"], "us"),
                     "raw RTMGRP_LINK listener: " + triple(lat["kernel_us"], "us"),
                     f"added: median {fmt(added['median'], 'us')}, p99 {fmt(added['p99'], 'us')} µs",
                     "added median < 300 µs, p99 < 2 ms",
                     target("event latency", added["median"] < 300 and added["p99"] < 2000,
                            f"added median {added['median']:.1f} µs, p99 {added['p99']:.1f} µs")))
    return rows
