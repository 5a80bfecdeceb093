# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 4, fan-out: a link toggle to the last subscriber's read, beside a C fan-out loop; the subscribers leaving
at once (BENCHMARKS.md)."""

import json
import os
import subprocess
import time

from ..common import FANOUT_LINK, BenchError, log, triple

PHASE = "fanout"


class Fanout:
    def swarm(self, sock, n):
        c = self.c
        p = self.spawn([self.tool("swarm"), sock, str(n), str(c["fanout_rounds"]), FANOUT_LINK],
                       log_name="swarm.log", stdin=subprocess.PIPE, stdout=subprocess.PIPE, in_ns=True)
        try:
            line = self.read_line(p, 180, "the swarm to connect")
            connected = json.loads(line)
            yield connected
            p.stdin.write("go\n")
            p.stdin.flush()
            result = json.loads(self.read_line(p, 60 + c["fanout_rounds"] * 15, "the fan-out rounds"))
            yield result
        finally:
            if p.poll() is None:
                p.stdin.close()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            if p.returncode not in (0, None):
                raise BenchError(f"swarm exited {p.returncode}; see {self.dir}/swarm.log")

    def read_line(self, p, timeout, what):
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise BenchError(f"timed out waiting for {what}")
        line = p.stdout.readline()
        if not line:
            with open(os.path.join(self.dir, "swarm.log"), errors="replace") as f:
                raise BenchError(f"{what}: the swarm ended early: {f.read()[-2000:]}")
        return line

    def bench_fanout(self):
        out = {}
        fo_sock = os.path.join(self.dir, "fanout.sock")
        for n in self.c["fanout"]:
            log(f"fan-out: {n} subscribers of netpermd")
            g = self.swarm(self.sock, n)
            connected = next(g)
            self.results["rss_kb"][f"subscribers_{n}"] = self.rss_kb(self.daemon.pid)
            res = next(g)
            self.results["rss_kb"][f"subscribers_{n}_after_events"] = self.rss_kb(self.daemon.pid)
            g.close()
            # Every subscriber leaves at once: how long until the daemon answers someone else again.
            t0 = time.monotonic()
            self.wait_for(lambda: self.ask(self.sock, "STATUS", timeout=60).startswith('{"ok":true'),
                          "netpermd after the swarm left", 60)
            res["leave_ms"] = (time.monotonic() - t0) * 1000
            t0 = time.monotonic()
            self.ask(self.sock, "STATUS")
            res["idle_status_ms"] = (time.monotonic() - t0) * 1000
            res["setup_ms"] = connected["setup_ms"]
            out[f"netpermd_{n}"] = res
            log(f"fan-out: {n} subscribers of the raw fan-out loop")
            fo = self.spawn([self.tool("fanout"), fo_sock, str(res["event_len"])], log_name="fanout.log", in_ns=True)
            self.wait_for(lambda: os.path.exists(fo_sock), "the fan-out server", 5)
            g = self.swarm(fo_sock, n)
            connected = next(g)
            res = next(g)
            g.close()
            res["setup_ms"] = connected["setup_ms"]
            out[f"raw_{n}"] = res
            self.stop(fo)
            os.unlink(fo_sock)
        self.results["fanout"] = out
        self.wait_for(lambda: self.ask(self.sock, "STATUS").startswith('{"ok":true'), "netpermd after the swarm", 10)
        # The swarm's connections are gone; the daemon's picture is back to idle.
        self.results["rss_kb"]["after_subscribers_left"] = self.rss_kb(self.daemon.pid)


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    fo = r.get("fanout", {})
    for n in sorted({int(k.split("_")[1]) for k in fo}):
        a, b = fo[f"netpermd_{n}"], fo[f"raw_{n}"]
        ratio = a["last_us"]["median"] / b["last_us"]["median"]
        tgt, met = "", ""
        if n >= 10000:
            tgt = "within 2x of raw"
            met = target("10,000 subscribers within 2x of raw fan-out", ratio <= 2, f"ratio {ratio:.2f}")
        rows.append((f"4 fan-out, {n} subscribers: toggle -> last one read (ms)", triple(a["last_us"], "ms"),
                     "C fan-out loop: " + triple(b["last_us"], "ms"), f"median x{ratio:.2f}", tgt, met))
        if "leave_ms" in a:
            tgt, met = "", ""
            if n >= 10000:
                tgt = "< 1 s"
                met = target("10,000 subscribers leave, STATUS within 1 s", a["leave_ms"] < 1000,
                             f"{a['leave_ms']:.0f} ms")
            rows.append((f"4 fan-out, {n} subscribers leave at once -> next STATUS answered (ms)",
                         f"{a['leave_ms']:.1f}", f"STATUS when idle: {a['idle_status_ms']:.2f}",
                         f"x{a['leave_ms'] / max(a['idle_status_ms'], 0.001):.0f}", tgt, met))
    return rows
