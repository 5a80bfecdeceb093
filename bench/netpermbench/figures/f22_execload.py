# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 22, a compile's execs: 10,000 execs a second of a program that is no app, the daemon's CPU and a good
client's QUERY meanwhile, beside the same load with the daemon not hearing execs (BENCHMARKS.md)."""

import json
import os
import shutil
import subprocess
import tempfile
import time

from ..common import APP, HERE, BenchError, fmt, log, run, triple

PHASE = "execload"
EXEC_APP = "npbench-execapp"
# A second installed app (figure 23): the desktop's other app, already running in a launcher's scope.
OTHER_APP = "npbenchother"


def only_root_writes(path):
    """What the daemon asks of everyone's entries' programs (DesktopFiles.onlyRootWrites)."""
    p = os.path.realpath(path)
    while True:
        st = os.stat(p)
        if st.st_uid != 0 or st.st_mode & 0o022:
            return False
        if p == "/":
            return True
        p = os.path.dirname(p)


class ExecLoad:
    def exec_setup(self):
        """The program that is no app (static, no libc: the cheapest exec) and an installed app whose program the
        daemon looks for (a desktop entry in an XDG data directory of the bench's own), once per run."""
        if getattr(self, "exec_data", None):
            return
        # The kernel gives process events only in the initial network namespace: PID 1's where it may be read (a
        # hardened /proc refuses it); in any case the daemon's log says whether the kernel took its subscription
        # (start_exec_daemon).
        try:
            if os.stat("/proc/self/ns/net").st_ino != os.stat("/proc/1/ns/net").st_ino:
                raise BenchError("the bench is not in the initial network namespace (PID 1's): the kernel gives "
                                 "process events only there")
        except PermissionError:
            pass
        src, nop = os.path.join(HERE, "execnop.c"), self.tool("execnop")
        if not os.path.exists(nop) or os.path.getmtime(nop) < os.path.getmtime(src):
            run(["gcc", "-O2", "-static", "-nostdlib", "-o", nop + ".tmp", src], timeout=120)
            os.replace(nop + ".tmp", nop)
        # The daemon takes an everyone's entry's program only where root alone can write it and every directory above
        # it: a copy in a directory of the bench's own under /run (the tools' directory may be below /tmp).
        self.exec_dir = tempfile.mkdtemp(prefix="npbench-apps-", dir="/run")
        os.chmod(self.exec_dir, 0o755)
        program = os.path.join(self.exec_dir, "execapp")
        shutil.copy2(self.tool("execapp"), program)
        self.exec_program = program
        if not only_root_writes(program):
            raise BenchError(f"{program}: some directory above it is writable by others than root, so the daemon "
                             "would not take it for an installed app's program")
        self.exec_data = os.path.join(self.dir, "xdg")
        os.makedirs(os.path.join(self.exec_data, "applications"))
        with open(os.path.join(self.exec_data, "applications", EXEC_APP + ".desktop"), "w") as f:
            f.write(f"[Desktop Entry]\nType=Application\nName=Bench exec app\nExec={program}\n")
        self.exec_other = os.path.join(self.exec_dir, "otherapp")
        shutil.copy2(self.tool("execapp"), self.exec_other)
        with open(os.path.join(self.exec_data, "applications", OTHER_APP + ".desktop"), "w") as f:
            f.write(f"[Desktop Entry]\nType=Application\nName=Bench other app\nExec={self.exec_other}\n")

    def start_exec_daemon(self, name, hears, conf=None, enforcing=False):
        """netpermd in the bench namespace (entered with nsenter: the cgroup tree stays visible) with the installed
        app; `hears`: its process events opened in the bench runner's namespace, the initial one, so that it hears
        every exec of the system (without it the kernel refuses them to the daemon's own namespace). `conf`: the
        policy (the small one by default); `enforcing`: wait for its rules in force too."""
        sock = os.path.join(self.dir, f"{name}.sock")
        extra = ["--process-events-netns", f"/proc/{os.getpid()}/ns/net"] if hears else []
        d = self.spawn(["nsenter", f"--net=/run/netns/{self.ns}"]
                       + self.daemon_cmd(sock, conf or self.small_conf, os.path.join(self.dir, "state-" + name))
                       + extra, log_name=f"netpermd-{name}.log", env=dict(self.env, XDG_DATA_DIRS=self.exec_data))

        def ready():
            if d.poll() is not None:
                raise BenchError(f"netpermd ({name}) exited with {d.returncode}")
            if enforcing and json.loads(self.ask(sock, "STATUS", timeout=5))["enforcement"]["state"] != "enforcing":
                return False
            return EXEC_APP in self.ask(sock, "APPS", timeout=5)
        self.wait_for(ready, f"netpermd ({name}) listing {EXEC_APP}", 30)
        with open(os.path.join(self.dir, f"netpermd-{name}.log"), errors="replace") as f:
            refused = "process events: not heard" in f.read()
        if refused == hears:
            raise BenchError(f"netpermd ({name}) " + ("does not hear" if hears else "hears") + " the kernel's process "
                             "events" + (" (is the bench in the initial network namespace?)" if hears else ""))
        return d, sock

    def exec_metrics(self, sock):
        text = json.loads(self.ask(sock, "METRICS"))["metrics"]
        out = {}
        for line in text.splitlines():
            if line.startswith("netpermd_process_"):
                k, _, v = line.rpartition(" ")
                out[k] = int(float(v))
        return out

    def cpu_ticks_s(self, pid):
        """utime + stime of /proc/PID/stat, in seconds."""
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def exec_run(self, d, sock):
        """The load for exec_s seconds with a good client asking meanwhile; the daemon's CPU over the load."""
        c = self.c
        cpu0, t0 = self.cpu_ticks_s(d.pid), time.monotonic()
        load = self.spawn([self.tool("execload"), self.tool("execnop"), str(c["exec_rate"]), str(c["exec_s"]),
                           str(c["exec_workers"])], stdout=subprocess.PIPE)
        during = self.paced(sock, f"QUERY {APP}", c["exec_s"])
        out, _ = load.communicate(timeout=c["exec_s"] + 60)
        if load.returncode != 0:
            raise BenchError(f"execload exited with {load.returncode}")
        cpu, wall = self.cpu_ticks_s(d.pid) - cpu0, time.monotonic() - t0
        return {"load": json.loads(out), "cpu_s": cpu, "wall_s": wall, "during": during}

    def bench_execload(self):
        """22: a compile's execs (issue 47). The same load twice: the daemon hearing every exec (it stats
        /proc/PID/exe of each against the installed apps' programs), then a daemon that does not hear them; the
        good client at rest before."""
        c = self.c
        self.exec_setup()
        log(f"execload: {c['exec_rate']} execs a second of a program that is no app for {c['exec_s']} s, "
            "the daemon hearing them and not")
        r = {"rate": c["exec_rate"], "seconds": c["exec_s"], "workers": c["exec_workers"]}
        for name, hears in (("hearing", True), ("deaf", False)):
            d, sock = self.start_exec_daemon("exec-" + name, hears)
            try:
                if hears:
                    r["rest"] = self.paced(sock, f"QUERY {APP}", c["rest_s"])
                before = self.exec_metrics(sock)
                r[name] = self.exec_run(d, sock)
                # The edge tells its counts at most every 0.5 s: wait for the last.
                time.sleep(0.7)
                after = self.exec_metrics(sock)
                r[name]["heard"] = after["netpermd_process_execs_total"] - before["netpermd_process_execs_total"]
                r[name]["overruns"] = after["netpermd_process_events_overruns_total"]
                self.stop(d)
            finally:
                if d.poll() is None:
                    d.kill()
                    d.wait()
        made = r["hearing"]["load"]["execs"]
        if r["hearing"]["heard"] < made:
            raise BenchError(f"the daemon heard {r['hearing']['heard']} execs of the {made} the load made")
        if r["deaf"]["heard"] != 0:
            raise BenchError(f"the daemon without process events counted {r['deaf']['heard']} execs")
        self.results["execload"] = r


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "execload" in r:
        e = r["execload"]
        h, d = e["hearing"], e["deaf"]
        pct = 100 * h["cpu_s"] / h["wall_s"]
        base = 100 * d["cpu_s"] / d["wall_s"]
        rate = h["load"]["rate"]
        per_exec_us = 1e6 * (h["cpu_s"] - d["cpu_s"] * h["wall_s"] / d["wall_s"]) / max(h["load"]["execs"], 1)
        at_target = 100 * per_exec_us * e["rate"] / 1e6 + base
        rows.append((f"22 {e['rate']} execs/s of a program that is no app for {e['seconds']} s: daemon CPU "
                     "(% of a core)", f"{pct:.1f} at {rate:.0f}/s ({h['heard']} heard)",
                     f"not hearing execs: {base:.1f} at {d['load']['rate']:.0f}/s",
                     f"{per_exec_us:.2f} µs a heard exec; at {e['rate']}/s: {at_target:.1f}%",
                     "< 15% of a core at 10,000/s",
                     target("daemon CPU under 10,000 execs/s of no app < 15% of a core", at_target < 15,
                            f"{at_target:.1f}% ({pct:.1f}% measured at {rate:.0f}/s)")))
        p99 = h["during"]["rtt_us"]["p99"] / 1000
        rows.append(("22 the same: good client's QUERY (ms)", triple(h["during"]["rtt_us"], "ms"),
                     "at rest: " + triple(e["rest"]["rtt_us"], "ms"),
                     "not hearing execs, same load: " + triple(d["during"]["rtt_us"], "ms"), "p99 < 10 ms",
                     target("a good client's QUERY p99 under 10,000 execs/s < 10 ms", p99 < 10, f"{fmt(h['during']['rtt_us']['p99'], 'ms')} ms")))
    return rows
