# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 15, subscribers that never read: a good client's QUERY, peak RSS, every one closed with the overflow line
(BENCHMARKS.md)."""

import json
import os
import subprocess

from ..common import APP, SILENT_LINK, SILENT_PEER, BenchError, fmt, log, run, triple

PHASE = "silent"


class Silent:
    def hwm_kb(self, pid):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        raise BenchError(f"no VmHWM for pid {pid}")

    def bench_silent(self):
        """15: subscribers that never read (issue 22, point 12). bsil0 (wifi) with 700 addresses, so that each of
        its link events is about 10 KB; 2,000 subscribers send SUBSCRIBE and never read while bsil0's admin state
        toggles for 5 s; the daemon runs with --subscriber-timeout 2. A good client's QUERY round trips beside the
        same at rest, the daemon's peak RSS beside its RSS before, when the last silent one was closed, and how many
        got the overflow line."""
        c = self.c
        ipn = ["ip", "-n", self.ns]
        run(ipn + ["link", "add", SILENT_LINK, "type", "veth", "peer", "name", SILENT_PEER])
        path = os.path.join(self.dir, "silent-addrs.batch")
        with open(path, "w") as f:
            for i in range(c["silent_addrs"]):
                f.write(f"addr add 10.94.{i // 250}.{i % 250 + 1}/32 dev {SILENT_LINK}\n")
        run(ipn + ["-batch", path], timeout=60)
        for l in (SILENT_LINK, SILENT_PEER):
            run(ipn + ["link", "set", l, "up"])
        conf = os.path.join(self.dir, "silent.conf")
        sock = os.path.join(self.dir, "silent.sock")
        with open(conf, "w") as f:
            f.write(f"[Interface {SILENT_LINK}]\nKind=wifi\n\n[App {APP}]\nExecutable=/opt/npbench/{APP}\nWiFi=allow\n")
        d = self.spawn(self.daemon_cmd(sock, conf, os.path.join(self.dir, "state-silent"))
                       + ["--subscriber-timeout", str(c["silent_timeout"])], log_name="netpermd-silent.log", in_ns=True)
        try:
            self.wait_for(lambda: self.ask(sock, "PING", timeout=2) == '{"ok":true,"pong":true}', "netpermd (silent)", 15)
            rest = self.paced(sock, f"QUERY {APP}", c["rest_s"])
            rss_before = self.rss_kb(d.pid)
            log(f"silent: {c['silent_n']} subscribers that never read, {SILENT_LINK} toggling for {c['silent_s']} s")
            wait = c["silent_timeout"] + c["silent_wait"]
            sil = self.spawn(["ip", "netns", "exec", self.ns, self.tool("silent"), sock, str(c["silent_n"]), SILENT_LINK,
                              "2000", str(c["silent_s"]), str(wait)], stdout=subprocess.PIPE)
            during = self.paced(sock, f"QUERY {APP}", c["silent_s"])
            out, _ = sil.communicate(timeout=c["silent_s"] + wait + 60)
            res = json.loads(out)
            lines = [l for l in open(os.path.join(self.dir, "netpermd-silent.log"), errors="replace") if "subscriber fd" in l]
            self.results["silent"] = {**res, "timeout_s": c["silent_timeout"], "seconds": c["silent_s"], "rest": rest,
                                      "during": during, "rss_kb_before": rss_before, "hwm_kb": self.hwm_kb(d.pid),
                                      "subscriber_log_lines": len(lines)}
            self.stop(d)
        finally:
            if d.poll() is None:
                d.kill()
                d.wait()
            run(ipn + ["link", "del", SILENT_LINK], check=False)


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "silent" in r:
        si = r["silent"]
        d, rest = si["during"]["rtt_us"], si["rest"]["rtt_us"]
        rows.append((f"15 {si['subscribers']} subscribers that never read, {si['toggles']} toggles: good client's QUERY (ms)",
                     triple(d, "ms"), "at rest: " + triple(rest, "ms"),
                     f"p99 x{d['p99'] / max(rest['p99'], 1):.0f}, max {fmt(d['max'], 'ms')} ms", "p99 < 50 ms",
                     target("good client's QUERY p99 < 50 ms with silent subscribers", d["p99"] < 50000,
                            f"p99 {d['p99'] / 1000:.1f} ms")))
        rows.append((f"15 the same: peak RSS (MiB), closed, overflow lines", f"{si['hwm_kb'] / 1024:.1f}",
                     f"before: {si['rss_kb_before'] / 1024:.1f}",
                     f"{si['closed']} closed, the last at {si['last_closed_s']:.1f} s (time-out {si['timeout_s']} s); "
                     f"{si['overflow']} overflow lines; {si['subscriber_log_lines']} log lines",
                     "all closed, all told", target("every silent subscriber closed with the overflow line",
                                                    si["closed"] == si["subscribers"] == si["overflow"],
                                                    f"{si['closed']} closed, {si['overflow']} told")))
    return rows
