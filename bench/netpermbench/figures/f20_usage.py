# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 20, usage counting: a counted app's TCP bulk and datagrams with counting and without; reading every counter
(BENCHMARKS.md)."""

import json
import os
import time

from ..common import TPUT_LINK, TPUT_UID, BenchError, log, paired_rows, run, stats, triple

PHASE = "usage"


class Usage:
    def usage_conf(self, path, apps):
        """[Usage] Count=yes in Mode=off (a counting-only table), btp0 classified wwan (metered), the app TPUT_UID
        with a budget it never reaches (so its packets also pass the budget's quota objects), then `apps` User= apps."""
        parts = [f"[Interface {TPUT_LINK}]\nKind=wwan\n\n[Usage]\nCount=yes\nSaveIntervalSec=3600\n\n"
                 f"[Defaults]\nWWAN=allow\n\n[App tputapp]\nUser={TPUT_UID}\nMeteredBudget=1T\n"]
        for i in range(apps):
            parts.append(f"\n[App uapp{i:05d}]\nUser={200000 + i}\n")
        with open(path + ".tmp", "w") as f:
            f.write("".join(parts))
        os.replace(path + ".tmp", path)

    @staticmethod
    def connection_tags(names):
        """ConnectionTags.assign: each app's tag, FNV-1a of its name in 23 bits (base 0x6e800000), a collision taking
        the next free one, in name order."""
        tags, taken = {}, set()
        for name in sorted(set(names)):
            h = 0x811C9DC5
            for b in name.encode():
                h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
            t = h & 0x7FFFFF
            while t in taken:
                t = (t + 1) & 0x7FFFFF
            taken.add(t)
            tags[name] = 0x6E800000 | t
        return tags

    def start_counting(self, sock, conf):
        return self.start_in_force(sock, conf, "usage", "counting", "netpermd_usage", "[Usage] Count=yes", "usage")

    def usage_sent(self, sock):
        r = json.loads(self.ask(sock, "USAGE tputapp", timeout=30))
        return r["apps"][0]["current"]["sent_bytes"]

    def bench_usage(self):
        """20: a counted app's TCP bulk and 64-byte datagrams ([Usage] Count=yes, Mode=off: the counting-only table,
        over a metered link, through its budget's quotas, 10,001 apps in the policy) against no rules, in paired cycles
        as figure 10; then the cost of one reading of every counter with 10,001 apps' elements in the counting sets
        (the daemon's CPU per `USAGE APP`, which reads the whole table first) against the same with one app's."""
        c = self.c
        log(f"usage: {c['tput_rounds']} cycle(s) of TCP bulk ({c['tput_s']} s) and {c['dgrams']} datagrams, "
            f"counted and not; {c['usage_reads']} readings of {c['big_apps'] + 1} apps' counters")
        self.tput_links()
        conf = os.path.join(self.dir, "usage.conf")
        self.usage_conf(conf, c["big_apps"])
        sock = os.path.join(self.dir, "usage.sock")
        cycles = []

        def measure():
            return self.tput_send(TPUT_UID)["mbit_s"], self.tput_dgrams()["cpu_ns"]

        def read_cost(d, n):
            """Round trip (µs) of each `USAGE tputapp`, and the daemon's CPU per reading (µs)."""
            self.settle_cpu(d.pid)
            times, cpu0 = [], self.cpu_ns(d.pid)
            for _ in range(n):
                t = time.monotonic()
                self.ask(sock, "USAGE tputapp", timeout=30)
                times.append((time.monotonic() - t) * 1e6)
            self.settle_cpu(d.pid)
            return stats(times), (self.cpu_ns(d.pid) - cpu0) / 1000 / n

        reading = {}
        for i in range(c["tput_rounds"]):
            cycle = {}
            for side in (("on", "off") if i % 2 == 0 else ("off", "on")):
                if side == "off":
                    if self.nft_table_loaded("netpermd_usage"):
                        raise BenchError("the counting table is loaded without netpermd running")
                    cycle["off"] = measure()
                    continue
                d = self.start_counting(sock, conf)
                self.settle_cpu(d.pid)
                before = self.usage_sent(sock)
                cycle["on"] = measure()
                if self.usage_sent(sock) <= before:
                    raise BenchError("the counted app's bytes did not grow")
                if i == 0:
                    # Every app's elements, as if each had sent and received over the metered link.
                    reading["one_app_us"], reading["one_app_cpu_us"] = read_cost(d, c["usage_reads"])
                    names = [f"uapp{k:05d}" for k in range(c["big_apps"])]
                    assigned = self.connection_tags(names + ["tputapp"])
                    tags = [assigned[n] for n in names]
                    script = "".join(
                        f"add element inet netpermd_usage {s} {{ "
                        + ", ".join(f"0x{t:08x} counter packets {k + 1} bytes {1000 * (k + 1)}"
                                    for k, t in enumerate(tags[j:j + 1000])) + " }\n"
                        for s in ("count_sent_wwan_metered", "count_received_wwan_metered")
                        for j in range(0, len(tags), 1000))
                    run(["ip", "netns", "exec", self.ns, "nft", "-f", "-"], input=script, timeout=120)
                    reading["all_apps_us"], reading["all_apps_cpu_us"] = read_cost(d, c["usage_reads"])
                    t = time.monotonic()
                    listed = run(["ip", "netns", "exec", self.ns, "nft", "-j", "list", "table", "inet", "netpermd_usage"],
                                 timeout=120).stdout
                    reading["nft_list_ms"] = (time.monotonic() - t) * 1000
                    reading["elements"] = listed.count('"counter"')
                    r = json.loads(self.ask(sock, "USAGE", timeout=30))
                    counted = sum(1 for a in r["apps"] if a["current"]["sent_bytes"] > 0)
                    if counted < c["big_apps"]:
                        raise BenchError(f"only {counted} of {c['big_apps']} apps' counters were read")
                self.stop(d)
                os.unlink(sock) if os.path.exists(sock) else None
                self.remove_rules()
                if self.nft_table_loaded("netpermd_usage"):
                    raise BenchError("the counting table is still loaded after netpermd --remove-rules")
            cycles.append(cycle)
        self.results["usage"] = {
            "apps": c["big_apps"] + 1, "seconds": c["tput_s"], "dgrams": c["dgrams"], "reads": c["usage_reads"],
            "on_mbit_s": [x["on"][0] for x in cycles], "off_mbit_s": [x["off"][0] for x in cycles],
            "on_dgram_cpu_ns": [x["on"][1] for x in cycles], "off_dgram_cpu_ns": [x["off"][1] for x in cycles],
            "reading": reading}


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "usage" in r:
        u = r["usage"]
        rows += paired_rows(target, 20, u, f"TCP bulk of a counted app, Count=yes, metered link with a budget, {u['apps']}-app policy",
                            "counting's cost", "throughput with counting within 5% of none")
        rd = u["reading"]
        rows.append((f"20 reading every counter, {u['apps']} apps' elements: USAGE APP round trip (ms)",
                     triple(rd["all_apps_us"], "ms"), "one app's: " + triple(rd["one_app_us"], "ms"),
                     f"daemon CPU per reading {rd['all_apps_cpu_us'] / 1000:.2f} ms (one app's {rd['one_app_cpu_us'] / 1000:.2f}); "
                     f"nft -j list of the table {rd['nft_list_ms']:.0f} ms ({rd['elements']} counters)", "", ""))
    return rows
