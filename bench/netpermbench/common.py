# SPDX-License-Identifier: LGPL-2.1-or-later
"""What every figure of bench/bench.py shares: the links' names and the counts of a full and a smoke run, the
bench's namespace, its C tools' build, starting and stopping the daemon and the processes around it, the helpers
several figures use (queries, the enforcement's set-up, CPU readings), and the statistics and the results table.
Each figure's own set-up, measurement and rows are in figures/fNN_NAME.py."""

import datetime
import json
import os
import platform
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

# bench/, where the C tools and the results are, and the source tree above it.
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(HERE)
TOOLS = ["nllat", "echosrv", "qclient", "spawnloop", "fanout", "swarm", "startup", "storm", "tput", "inforce", "linkforce",
         "pacedq", "cgchurn", "silent", "flap", "desktopapps", "newscopes", "execload", "execfound", "execapp", "cgmove",
         "connflood"]
# Built against GLib (pkg-config gio-2.0): the GLib module's figures.
GLIB_TOOLS = ["glibmon"]
# Built against libsystemd's sd-bus (pkg-config libsystemd): the bus figure's client and baseline service.
BUS_TOOLS = ["busq", "bussrv"]
# Where `make release` builds the GLib module and its cache (GIO_EXTRA_MODULES points there).
GIO_MODULES = os.path.join(ROOT, ".build", "gio")

# Link names inside the namespace. bwifi0 is classified wifi by an [Interface] override and carries the default
# route; toggling its peer bwifi0p flips its carrier and with it benchapp's verdict. bfo0 (peer bfo0p kept down)
# is toggled by the fan-out rounds: one kernel message and one link event per toggle, no verdict change.
WIFI, WIFI_PEER, FANOUT_LINK, FANOUT_PEER = "bwifi0", "bwifi0p", "bfo0", "bfo0p"
APP = "benchapp"
# The enforcement figure: btp0 (classified wifi) in the bench namespace, its peer btp0p in a second namespace that
# runs the receiver; the sender runs as TPUT_UID, an app the policy allows on wifi.
TPUT_LINK, TPUT_PEER, TPUT_UID, TPUT_PORT = "btp0", "btp0p", 4242, "5201"
# The link-change figure: bwwan1 (classified wwan by an [Interface] override, denied to TPUT_UID) appears with its
# peer in the second namespace and the prefix of WWAN_NET; before, that prefix is routed to `unreachable`.
WWAN_LINK, WWAN_PEER, WWAN_NET, WWAN_ADDR, WWAN_PROBE = "bwwan1", "bwwan1p", "10.96.0.0/24", "10.96.0.1/24", "10.96.0.2"
# And bwl1 (wifi, allowed) routing WIFI_NET, renamed bwwan1: a link changing kind.
WIFI_LINK, WIFI_LINK_PEER, WIFI_ADDR, WIFI_PROBE = "bwl1", "bwl1p", "10.95.0.1/24", "10.95.0.2"
# Figures 14-16 (issue 22): bsil0 (wifi, many addresses) toggled under silent subscribers; bsoak0 (wwan) flapped in
# the soak. A good client asks at a steady pace (PACE_US apart) under each load and at rest.
SILENT_LINK, SILENT_PEER, SOAK_LINK, SOAK_PEER, PACE_US = "bsil0", "bsil0p", "bsoak0", "bsoak0p", 2000

FULL = dict(startup_runs=20, big_startup_runs=10, latency_toggles=200, latency_gap_ms=15, q1=20000, q8=100000,
            q64=100000, q_warmup=2000, q_max_s=60, cli=100, fanout=[1000, 10000], fanout_rounds=20,
            mem_warm=100000, mem_total=1000000, storm=10000, big_apps=10000, reloads=20, bigq=20000,
            big_routes=100000, route_changes=1000, route_latency_toggles=50, tput_rounds=12, tput_s=2, dgrams=200000, inforce_rounds=10, linkforce_rounds=20,
            glib_inits=30, glib_toggles=200,
            churn_scopes=5000, churn_s=10, churn_new=20, rest_s=3, silent_n=2000, silent_addrs=700, silent_s=5, silent_timeout=2, silent_wait=10,
            soak_s=60, soak_clients=16, soak_write_mb=1024, usage_reads=50, desktop_apps=300, desktop_s=20,
            exec_rate=10000, exec_s=10, exec_workers=4, exec_rounds=200, exec_gap_ms=20, bus_calls=20000, bus_warmup=1000,
            alarm_s=1800, report_rate=10000, report_s=10, report_rounds=2, report_spread=20000,
            reportdisk_days=7, reportdisk_conns=10000, reportdisk_names=1000, reportdisk_rate=5000)
SMOKE = dict(startup_runs=2, big_startup_runs=2, latency_toggles=6, latency_gap_ms=10, q1=300, q8=1000,
             q64=1000, q_warmup=50, q_max_s=20, cli=3, fanout=[20], fanout_rounds=3, mem_warm=500, mem_total=2000,
             storm=200, big_apps=200, reloads=2, bigq=300, big_routes=2000, route_changes=40,
             route_latency_toggles=4, tput_rounds=1, tput_s=0.3, dgrams=5000, inforce_rounds=2, linkforce_rounds=2,
             glib_inits=2, glib_toggles=4,
             churn_scopes=100, churn_s=1, churn_new=3, rest_s=0.5, silent_n=20, silent_addrs=20, silent_s=1, silent_timeout=1, silent_wait=1,
             soak_s=2, soak_clients=2, soak_write_mb=8, usage_reads=5, desktop_apps=5, desktop_s=1,
             exec_rate=500, exec_s=0.5, exec_workers=1, exec_rounds=4, exec_gap_ms=5, bus_calls=100, bus_warmup=10,
             alarm_s=240, report_rate=500, report_s=0.5, report_rounds=1, report_spread=200,
             reportdisk_days=2, reportdisk_conns=200, reportdisk_names=20, reportdisk_rate=1000)


PHASES = ["startup", "latency", "query", "cli", "memory", "fanout", "storm", "bigpolicy", "routes", "enforcement", "inforce", "linkforce",
          "decide", "steer", "reloadq", "glib", "churn", "silent", "soak", "usage", "desktop", "report",
          "execload", "execfound", "bus", "reportdisk"]


class BenchError(Exception):
    pass


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def run(cmd, check=True, timeout=60, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r



class BenchBase:
    def __init__(self, args):
        self.args = args
        self.c = dict(SMOKE if args.smoke else FULL)
        self.bin = args.bin
        self.ns = f"npbench-{os.getpid()}"
        self.ns_created = False
        self.peer_ns = None
        self.procs = []  # every process we start, stopped in cleanup()
        self.dir = tempfile.mkdtemp(prefix="npbench-", dir="/tmp")
        self.tools = os.path.join(ROOT, ".build", "bench")
        self.results = {}
        self.env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC",
                                                                       "LISTEN_FDS", "LISTEN_PID")}

    # ---- set-up and clean-up -------------------------------------------------------------------------------

    def preflight(self):
        if os.geteuid() != 0:
            raise BenchError("the benchmark creates a network namespace and must run as root")
        for tool in ("ip", "gcc", "socat"):
            if not shutil.which(tool):
                raise BenchError(f"{tool} is not installed")
        for d in [self.bin] + ([self.args.compare] if self.args.compare else []):
            for b in ("netpermd", "netpermctl"):
                if not os.access(os.path.join(d, b), os.X_OK):
                    raise BenchError(f"{d}/{b} is missing: build it (swift build -c release --static-swift-stdlib)")
        # 10,000 subscribers: the swarm and the daemon each need over 10,000 descriptors (children inherit this).
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 65536
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        self.nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        need = max(self.c["fanout"]) + 200
        if self.nofile < need:
            raise BenchError(f"the descriptor limit ({self.nofile}) is below {need}")

    def remove_leftovers(self):
        """Namespaces of earlier benchmark runs whose process is gone (killed with SIGKILL, say)."""
        out = run(["ip", "netns", "list"], check=False).stdout
        for line in out.splitlines():
            m = re.match(r"(npbench-(\d+))\b", line)
            if m and not os.path.exists(f"/proc/{m.group(2)}"):
                log(f"removing the leftover namespace {m.group(1)}")
                run(["ip", "netns", "del", m.group(1)], check=False)

    def build_tools(self):
        os.makedirs(self.tools, exist_ok=True)
        common = os.path.join(HERE, "common.h")
        for t in TOOLS:
            src, out = os.path.join(HERE, t + ".c"), os.path.join(self.tools, t)
            if os.path.exists(out) and os.path.getmtime(out) >= max(os.path.getmtime(src), os.path.getmtime(common)):
                continue
            tmp = f"{out}.{os.getpid()}.tmp"   # concurrent runs never see a half-written tool
            run(["gcc", "-O2", "-Wall", "-Wextra", "-o", tmp, src, "-lpthread"], timeout=120)
            os.replace(tmp, out)

        for t in GLIB_TOOLS + BUS_TOOLS:
            src, out = os.path.join(HERE, t + ".c"), os.path.join(self.tools, t)
            if os.path.exists(out) and os.path.getmtime(out) >= max(os.path.getmtime(src), os.path.getmtime(common)):
                continue
            flags = run(["pkg-config", "--cflags", "--libs", "gio-2.0" if t in GLIB_TOOLS else "libsystemd"]).stdout.split()
            tmp = f"{out}.{os.getpid()}.tmp"
            run(["gcc", "-O2", "-Wall", "-Wextra", "-o", tmp, src] + flags + ["-lpthread"], timeout=120)
            os.replace(tmp, out)

    def tool(self, name):
        return os.path.join(self.tools, name)

    def setup_namespace(self):
        ns = self.ns
        run(["ip", "netns", "add", ns])
        self.ns_created = True
        nsx = ["ip", "netns", "exec", ns]
        # No IPv6: link-local addresses and DAD would add address events a few ms after every carrier change.
        run(nsx + ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"])
        ipn = ["ip", "-n", ns]
        run(ipn + ["link", "set", "lo", "up"])
        run(ipn + ["link", "add", WIFI, "type", "veth", "peer", "name", WIFI_PEER])
        run(ipn + ["link", "add", FANOUT_LINK, "type", "veth", "peer", "name", FANOUT_PEER])
        run(ipn + ["addr", "add", "10.99.0.1/24", "dev", WIFI])
        for l in (WIFI, WIFI_PEER, FANOUT_LINK):
            run(ipn + ["link", "set", l, "up"])
        run(ipn + ["route", "add", "default", "via", "10.99.0.2", "dev", WIFI])
        self.wait_for(lambda: self.kernel_link(WIFI)["operstate"] == "UP", "bwifi0 operstate up", 5)

    def kernel_link(self, name):
        out = run(["ip", "-n", self.ns, "-j", "link", "show", "dev", name]).stdout
        return json.loads(out)[0]

    def cleanup(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    p.terminate()
                    p.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=3)
                except ProcessLookupError:
                    pass
        if getattr(self, "exec_dir", None):
            shutil.rmtree(self.exec_dir, ignore_errors=True)
        if self.peer_ns:
            run(["ip", "netns", "del", self.peer_ns], check=False)
        if self.ns_created:
            run(["ip", "netns", "del", self.ns], check=False)
            if self.ns in run(["ip", "netns", "list"], check=False).stdout.split():
                log(f"warning: namespace {self.ns} is still listed")

    # ---- helpers -------------------------------------------------------------------------------------------

    def wait_for(self, cond, what, timeout):
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            try:
                if cond():
                    return
            except Exception as e:  # noqa: BLE001 - keep polling, report the last problem
                last = e
            time.sleep(0.01)
        raise BenchError(f"timed out waiting for {what}" + (f" ({last})" if last else ""))

    def ask(self, path, line, timeout=10):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall((line + "\n").encode())
            buf = b""
            while b"\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return buf.split(b"\n", 1)[0].decode()

    def spawn(self, cmd, log_name=None, stdin=subprocess.DEVNULL, stdout=None, in_ns=False, env=None):
        if in_ns:
            cmd = ["ip", "netns", "exec", self.ns] + cmd
        logf = open(os.path.join(self.dir, log_name), "ab") if log_name else subprocess.DEVNULL
        p = subprocess.Popen(cmd, stdin=stdin, stdout=stdout if stdout is not None else logf, stderr=logf,
                             env=env or self.env, text=stdout is not None)
        self.procs.append(p)
        return p

    def stop(self, p, timeout=5):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=3)
                raise BenchError(f"{p.args[0]} (pid {p.pid}) ignored SIGTERM for {timeout} s")

    def tool_json(self, cmd, in_ns=False, timeout=300, name=None):
        if in_ns:
            cmd = ["ip", "netns", "exec", self.ns] + cmd
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           env=self.env)
        if r.returncode != 0 or not r.stdout.strip():
            raise BenchError(f"{name or os.path.basename(cmd[0])} failed ({r.returncode}): {r.stderr.strip()[-3000:]}"
                             + self.daemon_log_tail())
        return json.loads(r.stdout.strip().splitlines()[-1])

    def daemon_log_tail(self):
        path = os.path.join(self.dir, "netpermd.log")
        if not os.path.exists(path):
            return ""
        with open(path, errors="replace") as f:
            return "\n--- netpermd.log (tail) ---\n" + f.read()[-3000:]

    def rss_kb(self, pid):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise BenchError(f"no VmRSS for pid {pid}")

    def write_configs(self):
        confdir = os.path.join(self.dir, "conf")
        bigdir = os.path.join(self.dir, "bigconf")
        os.makedirs(confdir)
        os.makedirs(bigdir)
        header = (f"[Interface {WIFI}]\nKind=wifi\n\n"
                  f"[App {APP}]\nExecutable=/opt/npbench/{APP}\nWiFi=allow\nWWAN=deny\nEthernet=deny\nOther=deny\n")
        self.small_conf = os.path.join(confdir, "netpermd.conf")
        with open(self.small_conf, "w") as f:
            f.write(header)
        # The big policy: benchapp plus N apps over many of the 81 permission sets, half matched by executable,
        # some by a glob, some by unit.
        perms = ["allow", "deny", "ask"]
        parts = [header]
        for i in range(self.c["big_apps"]):
            w, ww, e, o = perms[i % 3], perms[(i // 3) % 3], perms[(i // 9) % 3], perms[(i // 27) % 3]
            ident = (f"Executable=/opt/npbench/app{i:05d}" if i % 4 else f"Executable=/opt/npbench/app{i:05d}/*")
            if i % 10 == 5:
                ident = f"Unit=npbench-app{i:05d}.service"
            parts.append(f"\n[App app{i:05d}]\n{ident}\nWiFi={w}\nWWAN={ww}\nEthernet={e}\nOther={o}\n")
        self.big_conf = os.path.join(bigdir, "netpermd.conf")
        with open(self.big_conf, "w") as f:
            f.write("".join(parts))
        self.big_app = f"app{self.c['big_apps'] // 2:05d}"

    def daemon_cmd(self, sock, conf, state):
        os.makedirs(state, exist_ok=True)
        return [os.path.join(self.bin, "netpermd"), "--socket", sock, "--config", conf, "--state-dir", state]

    def start_daemon(self, sock, conf, state, log_name):
        p = self.spawn(self.daemon_cmd(sock, conf, state), log_name=log_name, in_ns=True)

        def answering():
            if p.poll() is not None:
                raise BenchError(f"netpermd exited with {p.returncode} while starting" + self.daemon_log_tail())
            return self.ask(sock, "PING", timeout=2) == '{"ok":true,"pong":true}'
        self.wait_for(answering, f"netpermd on {sock}", 15)
        with open(f"/proc/{p.pid}/comm") as f:
            if f.read().strip() != "netpermd":
                raise BenchError("`ip netns exec` did not exec netpermd in place")
        return p

    # ---- what several figures use --------------------------------------------------------------------------

    def qclient(self, sock, request, clients, total, warmup=None):
        c = self.c
        return self.tool_json([self.tool("qclient"), sock, request, str(clients), str(total),
                               str(c["q_warmup"] if warmup is None else warmup), str(c["q_max_s"])],
                              timeout=c["q_max_s"] + 60)

    def start_echo(self):
        """The echo baseline, answering with replies as long as netpermd's QUERY reply."""
        probe = self.qclient(self.sock, f"QUERY {APP}", 1, 5, 0)
        self.reply_len = probe["reply_len"]
        self.echo_sock = os.path.join(self.dir, "echo.sock")
        self.echo = self.spawn([self.tool("echosrv"), self.echo_sock, str(self.reply_len)], log_name="echosrv.log")
        self.wait_for(lambda: os.path.exists(self.echo_sock), "the echo server", 5)
        self.results["rss_kb"]["echo_server"] = self.rss_kb(self.echo.pid)

    def cpu_ns(self, pid):
        """The CPU time a process has used, in nanoseconds (the first field of /proc/PID/schedstat)."""
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])

    def route_changes(self, table, count):
        """`count` route changes (a host route added and deleted in turn) in `table`; the daemon's CPU per change,
        in microseconds, once it has read them all."""
        path = os.path.join(self.dir, "route-changes.batch")
        with open(path, "w") as f:
            for i in range(count):
                f.write(f"route {'add' if i % 2 == 0 else 'del'} 10.250.250.250/32 dev {WIFI} table {table}\n")
        t0 = self.cpu_ns(self.daemon.pid)
        run(["ip", "-n", self.ns, "-batch", path], timeout=120)
        # The daemon reads what the kernel announced at its own pace: let it finish (its CPU stops moving).
        self.settle_cpu(self.daemon.pid)
        return (self.cpu_ns(self.daemon.pid) - t0) / 1000 / count

    def settle_cpu(self, pid, quiet_s=0.3, bound_s=60):
        last, since, deadline = self.cpu_ns(pid), time.monotonic(), time.monotonic() + bound_s
        while time.monotonic() < deadline:
            time.sleep(0.05)
            now = self.cpu_ns(pid)
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return
        raise BenchError(f"netpermd kept using the CPU for {bound_s} s")

    def remove_rules(self):
        """A stopped daemon leaves its rules in force: `netpermd --remove-rules` takes them out."""
        run(["ip", "netns", "exec", self.ns, os.path.join(self.bin, "netpermd"), "--remove-rules"])

    def nft_table_loaded(self, table="netpermd"):
        return run(["ip", "netns", "exec", self.ns, "nft", "list", "table", "inet", table], check=False).returncode == 0

    def tput_send(self, uid, check=True):
        cmd = ["ip", "netns", "exec", self.ns, "setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
               self.tool("tput"), "send", "10.97.0.2", TPUT_PORT, str(self.c["tput_s"])]
        if check:
            return self.tool_json(cmd, timeout=60, name="tput send")
        return run(cmd, check=False, timeout=60)

    def tput_links(self):
        """btp0 in the bench namespace, btp0p in a second one (deleted by cleanup), the receiver there."""
        if self.peer_ns:
            return
        self.peer_ns = self.ns + "-peer"
        run(["ip", "netns", "add", self.peer_ns])
        ipn, ipp = ["ip", "-n", self.ns], ["ip", "-n", self.peer_ns]
        run(ipn + ["link", "add", TPUT_LINK, "type", "veth", "peer", "name", TPUT_PEER, "netns", self.peer_ns])
        run(ipn + ["addr", "add", "10.97.0.1/24", "dev", TPUT_LINK])
        run(ipn + ["link", "set", TPUT_LINK, "up"])
        run(ipp + ["addr", "add", "10.97.0.2/24", "dev", TPUT_PEER])
        run(ipp + ["link", "set", TPUT_PEER, "up"])
        run(ipp + ["link", "set", "lo", "up"])
        self.tput_recv = self.spawn(["ip", "netns", "exec", self.peer_ns, self.tool("tput"), "recv", TPUT_PORT],
                                    log_name="tput.log")
        self.wait_for(lambda: run(["ip", "netns", "exec", self.peer_ns, "ss", "-ltnH", f"sport = :{TPUT_PORT}"]).stdout.strip(),
                      "the tput receiver", 5)

    def enforce_conf(self, path, apps, wifi="allow", rotate=0):
        """Mode=block; the app TPUT_UID with WiFi=`wifi`, then `apps` User= apps over all 81 permission sets
        (`rotate`: each app's permissions moved on by that many, which changes most of the table)."""
        perms = ["allow", "deny", "ask"][rotate % 3:] + ["allow", "deny", "ask"][:rotate % 3]
        # No desktop apps: the daemon follows the host's cgroups, and other programs' app scopes coming and going
        # (a test's) would change the table it measures, and the nft -f baseline's copy of it.
        parts = [f"[Interface {TPUT_LINK}]\nKind=wifi\n\n[Enforcement]\nMode=block\n\n[Defaults]\nDesktopApps=no\n\n"
                 f"[App tputapp]\nUser={TPUT_UID}\nWiFi={wifi}\nWWAN=deny\nEthernet=deny\nOther=deny\n"]
        for i in range(apps):
            parts.append(f"\n[App uapp{i:05d}]\nUser={200000 + i}\nWiFi={perms[i % 3]}\nWWAN={perms[(i // 3) % 3]}\n"
                         f"Ethernet={perms[(i // 9) % 3]}\nOther={perms[(i // 27) % 3]}\n")
        with open(path + ".tmp", "w") as f:
            f.write("".join(parts))
        os.replace(path + ".tmp", path)

    def start_in_force(self, sock, conf, part, state, table, what, name, extra=(), timeout=30):
        """netpermd until STATUS says its `part` (enforcement, usage) is `state` and the kernel has `table`. Entered
        with nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup tree the daemon reads."""
        d = self.spawn(["nsenter", f"--net=/run/netns/{self.ns}"]
                       + self.daemon_cmd(sock, conf, os.path.join(self.dir, "state-" + name)) + list(extra),
                       log_name=f"netpermd-{name}.log")

        def ready():
            if d.poll() is not None:
                raise BenchError(f"netpermd ({what}) exited with {d.returncode}" + self.daemon_log_tail())
            return json.loads(self.ask(sock, "STATUS", timeout=5))[part]["state"] == state
        self.wait_for(ready, f"the rules of {what} in force", timeout)
        if not self.nft_table_loaded(table):
            raise BenchError(f"STATUS says {state} but the kernel has no table inet {table}")
        return d

    def start_enforcing(self, sock, conf, extra=(), timeout=30):
        return self.start_in_force(sock, conf, "enforcement", "enforcing", "netpermd", "Mode=block", "enforce", extra,
                                   timeout)

    def udp_passes(self):
        return run(["ip", "netns", "exec", self.ns, "setpriv", "--reuid", str(TPUT_UID), "--regid", str(TPUT_UID),
                    "--clear-groups", "bash", "-c", "echo x >/dev/udp/10.97.0.2/9"], check=False).returncode == 0

    def tput_dgrams(self):
        return self.tool_json(["ip", "netns", "exec", self.ns, "setpriv", "--reuid", str(TPUT_UID), "--regid", str(TPUT_UID),
                               "--clear-groups", self.tool("tput"), "dgram", "10.97.0.2", "9", str(self.c["dgrams"])],
                              timeout=60, name="tput dgram")

    def paced(self, sock, request, seconds):
        """A good client's round trips, one request every PACE_US (figures 14-16)."""
        return self.tool_json([self.tool("pacedq"), sock, request, str(PACE_US), str(seconds)], timeout=seconds + 60,
                              name="pacedq")

    def cgroup_root(self):
        with open("/proc/self/mountinfo") as f:
            for line in f:
                head, _, tail = line.partition(" - ")
                if tail.split(" ")[0] == "cgroup2" and head.split(" ")[3] == "/":
                    return head.split(" ")[4]
        raise BenchError("no cgroup2 hierarchy in /proc/self/mountinfo")

    # ---- the whole run -------------------------------------------------------------------------------------

    def main(self):
        t_start = time.monotonic()
        self.preflight()
        self.remove_leftovers()
        self.build_tools()
        self.setup_namespace()
        self.write_configs()
        phases = self.args.only.split(",") if self.args.only else PHASES
        unknown = set(phases) - set(PHASES)
        if unknown:
            raise BenchError(f"unknown phase(s) {', '.join(sorted(unknown))}; phases: {', '.join(PHASES)}")
        if not self.args.compare:
            self.run_phases(phases)
            self.results["seconds"] = round(time.monotonic() - t_start, 1)
            return self.results
        # Two builds in the same run (--compare): each round runs the phases with one build, then the other (the
        # order alternating from round to round), so both see the same machine and the same other load.
        # Each run has a directory of its own (state, sockets, logs) below the bench's.
        builds = [("before", self.args.compare), ("after", self.args.bin)]
        runs, top = [], self.dir
        try:
            for k in range(self.args.rounds):
                for label, path in (builds if k % 2 == 0 else builds[::-1]):
                    log(f"round {k + 1} of {self.args.rounds}: the {label} build ({path})")
                    self.bin, self.results = path, {}
                    self.dir = os.path.join(top, f"{label}{k + 1}")
                    os.makedirs(self.dir)
                    load = os.getloadavg()
                    self.run_phases(phases)
                    runs.append({"build": label, "bin": path, "round": k + 1,
                                 "load": [round(a, 2) for a in load], "results": self.results})
        finally:
            self.bin, self.dir = self.args.bin, top
        return {"seconds": round(time.monotonic() - t_start, 1), "runs": runs}

    def run_phases(self, phases):
        """The selected phases with the build in `self.bin`, the results in `self.results`."""
        if "startup" in phases:
            self.bench_startup()
        self.sock = os.path.join(self.dir, "netpermd.sock")
        self.daemon = self.start_daemon(self.sock, self.small_conf, os.path.join(self.dir, "state"), "netpermd.log")
        time.sleep(0.3)
        self.results["rss_kb"] = {"idle": self.rss_kb(self.daemon.pid)}
        self.results["memory_idle"] = memory_breakdown(self.daemon.pid)
        self.start_echo()
        for name in PHASES[1:]:
            if name in phases:
                getattr(self, "bench_" + name)()
        self.stop(self.daemon)
        self.stop(self.echo)


# ---- statistics and the report -----------------------------------------------------------------------------

def pct(sorted_v, p):
    if not sorted_v:
        return 0.0
    rank = max(1, min(len(sorted_v), int(-(-p * len(sorted_v) // 100))))
    return sorted_v[rank - 1]


def stats(values):
    v = sorted(values)
    return {"n": len(v), "min": v[0] if v else 0, "median": pct(v, 50), "p99": pct(v, 99),
            "max": v[-1] if v else 0, "mean": sum(v) / len(v) if v else 0}


def memory_breakdown(pid):
    """RSS split into anonymous memory and the file-backed pages of each mapped file, in kB."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Rss", "Pss", "Anonymous", "Pss_Anon", "Pss_File"):
                out[k.lower()] = int(v.split()[0])
    files, name = {}, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                name = parts[5] if len(parts) > 5 else "[anon]"
            elif line.startswith("Rss:"):
                files[name] = files.get(name, 0) + int(line.split()[1])
    out["by_mapping"] = dict(sorted(((k, v) for k, v in files.items() if v), key=lambda kv: -kv[1]))
    return out


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def fmt(x, unit):
    """µs in, the unit out."""
    if unit == "ms":
        x = x / 1000
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def triple(s, unit):
    return f"{fmt(s['min'], unit)} / {fmt(s['median'], unit)} / {fmt(s['p99'], unit)}"


def paired_rows(target, fig, e, title, cost, target_name):
    """A sender's TCP bulk and 64-byte datagrams with rules and without, in paired cycles (figures 10 and 20):
    each cycle measured both sides back to back, so the figure is the median of its ratios."""
    on, off = sorted(e["on_mbit_s"]), sorted(e["off_mbit_s"])
    ratios = sorted(a / b for a, b in zip(e["on_mbit_s"], e["off_mbit_s"]))
    ratio = pct(ratios, 50)
    out = [(f"{fig} {title} (Mbit/s)", f"{on[0]:.0f} / {pct(on, 50):.0f} / {on[-1]:.0f}",
            f"no rules: {off[0]:.0f} / {pct(off, 50):.0f} / {off[-1]:.0f}",
            f"cycles' ratios: median x{ratio:.3f} (min x{ratios[0]:.2f}, max x{ratios[-1]:.2f}; "
            f"{len(ratios)} cycles of {e['seconds']} s a side)", ">= 0.95x of no rules",
            target(target_name, ratio >= 0.95, f"ratio {ratio:.3f}"))]
    if "on_dgram_cpu_ns" in e:
        don, doff = sorted(e["on_dgram_cpu_ns"]), sorted(e["off_dgram_cpu_ns"])
        extra = sorted(a - b for a, b in zip(e["on_dgram_cpu_ns"], e["off_dgram_cpu_ns"]))
        times = sorted(a / b for a, b in zip(e["on_dgram_cpu_ns"], e["off_dgram_cpu_ns"]))
        out.append((f"{fig} 64-byte datagram of the same app: sender's CPU per datagram (ns)",
                    f"{don[0]:.0f} / {pct(don, 50):.0f} / {don[-1]:.0f}",
                    f"no rules: {doff[0]:.0f} / {pct(doff, 50):.0f} / {doff[-1]:.0f}",
                    f"{cost}: median {pct(extra, 50):+.0f} ns a packet (x{pct(times, 50):.2f}; "
                    f"{e['dgrams']} datagrams a side)", "", ""))
    return out


def build_rows(r, smoke, figures):
    """(figure, netpermd, baseline, comparison, target, met) rows, and the targets as data, each figure's in the
    table's order (`figures`). Only the phases that ran have rows."""
    rows, targets = [], []

    def target(name, ok, detail):
        targets.append({"target": name, "met": bool(ok), "detail": detail})
        return "met" if ok else "MISSED"

    for figure in figures:
        rows += figure.rows(r, smoke, target)
    return rows, targets


def render(rows):
    head = ("figure", "netpermd min / median / p99", "baseline min / median / p99", "comparison", "target", "")
    table = [head] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = []
    for i, r in enumerate(table):
        lines.append("| " + " | ".join(c.ljust(widths[k]) for k, c in enumerate(r)) + " |")
        if i == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)
