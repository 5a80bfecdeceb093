# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 18, Mode=steer: a main-table route change's daemon CPU with table 200 full, beside it empty
(BENCHMARKS.md)."""

import json
import os

from ..common import TPUT_UID, WIFI, BenchError, log, run

PHASE = "steer"


class Steer:
    def bench_steer(self):
        """18 (issue 26): a route change's daemon CPU in Mode=steer, main-table routes through the steered app's
        allowed link added and deleted in turn (each one copied into steering's table), with 100,000 routes in
        another table (200) beside the same with that table empty, in the same run: steering reads only the main
        table and its own, so the other table's size must not show (target within 2x, as block mode's figure 9)."""
        c = self.c
        n, k = c["big_routes"], c["route_changes"]
        conf = os.path.join(self.dir, "steer.conf")
        sock = os.path.join(self.dir, "steer.sock")
        with open(conf, "w") as f:
            f.write(f"[Interface {WIFI}]\nKind=wifi\n\n[Enforcement]\nMode=steer\n\n"
                    f"[App steered]\nUser={TPUT_UID}\nWWAN=deny\n")
        d = self.start_enforcing(sock, conf)
        main_daemon, self.daemon = self.daemon, d
        try:
            status = json.loads(self.ask(sock, "STATUS"))["enforcement"]
            if status.get("steering", {}).get("state") != "steering":
                raise BenchError(f"Mode=steer is not steering: {status}")
            log(f"steer: {k} main-table changes with an empty table 200, then with {n} routes in it")
            empty = self.route_changes("main", k)
            path = os.path.join(self.dir, "steer-table.batch")
            with open(path, "w") as f:
                for i in range(n):
                    f.write(f"route add 10.{100 + i // 65536}.{(i // 256) % 256}.{i % 256}/32 dev {WIFI} table 200\n")
            run(["ip", "-n", self.ns, "-batch", path], timeout=600)
            self.settle_cpu(d.pid)
            full = self.route_changes("main", k)
            copied = run(["ip", "-n", self.ns, "route", "show", "table", str(28240 + 0x1D)]).stdout
            run(["ip", "-n", self.ns, "route", "flush", "table", "200"], timeout=120)
            self.settle_cpu(d.pid)
        finally:
            self.daemon = main_daemon
            self.stop(d)
            self.remove_rules()
            if os.path.exists(sock):
                os.unlink(sock)
        if WIFI not in copied:
            raise BenchError(f"steering's table does not copy {WIFI}'s routes: {copied!r}")
        self.results["steer"] = {"changes": k, "routes": n, "empty_us_per_change": empty, "full_us_per_change": full}


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "steer" in r:
        st = r["steer"]
        ratio = st["full_us_per_change"] / max(st["empty_us_per_change"], 1e-9)
        rows.append((f"18 Mode=steer: a main-table route change, {st['routes']} routes in table 200: daemon CPU per change (µs)",
                     f"{st['full_us_per_change']:.1f}", f"table 200 empty: {st['empty_us_per_change']:.1f}",
                     f"x{ratio:.2f} ({st['changes']} changes each)", "within 2x",
                     target("steer mode: a route change with 100,000 routes elsewhere within 2x of none", ratio <= 2,
                            f"x{ratio:.2f}")))
    return rows
