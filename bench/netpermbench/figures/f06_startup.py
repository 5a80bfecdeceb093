# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 6, start-up: exec to READY=1 and to the first answered query (and the big policy's, figure 8's load time)
(BENCHMARKS.md)."""

import os

from ..common import APP, log, triple

PHASE = "startup"


class Startup:
    def bench_startup(self):
        """6 (and 8's load time): exec to READY=1 and to the first answered query."""
        c = self.c
        sock = os.path.join(self.dir, "startup.sock")
        state = os.path.join(self.dir, "state-startup")
        req = f"QUERY {APP}"
        log("start-up: netpermd, echo baseline, 10,000-app policy")
        self.results["startup"] = self.tool_json(
            [self.tool("startup"), self.ns, str(c["startup_runs"]), sock, req, "--"]
            + self.daemon_cmd(sock, self.small_conf, state), name="startup (netpermd)")
        self.results["startup_echo"] = self.tool_json(
            [self.tool("startup"), self.ns, str(c["startup_runs"]), sock, req, "--", self.tool("echosrv"), sock,
             "330"], name="startup (echo)")
        self.results["startup_big"] = self.tool_json(
            [self.tool("startup"), self.ns, str(c["big_startup_runs"]), sock, f"QUERY {self.big_app}", "--"]
            + self.daemon_cmd(sock, self.big_conf, state), name="startup (10,000 apps)")


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "startup" in r:
        su, se = r["startup"], r["startup_echo"]
        rows.append(("6 start-up: exec -> READY=1 (ms)", triple(su["ready_us"], "ms"),
                     "echo server: " + triple(se["ready_us"], "ms"),
                     f"+{(su['ready_us']['median'] - se['ready_us']['median']) / 1000:.2f} ms", "< 30 ms",
                     target("exec to READY < 30 ms", su["ready_us"]["median"] < 30000,
                            f"median {su['ready_us']['median'] / 1000:.2f} ms")))
        rows.append(("6 start-up: exec -> first answered QUERY (ms)", triple(su["answer_us"], "ms"),
                     "echo server: " + triple(se["answer_us"], "ms"),
                     f"+{(su['answer_us']['median'] - se['answer_us']['median']) / 1000:.2f} ms", "", ""))
    return rows
