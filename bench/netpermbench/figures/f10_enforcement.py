# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 10, enforcement's throughput: an allowed app's TCP bulk and datagrams with Mode=block's rules and without
(BENCHMARKS.md)."""

import os

from ..common import TPUT_UID, BenchError, log, paired_rows

PHASE = "enforcement"


class Enforcement:
    def bench_enforcement(self):
        """10: an allowed app's TCP bulk and 64-byte datagrams to another namespace with Mode=block and a 10,000-app
        policy in force (its uid maps full), against the same with no rules (the daemon stopped, then its table
        removed by `netpermd --remove-rules`, and with it the connection tracking its rules needed). In cycles: each measures both sides back to back, the order turning each cycle (with, without;
        without, with; ...), so that the machine's drift falls on both; the figure is the median of the cycles'
        ratios, not a ratio of medians taken minutes apart."""
        c = self.c
        log(f"enforcement: {c['tput_rounds']} cycle(s) of TCP bulk ({c['tput_s']} s) and {c['dgrams']} datagrams, "
            "with the rules and without")
        self.tput_links()
        conf = os.path.join(self.dir, "enforce.conf")
        self.enforce_conf(conf, c["big_apps"])
        sock = os.path.join(self.dir, "enforce.sock")
        cycles = []

        def measure():
            return self.tput_send(TPUT_UID)["mbit_s"], self.tput_dgrams()["cpu_ns"]

        for i in range(c["tput_rounds"]):
            cycle = {}
            for side in (("on", "off") if i % 2 == 0 else ("off", "on")):
                if side == "off":
                    if self.nft_table_loaded():
                        raise BenchError("the table is loaded without netpermd running")
                    cycle["off"] = measure()
                    continue
                d = self.start_enforcing(sock, conf)
                # The rules are in force: an app denied wifi (uapp00001) is refused at once.
                denied = self.tput_send(200001, check=False)
                if denied.returncode == 0 or "connect:" not in denied.stderr:
                    raise BenchError(f"a denied app's connect was not refused: {denied.returncode} {denied.stderr.strip()}")
                # The rules' cost, not the daemon's start-up: with 10,001 apps it was seen using a CPU for up to
                # 3 s after STATUS said enforcing, beside the sender on a 2-CPU machine.
                self.settle_cpu(d.pid)
                cycle["on"] = measure()
                self.stop(d)
                os.unlink(sock) if os.path.exists(sock) else None
                self.remove_rules()
                if self.nft_table_loaded():
                    raise BenchError("the table is still loaded after netpermd stopped")
            cycles.append(cycle)
        self.results["enforcement"] = {
            "apps": c["big_apps"] + 1, "seconds": c["tput_s"], "dgrams": c["dgrams"],
            "on_mbit_s": [x["on"][0] for x in cycles], "off_mbit_s": [x["off"][0] for x in cycles],
            "on_dgram_cpu_ns": [x["on"][1] for x in cycles], "off_dgram_cpu_ns": [x["off"][1] for x in cycles]}


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "enforcement" in r:
        e = r["enforcement"]
        rows += paired_rows(target, 10, e, f"TCP bulk of an allowed app, Mode=block, {e['apps']}-app policy", "the rules' cost",
                            "throughput with enforcement within 5% of none")
    return rows
