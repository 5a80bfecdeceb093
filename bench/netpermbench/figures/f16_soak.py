# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 16, soak (bounded): query clients while a link flaps, SIGHUP reloads, DECIDEs and disk writes go on
(BENCHMARKS.md)."""

import json
import os
import signal
import subprocess
import threading
import time

from ..common import SOAK_LINK, SOAK_PEER, TPUT_UID, WIFI, BenchError, fmt, log, run, stats, triple

PHASE = "soak"


class Soak:
    def qclient_for(self, sock, request, clients, seconds):
        """`clients` closed-loop query clients for `seconds` (qclient stopped by its time limit, not a count)."""
        cmd = [self.tool("qclient"), sock, request, str(clients), "1000000000", "0", str(seconds)]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=seconds + 60,
                           env=self.env)
        try:
            out = json.loads(r.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            raise BenchError(f"qclient failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
        if out["errors"]:
            raise BenchError(f"qclient: {out['errors']} replies were errors: {out.get('first_reply')}")
        out.pop("first_reply", None)
        return out

    def bench_soak(self):
        """16: the soak (issue 22, point 13), bounded: 16 query clients (closed loop) for 60 s while bsoak0 (wwan)
        flaps every 50 ms, SIGHUP reloads the policy every 2 s, a DECIDE lands every second, and another process
        writes 1 GiB at a time with fsync to the file system of the daemon's state directory, as other work on a
        machine does. netpermd with Mode=block and 200 User= apps. Beside the same clients at rest, in the same run."""
        c = self.c
        ipn = ["ip", "-n", self.ns]
        run(ipn + ["link", "add", SOAK_LINK, "type", "veth", "peer", "name", SOAK_PEER])
        for l in (SOAK_LINK, SOAK_PEER):
            run(ipn + ["link", "set", l, "up"])
        conf = os.path.join(self.dir, "soak.conf")
        sock = os.path.join(self.dir, "soak.sock")
        perms = ["allow", "deny", "ask"]
        with open(conf, "w") as f:
            f.write(f"[Interface {WIFI}]\nKind=wifi\n\n[Interface {SOAK_LINK}]\nKind=wwan\n\n[Enforcement]\nMode=block\n\n"
                    f"[App asker]\nUser={TPUT_UID}\nWWAN=ask\n"
                    + "".join(f"\n[App s{i}]\nUser={300000 + i}\nWWAN={perms[i % 3]}\n" for i in range(200)))
        state = os.path.join(self.dir, "state-soak")
        d = self.spawn(["nsenter", f"--net=/run/netns/{self.ns}"] + self.daemon_cmd(sock, conf, state),
                       log_name="netpermd-soak.log")
        stop = {"v": False}
        decides, failed = [], []
        threads = []
        try:
            self.wait_for(lambda: json.loads(self.ask(sock, "STATUS", timeout=5))["enforcement"]["state"] == "enforcing",
                          "the rules in force (soak)", 30)
            req = "QUERY asker|QUERY s5"
            rest = self.qclient_for(sock, req, c["soak_clients"], c["rest_s"])
            log(f"soak: {c['soak_clients']} clients for {c['soak_s']} s; flaps every 50 ms, SIGHUP every 2 s, "
                f"a DECIDE every second, {c['soak_write_mb']} MiB written with fsync at a time")

            def reloads():
                while not stop["v"]:
                    time.sleep(2)
                    if not stop["v"]:
                        d.send_signal(signal.SIGHUP)

            def decisions():
                k = 0
                while not stop["v"]:
                    time.sleep(1)
                    t0 = time.monotonic()
                    line = self.ask(sock, f"DECIDE asker wwan {'allow' if k % 2 == 0 else 'deny'}", timeout=60)
                    decides.append((time.monotonic() - t0) * 1e6)
                    if not line.startswith('{"ok":true'):
                        failed.append(line)
                    k += 1

            def writes():
                target = os.path.join(self.dir, "soak-pressure")
                while not stop["v"]:
                    run(["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={c['soak_write_mb']}", "conv=fsync"],
                        timeout=600)
                    os.unlink(target)
            threads = [threading.Thread(target=f, daemon=True) for f in (reloads, decisions, writes)]
            for t in threads:
                t.start()
            flap = self.spawn(["ip", "netns", "exec", self.ns, self.tool("flap"), SOAK_LINK, "50000", str(c["soak_s"])],
                              stdout=subprocess.PIPE)
            during = self.qclient_for(sock, req, c["soak_clients"], c["soak_s"])
            flapped = json.loads(flap.communicate(timeout=60)[0])
            stop["v"] = True
            for t in threads:
                t.join(timeout=120)
            held = [l for l in open(os.path.join(self.dir, "netpermd-soak.log"), errors="replace") if "the loop was held" in l]
            self.results["soak"] = {"seconds": c["soak_s"], "clients": c["soak_clients"], "rest": rest, "during": during,
                                    "toggles": flapped["toggles"], "decide_us": stats(decides), "decide_failed": failed,
                                    "loop_held_lines": [l.strip() for l in held][:20]}
            self.stop(d)
        finally:
            stop["v"] = True
            if d.poll() is None:
                d.kill()
                d.wait()
            run(ipn + ["link", "del", SOAK_LINK], check=False)
            try:
                os.unlink(os.path.join(self.dir, "soak-pressure"))
            except OSError:
                pass


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "soak" in r:
        so = r["soak"]
        d, rest = so["during"]["rtt_us"], so["rest"]["rtt_us"]
        rows.append((f"16 soak, {so['seconds']} s, {so['clients']} clients: QUERY round trip (ms)", triple(d, "ms"),
                     "at rest: " + triple(rest, "ms"),
                     f"max {fmt(d['max'], 'ms')} ms (at rest {fmt(rest['max'], 'ms')}); DECIDE p99 "
                     f"{fmt(so['decide_us']['p99'], 'ms')} ms; {len(so['loop_held_lines'])} loop-held lines",
                     "no QUERY over 1 s", target("soak: no QUERY over 1 s", d["max"] < 1e6, f"max {d['max'] / 1000:.0f} ms")))
    return rows
