# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 25, the privacy report: a flood of new connections from one app with the report on and off in the same run:
the daemon's CPU per connection, its memory, a good client's QUERY meanwhile (BENCHMARKS.md, docs/PRIVACY.md)."""

import json
import os

from ..common import PACE_US, TPUT_LINK, TPUT_UID, BenchError, log, run, triple


PHASE = "report"


class Report:
    def report_conf(self, path, on):
        """Count=yes (Mode=off: the counting table tags the app's connections), btp0 a wwan, the report on or off,
        the app TPUT_UID, which turns the report on for itself."""
        with open(path + ".tmp", "w") as f:
            f.write(f"[Interface {TPUT_LINK}]\nKind=wwan\n\n[Usage]\nCount=yes\nSaveIntervalSec=3600\n\n"
                    f"[Report]\nEnabled={'yes' if on else 'no'}\n\n[Defaults]\nWWAN=allow\n\n"
                    f"[App tputapp]\nUser={TPUT_UID}\n")
        os.replace(path + ".tmp", path)

    def report_flood(self, sock, d):
        """The flood from TPUT_UID while a good client asks QUERY every PACE_US: the daemon's CPU (ns), its RSS
        before and after (kB), the client's round trips and the flood's own report."""
        c = self.c
        self.settle_cpu(d.pid)
        rss0, cpu0 = self.rss_kb(d.pid), self.cpu_ns(d.pid)
        out = os.path.join(self.dir, "report-pacedq.json")
        with open(out, "w") as f:
            good = self.spawn([self.tool("pacedq"), sock, "QUERY tputapp", str(PACE_US), str(c["report_s"])], stdout=f)
        flood = self.tool_json(["ip", "netns", "exec", self.ns, "setpriv", "--reuid", str(TPUT_UID), "--regid",
                                str(TPUT_UID), "--clear-groups", self.tool("connflood"), "10.98.0.1",
                                str(c["report_spread"]), str(c["report_rate"]), str(c["report_s"])],
                               timeout=c["report_s"] + 60, name="connflood")
        good.wait(timeout=c["report_s"] + 60)
        self.settle_cpu(d.pid)
        with open(out) as f:
            rtt = json.load(f)["rtt_us"]
        return {"cpu_ns": self.cpu_ns(d.pid) - cpu0, "rss0_kb": rss0, "rss1_kb": self.rss_kb(d.pid),
                "query_us": rtt, "sent": flood["sent"]}

    def bench_report(self):
        """25: `report_rate` new connections a second (UDP, each a new flow) from one app for `report_s`, to
        `report_spread` addresses (more than the report's bound of entries), the report on against off ([Report]
        Enabled=no, counting still on), `report_rounds` of each in turn."""
        c = self.c
        log(f"report: {c['report_rounds']} round(s) of {c['report_rate']} new connections a second for {c['report_s']} s, "
            "report on and off")
        self.tput_links()
        # The app's own user turns the report on for itself: it must reach the socket, through the bench's own
        # directory too when this run's is below it (--compare).
        os.chmod(self.dir, 0o755)
        if os.path.basename(os.path.dirname(self.dir)).startswith("npbench-"):
            os.chmod(os.path.dirname(self.dir), 0o755)
        # More destinations than the report keeps entries (16,384): it runs at its bound, dropping the oldest.
        run(["ip", "-n", self.ns, "route", "replace", "10.98.0.0/16", "via", "10.97.0.2", "dev", TPUT_LINK])
        sock = os.path.join(self.dir, "report.sock")
        rounds = []
        for i in range(c["report_rounds"]):
            cycle = {}
            for side in (("on", "off") if i % 2 == 0 else ("off", "on")):
                conf = os.path.join(self.dir, f"report-{side}.conf")
                self.report_conf(conf, side == "on")
                d = self.start_in_force(sock, conf, "usage", "counting", "netpermd_usage", "[Usage] Count=yes",
                                        "report-" + side)
                run(["setpriv", "--reuid", str(TPUT_UID), "--regid", str(TPUT_UID), "--clear-groups",
                     os.path.join(self.bin, "netpermctl"), "--socket", sock, "report", "on"])
                m = self.report_flood(sock, d)
                if side == "on":
                    r = json.loads(self.ask(sock, "REPORT", timeout=30))
                    m["recorded"] = sum(dst["connections"] for a in r["apps"] for dst in a["destinations"])
                    m["entries"] = sum(len(a["destinations"]) for a in r["apps"])
                    metrics = json.loads(self.ask(sock, "METRICS", timeout=30))["metrics"]
                    m["lost"] = next((int(line.split()[-1]) for line in metrics.splitlines()
                                      if line.startswith("netpermd_report_events_lost_total")), 0)
                    if m["recorded"] == 0:
                        raise BenchError("the report recorded none of the flood's connections")
                cycle[side] = m
                self.stop(d)
                os.unlink(sock) if os.path.exists(sock) else None
                self.remove_rules()
                # Each side starts from an empty conntrack table: the last side's flows are not this one's.
                run(["ip", "netns", "exec", self.ns, "conntrack", "-F"], check=False)
            rounds.append(cycle)
        self.results["report"] = {"rate": c["report_rate"], "seconds": c["report_s"], "rounds": rounds}


def rows(r, smoke, target):
    if "report" not in r:
        return []
    rep = r["report"]
    rounds = rep["rounds"]

    def per_conn(side):
        return sorted(x[side]["cpu_ns"] / max(1, x[side]["sent"]) / 1000 for x in rounds)

    on, off = per_conn("on"), per_conn("off")
    added = sorted(a - b for a, b in zip(on, off))
    median = added[len(added) // 2]
    # Entries dropped at the bound take their counts with them: what was recorded is read at the end, of the entries
    # kept, so it is a lower bound on what was heard.
    recorded = sum(x["on"]["recorded"] for x in rounds) / max(1, sum(x["on"]["sent"] for x in rounds))
    entries = max(x["on"]["entries"] for x in rounds)
    lost = sum(x["on"].get("lost", 0) for x in rounds)
    target("report: CPU added per new connection < 10 µs", median < 10, f"{median:.2f} µs")
    # The round whose p99 was worst, of each side.
    q_on = max((x["on"]["query_us"] for x in rounds), key=lambda q: q["p99"])
    q_off = max((x["off"]["query_us"] for x in rounds), key=lambda q: q["p99"])
    p99_ms = q_on["p99"] / 1000
    target("report: good client's QUERY p99 under the flood < 10 ms", p99_ms < 10, f"{p99_ms:.2f} ms")
    rss_on = max(x["on"]["rss1_kb"] for x in rounds) / 1024
    rss_off = max(x["off"]["rss1_kb"] for x in rounds) / 1024
    title = f"25 {rep['rate']} new connections/s from one app for {rep['seconds']} s"
    return [
        (f"{title}: daemon CPU per connection (µs)", f"{' / '.join(f'{v:.2f}' for v in on)}",
         f"report off: {' / '.join(f'{v:.2f}' for v in off)}",
         f"added: median {median:.2f} µs; {entries} entries kept at the end ({recorded * 100:.0f}% of the connections "
         f"sent still in them), {lost} event(s) lost",
         "< 10 µs added", "met" if median < 10 else "MISSED"),
        (f"{title}: good client's QUERY (ms)", triple(q_on, "ms"), "report off: " + triple(q_off, "ms"), "",
         "p99 < 10 ms", "met" if p99_ms < 10 else "MISSED"),
        (f"{title}: RSS after (MiB)", f"{rss_on:.1f}", f"report off: {rss_off:.1f}",
         f"{rss_on - rss_off:+.1f} MiB with {entries} entries", "", ""),
    ]
