# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 14, cgroup churn: a good client's QUERY while scopes are made and removed, and new scopes refused
(BENCHMARKS.md)."""

import json
import os
import subprocess
import time

from ..common import TPUT_UID, WIFI, fmt, log, triple

PHASE = "churn"


class Churn:
    def loud_lines(self, log_name):
        """The daemon's lines at notice and above (what a journal keeps), and at err."""
        with open(os.path.join(self.dir, log_name), errors="replace") as f:
            lines = [l for l in f if l[:3] in ("<3>", "<4>", "<5>")]
        return lines, [l for l in lines if l.startswith("<3>")]

    def bench_churn(self):
        """14: cgroup churn (issue 22, point 11; issue 37). A slice of the bench's own at the root of the hierarchy,
        and a policy whose Unit= glob matches the scopes made in it; 5,000 scopes made and removed in it, round after
        round, for 10 s. Every load must take; a good client's QUERY round trips beside the same at rest; and 20 more
        scopes of the same app made at random moments once the churn runs (its first second aside), each timed from
        its mkdir to its first refused datagram, beside 20 at rest."""
        c = self.c
        slice_dir = os.path.join(self.cgroup_root(), f"npbench-{os.getpid()}.slice")
        os.mkdir(slice_dir)
        conf = os.path.join(self.dir, "churn.conf")
        sock = os.path.join(self.dir, "churn.sock")
        with open(conf, "w") as f:
            f.write(f"[Interface {WIFI}]\nKind=wifi\n\n[Enforcement]\nMode=block\n\n[App churn]\n"
                    f"Unit=npbench-churn-*.scope\nWiFi=deny\n\n[App tputapp]\nUser={TPUT_UID}\nWiFi=deny\n")
        d = None
        try:
            d = self.spawn(["nsenter", f"--net=/run/netns/{self.ns}"]
                           + self.daemon_cmd(sock, conf, os.path.join(self.dir, "state-churn")), log_name="netpermd-churn.log")
            self.wait_for(lambda: json.loads(self.ask(sock, "STATUS", timeout=5))["enforcement"]["state"] == "enforcing",
                          "the rules in force (churn)", 30)
            log(f"churn: {c['churn_scopes']} scopes made and removed for {c['churn_s']} s")
            def new_scopes(name, seconds):
                return self.spawn(["nsenter", f"--net=/run/netns/{self.ns}", self.tool("newscopes"), slice_dir,
                                   f"npbench-churn-{name}", str(c["churn_new"]), str(seconds), "10.99.0.2", "9"],
                                  stdout=subprocess.PIPE)
            new_rest = new_scopes("rest", c["rest_s"])
            new_rest_out, _ = new_rest.communicate(timeout=c["rest_s"] + 60)
            rest = self.paced(sock, "QUERY churn", c["rest_s"])
            churn = self.spawn([self.tool("cgchurn"), slice_dir, "npbench-churn", str(c["churn_scopes"]), str(c["churn_s"])],
                               stdout=subprocess.PIPE)
            # Once the churn's scopes are in the rules (the scope came halfway through).
            lead = min(1.0, c["churn_s"] / 4)
            time.sleep(lead)
            new_during = new_scopes("during", (c["churn_s"] - lead) * 0.75)
            during = self.paced(sock, "QUERY churn", c["churn_s"] - lead)
            out, _ = churn.communicate(timeout=c["churn_s"] + 60)
            new_during_out, _ = new_during.communicate(timeout=c["churn_s"] + 60)
            state = json.loads(self.ask(sock, "STATUS"))["enforcement"]["state"]
            lines, errors = self.loud_lines("netpermd-churn.log")
            with open(os.path.join(self.dir, "netpermd-churn.log"), errors="replace") as f:
                text = f.read()
            self.stop(d)
        finally:
            if d and d.poll() is None:
                d.kill()
                d.wait()
            try:
                os.rmdir(slice_dir)
            except OSError as e:
                log(f"warning: {slice_dir}: {e}")
        self.results["churn"] = {"scopes": c["churn_scopes"], "seconds": c["churn_s"], "churn": json.loads(out),
                                 "rest": rest, "during": during, "state_after": state,
                                 "new_rest": json.loads(new_rest_out), "new_during": json.loads(new_during_out),
                                 "failed_loads": text.count("loading the rules failed"),
                                 "failed_changes": text.count("changing only what differs failed"),
                                 "notice_lines": len(lines), "err_lines": len(errors)}


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "churn" in r:
        ch = r["churn"]
        d, rest = ch["during"]["rtt_us"], ch["rest"]["rtt_us"]
        failed = ch["failed_loads"] + ch["failed_changes"]
        rows.append((f"14 cgroup churn ({ch['scopes']} scopes made and removed, {ch['churn']['rounds']} rounds): good "
                     "client's QUERY (ms)", triple(d, "ms"), "at rest: " + triple(rest, "ms"),
                     f"p99 x{d['p99'] / max(rest['p99'], 1):.0f}, max {fmt(d['max'], 'ms')} ms; {failed} loads failed, "
                     f"{ch['notice_lines']} lines at notice+", "no load fails",
                     target("cgroup churn fails no load", failed == 0 and ch["err_lines"] == 0
                            and ch["state_after"] == "enforcing", f"{failed} failed, state {ch['state_after']}")))
        nd, nr = ch["new_during"], ch["new_rest"]
        f, fr = nd["first_refused_us"], nr["first_refused_us"]
        rows.append((f"14 a new scope made during the churn ({nd['refused']} of {nd['made']} refused): mkdir -> first "
                     "datagram refused (ms)", triple(f, "ms"), "at rest: " + triple(fr, "ms"),
                     f"max {fmt(f['max'], 'ms')} ms (at rest {fmt(fr['max'], 'ms')})", "p99 < 100 ms",
                     target("a new scope refused within 100 ms during churn (p99)",
                            nd["refused"] == nd["made"] > 0 and f["p99"] < 100_000, f"p99 {fmt(f['p99'], 'ms')} ms")))
    return rows
