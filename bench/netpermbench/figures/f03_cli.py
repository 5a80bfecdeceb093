# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 3, `netpermctl query APP`: one whole process, beside a socat one-shot (BENCHMARKS.md)."""

import os
import shutil

from ..common import APP, log, triple

PHASE = "cli"


class Cli:
    def bench_cli(self):
        c = self.c
        log(f"one-shot CLI: {c['cli']} netpermctl and socat processes")
        qfile = os.path.join(self.dir, "query.txt")
        with open(qfile, "w") as f:
            f.write(f"QUERY {APP}\n")
        out = os.path.join(self.dir, "cli.out")
        ctl = self.tool_json([self.tool("spawnloop"), str(c["cli"]), "/dev/null", out, "--",
                              os.path.join(self.bin, "netpermctl"), "--socket", self.sock, "query", APP])
        socat = self.tool_json([self.tool("spawnloop"), str(c["cli"]), qfile, out, "--", shutil.which("socat"),
                                "-t", "2", "-", f"UNIX-CONNECT:{self.sock}"])
        self.results["cli"] = {"netpermctl": ctl, "socat": socat}


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "cli" in r:
        cli = r["cli"]
        med = cli["netpermctl"]["wall_us"]["median"]
        rows.append(("3 `netpermctl query APP`, one process (ms)", triple(cli["netpermctl"]["wall_us"], "ms"),
                     "socat one-shot: " + triple(cli["socat"]["wall_us"], "ms"),
                     f"median x{med / cli['socat']['wall_us']['median']:.2f}", "< 5 ms a process",
                     target("netpermctl query < 5 ms", med < 5000, f"median {med / 1000:.2f} ms")))
    return rows
