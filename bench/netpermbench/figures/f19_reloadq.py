# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 19, a good client's QUERY during whole-table reloads of 10,000 apps, enforcing (BENCHMARKS.md)."""

import json
import os
import threading
import time

from ..common import BenchError, fmt, log, triple

PHASE = "reloadq"


class ReloadQ:
    def bench_reloadq(self):
        """19 (issue 26): a good client's QUERY round trips while the policy of 10,000 apps is reloaded with
        enforcement on, each reload changing most of the table (every app's permissions moved on: a whole load of
        the rules), beside the same client at rest, in the same run (target p99 under 10 ms, max under 50 ms: issue
        34)."""
        c = self.c
        self.tput_links()
        conf = os.path.join(self.dir, "reloadq.conf")
        sock = os.path.join(self.dir, "reloadq.sock")
        n, seconds = c["big_apps"], c["silent_s"] * 2
        self.enforce_conf(conf, n)
        d = self.start_enforcing(sock, conf)
        try:
            rest = self.paced(sock, "QUERY tputapp", c["rest_s"])
            log(f"reloadq: whole-table reloads of {n} apps for {seconds} s under a good client")
            result = {}
            client = threading.Thread(target=lambda: result.update(self.paced(sock, "QUERY tputapp", seconds)))
            client.start()
            reloads, deadline, rotate = 0, time.monotonic() + seconds, 0
            # RELOAD is answered once the new policy's rules are in force (the loads run off the loop, and STATUS
            # says `enforcing` while the rules in force are being changed); a SIGHUP's reload would need polling.
            while time.monotonic() < deadline:
                rotate += 1
                self.enforce_conf(conf, n, rotate=rotate)
                reply = json.loads(self.ask(sock, "RELOAD", timeout=60))
                if not reply.get("ok"):
                    raise BenchError(f"RELOAD: {reply}")
                reloads += 1
            client.join(timeout=seconds + 60)
        finally:
            self.stop(d)
            self.remove_rules()
            if os.path.exists(sock):
                os.unlink(sock)
        self.results["reloadq"] = {"apps": n + 1, "reloads": reloads, "seconds": seconds, "rest": rest, "during": result}


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "reloadq" in r:
        rq = r["reloadq"]
        d, rest = rq["during"]["rtt_us"], rq["rest"]["rtt_us"]
        rows.append((f"19 {rq['reloads']} whole-table reloads of {rq['apps']} apps, enforcing: good client's QUERY (ms)",
                     triple(d, "ms"), "at rest: " + triple(rest, "ms"), f"max {fmt(d['max'], 'ms')} ms",
                     "p99 < 10 ms, max < 50 ms",
                     target("good client's QUERY p99 < 10 ms, max < 50 ms during whole-table reloads",
                            d["p99"] < 10000 and d["max"] < 50000,
                            f"p99 {d['p99'] / 1000:.1f} ms, max {d['max'] / 1000:.1f} ms")))
    return rows
