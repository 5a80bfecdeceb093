# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 8, big policy: 10,000 apps' start-up, RELOAD, SIGHUP and QUERY beside a 1-app policy's (BENCHMARKS.md)."""

import json
import os
import signal
import socket
import time

from ..common import APP, BenchError, log, stats, triple

PHASE = "bigpolicy"


class BigPolicy:
    def time_sighup(self, p, sock, runs):
        """SIGHUP to the policy event read by a subscriber, in microseconds."""
        times = []
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(sock)
            f = s.makefile("rb")
            s.sendall(b"SUBSCRIBE policy\n")
            f.readline()
            f.readline()
            for _ in range(runs):
                t0 = time.monotonic()
                os.kill(p.pid, signal.SIGHUP)
                while True:
                    line = f.readline()
                    if not line:
                        raise BenchError("netpermd closed the subscription during SIGHUP reloads")
                    if line.startswith(b'{"event":"policy"'):
                        break
                times.append((time.monotonic() - t0) * 1e6)
                if b'"error":null' not in line:
                    raise BenchError(f"reload failed: {line!r}")
        return stats(times)

    def bench_bigpolicy(self):
        c = self.c
        log(f"big policy: {c['big_apps']} apps")
        big_sock = os.path.join(self.dir, "big.sock")
        big = self.start_daemon(big_sock, self.big_conf, os.path.join(self.dir, "state-big"), "netpermd-big.log")
        st = json.loads(self.ask(big_sock, "STATUS"))
        if st["policy"]["apps"] != c["big_apps"] + 1:
            raise BenchError(f"the big policy has {st['policy']['apps']} apps")
        out = {"rss_kb": self.rss_kb(big.pid)}
        out["query_big"] = self.qclient(big_sock, f"QUERY {self.big_app}", 1, c["bigq"])
        out["query_small"] = self.qclient(self.sock, f"QUERY {APP}", 1, c["bigq"])
        out["reload_big"] = self.qclient(big_sock, "RELOAD", 1, c["reloads"], 1)
        out["reload_small"] = self.qclient(self.sock, "RELOAD", 1, c["reloads"], 1)
        out["sighup_big"] = self.time_sighup(big, big_sock, c["reloads"])
        out["sighup_small"] = self.time_sighup(self.daemon, self.sock, c["reloads"])
        out["rss_kb_after_reloads"] = self.rss_kb(big.pid)
        self.stop(big)
        self.results["big_policy"] = out


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    apps = "big" if smoke else "10,000"
    if "startup_big" in r:
        sb, su = r["startup_big"], r["startup"]
        rows.append((f"8 {apps}-app policy: exec -> READY=1 (ms)", triple(sb["ready_us"], "ms"),
                     "1-app policy: " + triple(su["ready_us"], "ms"),
                     f"load +{(sb['ready_us']['median'] - su['ready_us']['median']) / 1000:.1f} ms", "", ""))
    if "big_policy" in r:
        bp = r["big_policy"]
        nb = bp["query_big"]["replies"]
        rows.append((f"8 {apps}-app policy: RELOAD round trip (ms)", triple(bp["reload_big"]["rtt_us"], "ms"),
                     "1-app policy: " + triple(bp["reload_small"]["rtt_us"], "ms"),
                     f"median x{bp['reload_big']['rtt_us']['median'] / bp['reload_small']['rtt_us']['median']:.0f}",
                     "", ""))
        rows.append((f"8 {apps}-app policy: SIGHUP -> policy event read (ms)", triple(bp["sighup_big"], "ms"),
                     "1-app policy: " + triple(bp["sighup_small"], "ms"),
                     f"median x{bp['sighup_big']['median'] / bp['sighup_small']['median']:.0f}", "", ""))
        rows.append((f"8 {apps}-app policy: QUERY round trip, 1 client (µs)", triple(bp["query_big"]["rtt_us"], "us"),
                     "1-app policy: " + triple(bp["query_small"]["rtt_us"], "us"),
                     f"median x{bp['query_big']['rtt_us']['median'] / bp['query_small']['rtt_us']['median']:.2f}"
                     f" ({nb} queries; RSS {bp['rss_kb'] / 1024:.1f} MiB)", "", ""))
    return rows
