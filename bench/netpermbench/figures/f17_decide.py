# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 17, one `ask` decision (DECIDE --once) to the kernel rejecting the app, beside nft -f of the same elements
(BENCHMARKS.md)."""

import json
import os
import re

from ..common import TPUT_UID, BenchError, log, run, stats, triple

PHASE = "decide"


class Decide:
    def map_elements(self, names):
        """Each of the table's maps named: its elements as nft -j lists them ({key: verdict or value})."""
        out = {}
        for name in names:
            r = run(["ip", "netns", "exec", self.ns, "nft", "-j", "list", "map", "inet", "netpermd", name], check=False)
            out[name] = {}
            if r.returncode != 0:
                continue
            for item in json.loads(r.stdout)["nftables"]:
                if "map" in item:
                    out[name] = {json.dumps(k): v for k, v in item["map"].get("elem", [])}
        return out

    @staticmethod
    def nft_value(v):
        if isinstance(v, dict) and "accept" in v:
            return "accept"
        if isinstance(v, dict) and "return" in v:
            return "return"
        if isinstance(v, dict) and "goto" in v:
            return "goto " + v["goto"]["target"]
        return str(v)

    def bench_decide(self):
        """17 (issue 26): one `ask` decision with 10,000 apps in the policy (about 13,000 logging chains): DECIDE (by
        netpermctl, --once, so no disk) making the app's WiFi deny, to the kernel rejecting its datagram. The daemon
        sends the elements as nf_tables messages of its own; the baseline is `nft -f` of the same change of elements
        against the same table, what libnftables did for the daemon before (it reads the whole table first)."""
        c = self.c
        self.tput_links()
        conf = os.path.join(self.dir, "decide.conf")
        sock = os.path.join(self.dir, "decide.sock")
        probe = [self.tool("inforce"), str(TPUT_UID), "10.97.0.2", "9"]
        ctl = [os.path.join(self.bin, "netpermctl"), "--socket", sock]
        maps = ["uid_wifi", "conn_wifi", "tag_uid"]
        nftx = ["ip", "netns", "exec", self.ns, "nft"]
        n, rounds = c["big_apps"], c["inforce_rounds"]
        log(f"ask decision -> in force: {rounds} DECIDEs with {n} apps, then nft -f")
        self.enforce_conf(conf, n, wifi="ask")
        # At debug, the daemon logs how long its own transactions took.
        daemon_log = os.path.join(self.dir, "netpermd-enforce.log")
        # The whole table of 10,001 apps took over 30 s to load on a shared machine under builds.
        d = self.start_enforcing(sock, conf, extra=["--log-level", "debug"], timeout=180)
        times, loads = [], []
        for i in range(rounds):
            allow = json.loads(self.ask(sock, "DECIDE tputapp wifi allow --once"))
            if not allow.get("ok"):
                raise BenchError(f"DECIDE allow: {allow}")
            self.wait_for(self.udp_passes, "the app allowed by its decision", 30)
            if i == 0:
                allowed_text = run(nftx + ["list", "table", "inet", "netpermd"]).stdout
                before = self.map_elements(maps)
            logged = os.path.getsize(daemon_log)
            times.append(self.tool_json(probe + ["run"] + ctl + ["decide", "tputapp", "wifi", "deny", "--once"],
                                        in_ns=True, name="inforce (DECIDE)")["in_force_us"])
            with open(daemon_log, errors="replace") as f:
                f.seek(logged)
                took = re.findall(r"nft transactions of \d+ bytes took (\d+) µs", f.read())
            if len(took) != 1:
                raise BenchError(f"the DECIDE made {len(took)} loads of the rules, not one")
            loads.append(int(took[0]))
            if i == 0:
                after = self.map_elements(maps)
        self.stop(d)
        if os.path.exists(sock):
            os.unlink(sock)
        # The baseline: the same elements deleted and added, by nft -f, against the table with the app allowed.
        script = ""
        for name in maps:
            gone = [k for k, v in before[name].items() if after[name].get(k) != v]
            new = [k for k, v in after[name].items() if before[name].get(k) != v]
            if gone:
                script += f"delete element inet netpermd {name} {{ " + ", ".join(json.loads(k).__str__() for k in gone) + " }\n"
            if new:
                script += f"add element inet netpermd {name} {{ " + ", ".join(
                    f"{json.loads(k)} : {self.nft_value(after[name][k])}" for k in new) + " }\n"
        if not script:
            raise BenchError("the decision changed no element of " + ", ".join(maps))
        load = os.path.join(self.dir, "decide-table.nft")
        with open(load, "w") as f:
            f.write("table inet netpermd {}\ndelete table inet netpermd\n" + allowed_text)
        change = os.path.join(self.dir, "decide-change.nft")
        with open(change, "w") as f:
            f.write(script)
        base = []
        for _ in range(rounds):
            run(nftx + ["-f", load], timeout=120)
            self.wait_for(self.udp_passes, "the app allowed by nft", 10)
            base.append(self.tool_json(probe + ["run", "nft", "-f", change], in_ns=True,
                                       name="inforce (DECIDE, nft -f)")["in_force_us"])
        run(nftx + ["delete", "table", "inet", "netpermd"])
        self.results["decide"] = {"apps": n + 1, "script": script,
                                  "netpermd_us": stats(times), "netpermd_load_us": stats(loads), "nft_us": stats(base)}


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "decide" in r:
        e = r["decide"]
        ratio = e["netpermd_us"]["median"] / e["nft_us"]["median"]
        rows.append((f"17 one ask decision (DECIDE --once, by netpermctl) -> the kernel rejects the app, {e['apps']} apps (ms)",
                     triple(e["netpermd_us"], "ms"), "nft -f of the same elements: " + triple(e["nft_us"], "ms"),
                     f"median x{ratio:.2f}", "", ""))
        rows.append((f"17 the same: the daemon's own transaction of those elements (ms)", triple(e["netpermd_load_us"], "ms"),
                     "nft -f of them, as above: " + triple(e["nft_us"], "ms"),
                     f"median x{e['netpermd_load_us']['median'] / e['nft_us']['median']:.3f}", "", ""))
    return rows
