# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 11, enforcement: a policy change (SIGHUP) to the kernel rejecting the app, beside nft -f of the same table
(BENCHMARKS.md)."""

import os
import signal

from ..common import TPUT_UID, log, run, stats, triple

PHASE = "inforce"


class InForce:
    def bench_inforce(self):
        """11: a policy change (the app's WiFi= allow -> deny, SIGHUP) to the kernel rejecting the app's datagram,
        with 10 and 10,000 apps; beside `nft -f` of the same table (as the daemon loads it) making the same change."""
        c = self.c
        self.tput_links()
        conf = os.path.join(self.dir, "inforce.conf")
        sock = os.path.join(self.dir, "inforce.sock")
        probe = [self.tool("inforce"), str(TPUT_UID), "10.97.0.2", "9"]
        out = {}
        for n in (10, c["big_apps"]):
            log(f"change -> in force: {c['inforce_rounds']} policy changes with {n} apps, then nft -f")
            self.enforce_conf(conf, n)
            d = self.start_enforcing(sock, conf)
            times = []
            for _ in range(c["inforce_rounds"]):
                self.wait_for(self.udp_passes, "the app allowed again", 30)
                self.enforce_conf(conf, n, wifi="deny")
                times.append(self.tool_json(probe + ["hup", str(d.pid)], in_ns=True, name="inforce")["in_force_us"])
                denied_text = run(["ip", "netns", "exec", self.ns, "nft", "list", "table", "inet", "netpermd"]).stdout
                self.enforce_conf(conf, n)
                os.kill(d.pid, signal.SIGHUP)
            self.wait_for(self.udp_passes, "the app allowed again", 30)
            allowed_text = run(["ip", "netns", "exec", self.ns, "nft", "list", "table", "inet", "netpermd"]).stdout
            self.stop(d)
            if os.path.exists(sock):
                os.unlink(sock)
            # The baseline: the daemon's own transaction (an empty table, its deletion, the whole table) by nft -f.
            scripts = {}
            for name, text in (("allow", allowed_text), ("deny", denied_text)):
                scripts[name] = os.path.join(self.dir, f"inforce-{name}.nft")
                with open(scripts[name], "w") as f:
                    f.write("table inet netpermd {}\ndelete table inet netpermd\n" + text)
            nft = []
            nftx = ["ip", "netns", "exec", self.ns, "nft", "-f"]
            for _ in range(c["inforce_rounds"]):
                run(nftx + [scripts["allow"]])
                self.wait_for(self.udp_passes, "the app allowed by nft", 10)
                nft.append(self.tool_json(probe + ["run", "nft", "-f", scripts["deny"]], in_ns=True,
                                          name="inforce (nft -f)")["in_force_us"])
            run(["ip", "netns", "exec", self.ns, "nft", "delete", "table", "inet", "netpermd"])
            out[f"apps_{n}"] = {"apps": n + 1, "netpermd_us": stats(times), "nft_us": stats(nft)}
        self.results["inforce"] = out


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    for key, e in sorted(r.get("inforce", {}).items(), key=lambda kv: kv[1]["apps"]):
        ratio = e["netpermd_us"]["median"] / e["nft_us"]["median"]
        rows.append((f"11 policy change (SIGHUP) -> the kernel rejects the app, {e['apps']} apps (ms)",
                     triple(e["netpermd_us"], "ms"), "nft -f of the same table: " + triple(e["nft_us"], "ms"),
                     f"median x{ratio:.2f}", "", ""))
    return rows
