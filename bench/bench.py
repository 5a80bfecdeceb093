#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""netpermd benchmarks, each figure beside its physical baseline measured in the same run.

    python3 bench/bench.py --bin DIR            # full run: table on stdout, bench/results/latest.json
    python3 bench/bench.py --bin DIR --smoke    # tiny counts: checks the harness end to end (not performance)

Needs root (network namespaces), gcc, ip, socat. Everything happens in a namespace of its own
(npbench-PID) with veth pairs and on Unix sockets under a temporary directory; the host's links are never
touched. Every loop is bounded in count and time, and whatever was started is stopped and the namespace
deleted on the way out (exceptions, SIGINT, SIGTERM, and a global alarm included). Python standard library
only; the load generators and baselines are the C programs next to this file, compiled with gcc -O2 into
.build/bench.
"""

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOOLS = ["nllat", "echosrv", "qclient", "spawnloop", "fanout", "swarm", "startup", "storm", "tput", "inforce", "linkforce",
         "pacedq", "cgchurn", "silent", "flap", "desktopapps", "newscopes"]
# Built against GLib (pkg-config gio-2.0): the GLib module's figures.
GLIB_TOOLS = ["glibmon"]
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
            soak_s=60, soak_clients=16, soak_write_mb=1024, usage_reads=50, desktop_apps=300, desktop_s=20, alarm_s=1500)
SMOKE = dict(startup_runs=2, big_startup_runs=2, latency_toggles=6, latency_gap_ms=10, q1=300, q8=1000,
             q64=1000, q_warmup=50, q_max_s=20, cli=3, fanout=[20], fanout_rounds=3, mem_warm=500, mem_total=2000,
             storm=200, big_apps=200, reloads=2, bigq=300, big_routes=2000, route_changes=40,
             route_latency_toggles=4, tput_rounds=1, tput_s=0.3, dgrams=5000, inforce_rounds=2, linkforce_rounds=2,
             glib_inits=2, glib_toggles=4,
             churn_scopes=100, churn_s=1, churn_new=3, rest_s=0.5, silent_n=20, silent_addrs=20, silent_s=1, silent_timeout=1, silent_wait=1,
             soak_s=2, soak_clients=2, soak_write_mb=8, usage_reads=5, desktop_apps=5, desktop_s=1, alarm_s=240)


PHASES = ["startup", "latency", "query", "cli", "memory", "fanout", "storm", "bigpolicy", "routes", "enforcement", "inforce", "linkforce",
          "decide", "steer", "reloadq", "glib", "churn", "silent", "soak", "usage", "desktop"]


class BenchError(Exception):
    pass


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def run(cmd, check=True, timeout=60, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r


class Bench:
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
        for b in ("netpermd", "netpermctl"):
            if not os.access(os.path.join(self.bin, b), os.X_OK):
                raise BenchError(f"{self.bin}/{b} is missing: build it (swift build -c release --static-swift-stdlib)")
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

        for t in GLIB_TOOLS:
            src, out = os.path.join(HERE, t + ".c"), os.path.join(self.tools, t)
            if os.path.exists(out) and os.path.getmtime(out) >= max(os.path.getmtime(src), os.path.getmtime(common)):
                continue
            flags = run(["pkg-config", "--cflags", "--libs", "gio-2.0"]).stdout.split()
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

    def spawn(self, cmd, log_name=None, stdin=subprocess.DEVNULL, stdout=None, in_ns=False):
        if in_ns:
            cmd = ["ip", "netns", "exec", self.ns] + cmd
        logf = open(os.path.join(self.dir, log_name), "ab") if log_name else subprocess.DEVNULL
        p = subprocess.Popen(cmd, stdin=stdin, stdout=stdout if stdout is not None else logf, stderr=logf,
                             env=self.env, text=stdout is not None)
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

    # ---- the figures ---------------------------------------------------------------------------------------

    def bench_startup(self):
        """6 (and 8's load time): exec to READY=1 and to the first answered query."""
        c = self.c
        sock = os.path.join(self.dir, "startup.sock")
        state = os.path.join(self.dir, "state-startup")
        req = f"QUERY {APP}"
        log("start-up: netpermd, echo baseline, 10,000-app policy")
        self.results["startup"] = self.tool_json(
            [self.tool("startup"), self.ns, str(c["startup_runs"]), sock, req, "--"]
            + self.daemon_cmd(sock, self.small_conf, state), name="startup (netpermd)")
        self.results["startup_echo"] = self.tool_json(
            [self.tool("startup"), self.ns, str(c["startup_runs"]), sock, req, "--", self.tool("echosrv"), sock,
             "330"], name="startup (echo)")
        self.results["startup_big"] = self.tool_json(
            [self.tool("startup"), self.ns, str(c["big_startup_runs"]), sock, f"QUERY {self.big_app}", "--"]
            + self.daemon_cmd(sock, self.big_conf, state), name="startup (10,000 apps)")

    def bench_latency(self):
        c = self.c
        log(f"event latency: {c['latency_toggles']} toggles")
        self.results["latency"] = self.tool_json(
            [self.tool("nllat"), self.sock, WIFI_PEER, WIFI, APP, str(c["latency_toggles"]),
             str(c["latency_gap_ms"])], in_ns=True, timeout=120)
        self.wait_for(lambda: self.kernel_link(WIFI)["operstate"] == "UP", "bwifi0 back up", 5)

    def qclient(self, sock, request, clients, total, warmup=None):
        c = self.c
        return self.tool_json([self.tool("qclient"), sock, request, str(clients), str(total),
                               str(c["q_warmup"] if warmup is None else warmup), str(c["q_max_s"])],
                              timeout=c["q_max_s"] + 60)

    def bench_query(self):
        c = self.c
        req = f"QUERY {APP}"
        echo_sock = self.echo_sock
        out = {}
        for clients, total in ((1, c["q1"]), (8, c["q8"]), (64, c["q64"])):
            log(f"queries: {clients} client(s), {total} each against netpermd and the echo server")
            out[f"netpermd_{clients}"] = self.qclient(self.sock, req, clients, total)
            out[f"echo_{clients}"] = self.qclient(echo_sock, req, clients, total)
        # The same query in two spellings, alternating on each connection, so none is answered from the
        # per-connection reply cache: every request is parsed, matched, decided and encoded.
        log(f"queries: 8 clients, {c['q8']} each, uncached")
        out["netpermd_8_uncached"] = self.qclient(self.sock, f"{req}|{req.lower()}", 8, c["q8"])
        self.results["query"] = out

    def start_echo(self):
        """The echo baseline, answering with replies as long as netpermd's QUERY reply."""
        probe = self.qclient(self.sock, f"QUERY {APP}", 1, 5, 0)
        self.reply_len = probe["reply_len"]
        self.echo_sock = os.path.join(self.dir, "echo.sock")
        self.echo = self.spawn([self.tool("echosrv"), self.echo_sock, str(self.reply_len)], log_name="echosrv.log")
        self.wait_for(lambda: os.path.exists(self.echo_sock), "the echo server", 5)
        self.results["rss_kb"]["echo_server"] = self.rss_kb(self.echo.pid)

    def bench_cli(self):
        c = self.c
        log(f"one-shot CLI: {c['cli']} netpermctl and socat processes")
        qfile = os.path.join(self.dir, "query.txt")
        with open(qfile, "w") as f:
            f.write(f"QUERY {APP}\n")
        out = os.path.join(self.dir, "cli.out")
        ctl = self.tool_json([self.tool("spawnloop"), str(c["cli"]), "/dev/null", out, "--",
                              os.path.join(self.bin, "netpermctl"), "--socket", self.sock, "query", APP])
        socat = self.tool_json([self.tool("spawnloop"), str(c["cli"]), qfile, out, "--", shutil.which("socat"),
                                "-t", "2", "-", f"UNIX-CONNECT:{self.sock}"])
        self.results["cli"] = {"netpermctl": ctl, "socat": socat}

    def bench_memory(self):
        c = self.c
        log(f"memory: {c['mem_total']} queries")
        rss = self.results["rss_kb"]
        rss["before_queries"] = self.rss_kb(self.daemon.pid)
        warm = self.qclient(self.sock, f"QUERY {APP}", 8, c["mem_warm"], 0)
        rss["after_warm"] = self.rss_kb(self.daemon.pid)
        rest = self.qclient(self.sock, f"QUERY {APP}", 8, c["mem_total"] - c["mem_warm"], 0)
        rss["after_all_queries"] = self.rss_kb(self.daemon.pid)
        self.results["memory_queries"] = {"warm": warm, "rest": rest}
        self.results["memory_after_queries"] = memory_breakdown(self.daemon.pid)

    def swarm(self, sock, n):
        c = self.c
        p = self.spawn([self.tool("swarm"), sock, str(n), str(c["fanout_rounds"]), FANOUT_LINK],
                       log_name="swarm.log", stdin=subprocess.PIPE, stdout=subprocess.PIPE, in_ns=True)
        try:
            line = self.read_line(p, 180, "the swarm to connect")
            connected = json.loads(line)
            yield connected
            p.stdin.write("go\n")
            p.stdin.flush()
            result = json.loads(self.read_line(p, 60 + c["fanout_rounds"] * 15, "the fan-out rounds"))
            yield result
        finally:
            if p.poll() is None:
                p.stdin.close()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            if p.returncode not in (0, None):
                raise BenchError(f"swarm exited {p.returncode}; see {self.dir}/swarm.log")

    def read_line(self, p, timeout, what):
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise BenchError(f"timed out waiting for {what}")
        line = p.stdout.readline()
        if not line:
            with open(os.path.join(self.dir, "swarm.log"), errors="replace") as f:
                raise BenchError(f"{what}: the swarm ended early: {f.read()[-2000:]}")
        return line

    def bench_fanout(self):
        out = {}
        fo_sock = os.path.join(self.dir, "fanout.sock")
        for n in self.c["fanout"]:
            log(f"fan-out: {n} subscribers of netpermd")
            g = self.swarm(self.sock, n)
            connected = next(g)
            self.results["rss_kb"][f"subscribers_{n}"] = self.rss_kb(self.daemon.pid)
            res = next(g)
            self.results["rss_kb"][f"subscribers_{n}_after_events"] = self.rss_kb(self.daemon.pid)
            g.close()
            # Every subscriber leaves at once: how long until the daemon answers someone else again.
            t0 = time.monotonic()
            self.wait_for(lambda: self.ask(self.sock, "STATUS", timeout=60).startswith('{"ok":true'),
                          "netpermd after the swarm left", 60)
            res["leave_ms"] = (time.monotonic() - t0) * 1000
            t0 = time.monotonic()
            self.ask(self.sock, "STATUS")
            res["idle_status_ms"] = (time.monotonic() - t0) * 1000
            res["setup_ms"] = connected["setup_ms"]
            out[f"netpermd_{n}"] = res
            log(f"fan-out: {n} subscribers of the raw fan-out loop")
            fo = self.spawn([self.tool("fanout"), fo_sock, str(res["event_len"])], log_name="fanout.log", in_ns=True)
            self.wait_for(lambda: os.path.exists(fo_sock), "the fan-out server", 5)
            g = self.swarm(fo_sock, n)
            connected = next(g)
            res = next(g)
            g.close()
            res["setup_ms"] = connected["setup_ms"]
            out[f"raw_{n}"] = res
            self.stop(fo)
            os.unlink(fo_sock)
        self.results["fanout"] = out
        self.wait_for(lambda: self.ask(self.sock, "STATUS").startswith('{"ok":true'), "netpermd after the swarm", 10)
        # The swarm's connections are gone; the daemon's picture is back to idle.
        self.results["rss_kb"]["after_subscribers_left"] = self.rss_kb(self.daemon.pid)

    def bench_storm(self):
        c = self.c
        log(f"storm: {c['storm']} toggles")
        logpath = os.path.join(self.dir, "netpermd.log")
        before = os.path.getsize(logpath)
        res = self.tool_json([self.tool("storm"), self.sock, WIFI_PEER, WIFI, FANOUT_LINK, "10.98.0.1",
                              str(c["storm"])], in_ns=True, timeout=120)
        with open(logpath, errors="replace") as f:
            f.seek(before)
            text = f.read()
        res["daemon_resyncs_after_overrun"] = text.count("reading everything again")
        res["daemon_alive"] = self.ask(self.sock, "PING") == '{"ok":true,"pong":true}'
        if not res["daemon_alive"]:
            raise BenchError("netpermd stopped answering after the storm" + self.daemon_log_tail())
        self.results["storm"] = res

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

    def bench_routes(self):
        """9: a route change's cost with a full table in a non-main table, beside an empty one in the same run."""
        c = self.c
        n, k = c["big_routes"], c["route_changes"]
        log(f"routes: {k} changes with an empty table 200, then with {n} routes in it")
        empty = self.route_changes(200, k)
        path = os.path.join(self.dir, "full-table.batch")
        with open(path, "w") as f:
            for i in range(n):
                f.write(f"route add 10.{100 + i // 65536}.{(i // 256) % 256}.{i % 256}/32 dev {WIFI} table 200\n")
        t0 = self.cpu_ns(self.daemon.pid)
        started = time.monotonic()
        run(["ip", "-n", self.ns, "-batch", path], timeout=600)
        self.settle_cpu(self.daemon.pid)
        fill = {"routes": n, "daemon_cpu_ms": (self.cpu_ns(self.daemon.pid) - t0) / 1e6,
                "wall_ms": (time.monotonic() - started) * 1000}
        full = self.route_changes(200, k)
        lat = self.tool_json([self.tool("nllat"), self.sock, WIFI_PEER, WIFI, APP, str(c["route_latency_toggles"]),
                              str(c["latency_gap_ms"])], in_ns=True, timeout=120)
        run(["ip", "-n", self.ns, "route", "flush", "table", "200"], timeout=120)
        self.settle_cpu(self.daemon.pid)
        self.results["routes"] = {"changes": k, "empty_us_per_change": empty, "full_us_per_change": full,
                                  "fill": fill, "latency_full": lat, "rss_kb_full": self.rss_kb(self.daemon.pid)}

    def time_sighup(self, p, sock, runs):
        """SIGHUP to the policy event read by a subscriber, in microseconds."""
        times = []
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(sock)
            f = s.makefile("rb")
            s.sendall(b"SUBSCRIBE policy\n")
            f.readline()
            f.readline()
            for _ in range(runs):
                t0 = time.monotonic()
                os.kill(p.pid, signal.SIGHUP)
                while True:
                    line = f.readline()
                    if not line:
                        raise BenchError("netpermd closed the subscription during SIGHUP reloads")
                    if line.startswith(b'{"event":"policy"'):
                        break
                times.append((time.monotonic() - t0) * 1e6)
                if b'"error":null' not in line:
                    raise BenchError(f"reload failed: {line!r}")
        return stats(times)

    def bench_bigpolicy(self):
        c = self.c
        log(f"big policy: {c['big_apps']} apps")
        big_sock = os.path.join(self.dir, "big.sock")
        big = self.start_daemon(big_sock, self.big_conf, os.path.join(self.dir, "state-big"), "netpermd-big.log")
        st = json.loads(self.ask(big_sock, "STATUS"))
        if st["policy"]["apps"] != c["big_apps"] + 1:
            raise BenchError(f"the big policy has {st['policy']['apps']} apps")
        out = {"rss_kb": self.rss_kb(big.pid)}
        out["query_big"] = self.qclient(big_sock, f"QUERY {self.big_app}", 1, c["bigq"])
        out["query_small"] = self.qclient(self.sock, f"QUERY {APP}", 1, c["bigq"])
        out["reload_big"] = self.qclient(big_sock, "RELOAD", 1, c["reloads"], 1)
        out["reload_small"] = self.qclient(self.sock, "RELOAD", 1, c["reloads"], 1)
        out["sighup_big"] = self.time_sighup(big, big_sock, c["reloads"])
        out["sighup_small"] = self.time_sighup(self.daemon, self.sock, c["reloads"])
        out["rss_kb_after_reloads"] = self.rss_kb(big.pid)
        self.stop(big)
        self.results["big_policy"] = out

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
        parts = [f"[Interface {TPUT_LINK}]\nKind=wifi\n\n[Enforcement]\nMode=block\n\n"
                 f"[App tputapp]\nUser={TPUT_UID}\nWiFi={wifi}\nWWAN=deny\nEthernet=deny\nOther=deny\n"]
        for i in range(apps):
            parts.append(f"\n[App uapp{i:05d}]\nUser={200000 + i}\nWiFi={perms[i % 3]}\nWWAN={perms[(i // 3) % 3]}\n"
                         f"Ethernet={perms[(i // 9) % 3]}\nOther={perms[(i // 27) % 3]}\n")
        with open(path + ".tmp", "w") as f:
            f.write("".join(parts))
        os.replace(path + ".tmp", path)

    def start_in_force(self, sock, conf, part, state, table, what, name, extra=()):
        """netpermd until STATUS says its `part` (enforcement, usage) is `state` and the kernel has `table`. Entered
        with nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup tree the daemon reads."""
        d = self.spawn(["nsenter", f"--net=/run/netns/{self.ns}"]
                       + self.daemon_cmd(sock, conf, os.path.join(self.dir, "state-" + name)) + list(extra),
                       log_name=f"netpermd-{name}.log")

        def ready():
            if d.poll() is not None:
                raise BenchError(f"netpermd ({what}) exited with {d.returncode}" + self.daemon_log_tail())
            return json.loads(self.ask(sock, "STATUS", timeout=5))[part]["state"] == state
        self.wait_for(ready, f"the rules of {what} in force", 30)
        if not self.nft_table_loaded(table):
            raise BenchError(f"STATUS says {state} but the kernel has no table inet {table}")
        return d

    def start_enforcing(self, sock, conf, extra=()):
        return self.start_in_force(sock, conf, "enforcement", "enforcing", "netpermd", "Mode=block", "enforce", extra)

    def udp_passes(self):
        return run(["ip", "netns", "exec", self.ns, "setpriv", "--reuid", str(TPUT_UID), "--regid", str(TPUT_UID),
                    "--clear-groups", "bash", "-c", "echo x >/dev/udp/10.97.0.2/9"], check=False).returncode == 0

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
        d = self.start_enforcing(sock, conf, extra=["--log-level", "debug"])
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

    def bench_steer(self):
        """18 (issue 26): a route change's daemon CPU in Mode=steer, main-table routes through the steered app's
        allowed link added and deleted in turn (each one copied into steering's table), with 100,000 routes in
        another table (200) beside the same with that table empty, in the same run: steering reads only the main
        table and its own, so the other table's size must not show (target within 2x, as block mode's figure 9)."""
        c = self.c
        n, k = c["big_routes"], c["route_changes"]
        conf = os.path.join(self.dir, "steer.conf")
        sock = os.path.join(self.dir, "steer.sock")
        with open(conf, "w") as f:
            f.write(f"[Interface {WIFI}]\nKind=wifi\n\n[Enforcement]\nMode=steer\n\n"
                    f"[App steered]\nUser={TPUT_UID}\nWWAN=deny\n")
        d = self.start_enforcing(sock, conf)
        main_daemon, self.daemon = self.daemon, d
        try:
            status = json.loads(self.ask(sock, "STATUS"))["enforcement"]
            if status.get("steering", {}).get("state") != "steering":
                raise BenchError(f"Mode=steer is not steering: {status}")
            log(f"steer: {k} main-table changes with an empty table 200, then with {n} routes in it")
            empty = self.route_changes("main", k)
            path = os.path.join(self.dir, "steer-table.batch")
            with open(path, "w") as f:
                for i in range(n):
                    f.write(f"route add 10.{100 + i // 65536}.{(i // 256) % 256}.{i % 256}/32 dev {WIFI} table 200\n")
            run(["ip", "-n", self.ns, "-batch", path], timeout=600)
            self.settle_cpu(d.pid)
            full = self.route_changes("main", k)
            copied = run(["ip", "-n", self.ns, "route", "show", "table", str(28240 + 0x1D)]).stdout
            run(["ip", "-n", self.ns, "route", "flush", "table", "200"], timeout=120)
            self.settle_cpu(d.pid)
        finally:
            self.daemon = main_daemon
            self.stop(d)
            self.remove_rules()
            if os.path.exists(sock):
                os.unlink(sock)
        if WIFI not in copied:
            raise BenchError(f"steering's table does not copy {WIFI}'s routes: {copied!r}")
        self.results["steer"] = {"changes": k, "routes": n, "empty_us_per_change": empty, "full_us_per_change": full}

    def bench_reloadq(self):
        """19 (issue 26): a good client's QUERY round trips while the policy of 10,000 apps is reloaded with
        enforcement on, each reload changing most of the table (every app's permissions moved on: a whole load of
        the rules), beside the same client at rest, in the same run (target p99 under 10 ms)."""
        c = self.c
        self.tput_links()
        conf = os.path.join(self.dir, "reloadq.conf")
        sock = os.path.join(self.dir, "reloadq.sock")
        n, seconds = c["big_apps"], c["silent_s"] * 2
        self.enforce_conf(conf, n)
        d = self.start_enforcing(sock, conf)
        try:
            rest = self.paced(sock, "QUERY tputapp", c["rest_s"])
            log(f"reloadq: whole-table reloads of {n} apps for {seconds} s under a good client")
            result = {}
            client = threading.Thread(target=lambda: result.update(self.paced(sock, "QUERY tputapp", seconds)))
            client.start()
            reloads, deadline, rotate = 0, time.monotonic() + seconds, 0
            # RELOAD is answered once the new policy's rules are in force (the loads run off the loop, and STATUS
            # says `enforcing` while the rules in force are being changed); a SIGHUP's reload would need polling.
            while time.monotonic() < deadline:
                rotate += 1
                self.enforce_conf(conf, n, rotate=rotate)
                reply = json.loads(self.ask(sock, "RELOAD", timeout=60))
                if not reply.get("ok"):
                    raise BenchError(f"RELOAD: {reply}")
                reloads += 1
            client.join(timeout=seconds + 60)
        finally:
            self.stop(d)
            self.remove_rules()
            if os.path.exists(sock):
                os.unlink(sock)
        self.results["reloadq"] = {"apps": n + 1, "reloads": reloads, "seconds": seconds, "rest": rest, "during": result}

    def tput_dgrams(self):
        return self.tool_json(["ip", "netns", "exec", self.ns, "setpriv", "--reuid", str(TPUT_UID), "--regid", str(TPUT_UID),
                               "--clear-groups", self.tool("tput"), "dgram", "10.97.0.2", "9", str(self.c["dgrams"])],
                              timeout=60, name="tput dgram")

    def link_map(self):
        """The `links` map of table inet netpermd: each link name and the chain it goes to (`kind_wifi`,
        `metered_wwan`, ...); {} when there is no table."""
        r = run(["ip", "netns", "exec", self.ns, "nft", "-j", "list", "map", "inet", "netpermd", "links"], check=False)
        if r.returncode != 0:
            return {}
        for item in json.loads(r.stdout)["nftables"]:
            if "map" in item:
                return {name: verdict["goto"]["target"] for name, verdict in item["map"].get("elem", [])}
        return {}

    def wifi_link(self):
        """bwl1 (wifi by an [Interface] override, allowed to the app), up and routing WIFI_NET, its peer in the
        second namespace; NOARP like bwwan1."""
        ipn = ["ip", "-n", self.ns]
        run(ipn + ["link", "add", WIFI_LINK, "type", "veth", "peer", "name", WIFI_LINK_PEER, "netns", self.peer_ns])
        run(ipn + ["link", "set", WIFI_LINK, "arp", "off"])
        run(ipn + ["addr", "add", WIFI_ADDR, "dev", WIFI_LINK])
        run(["ip", "-n", self.peer_ns, "link", "set", WIFI_LINK_PEER, "up"])
        run(ipn + ["link", "set", WIFI_LINK, "up"])

    def bench_linkforce(self):
        """12: a link becoming one of a denied kind (wwan, by an [Interface] override; the app may not use wwan) to
        the kernel rejecting the app's datagram through it, with 10 and 10,000 apps: bwwan1 appearing, and bwl1
        (wifi) renamed bwwan1. Beside `nft -f` of the same change of the `links` map the daemon makes (flush map + add
        element), started by the probe once the change's first request is answered, with the daemon stopped and
        its table as it had it before the change."""
        c = self.c
        self.tput_links()  # the second namespace, for the peers
        ipn = ["ip", "-n", self.ns]
        nftx = ["ip", "netns", "exec", self.ns, "nft"]
        # Until bwwan1 brings its prefix route (metric 0), the probe's address is unreachable (not by the default).
        run(ipn + ["route", "add", "unreachable", WWAN_NET, "metric", "4000"])
        conf = os.path.join(self.dir, "linkforce.conf")
        sock = os.path.join(self.dir, "linkforce.sock")
        probe = [self.tool("linkforce"), str(TPUT_UID)]
        changes = {
            "create": (WWAN_PROBE, ["create", WWAN_LINK, WWAN_PEER, self.peer_ns, WWAN_ADDR], lambda: None),
            "rename": (WIFI_PROBE, ["rename", WIFI_LINK, WWAN_LINK], self.wifi_link),
        }
        rounds = c["linkforce_rounds"]
        out = {}

        def gone():
            m = self.link_map()
            return WWAN_LINK not in m and WIFI_LINK not in m
        try:
            for n in (10, c["big_apps"]):
                self.enforce_conf(conf, n)
                with open(conf, "a") as f:
                    f.write(f"\n[Interface {WWAN_LINK}]\nKind=wwan\n\n[Interface {WIFI_LINK}]\nKind=wifi\n")
                d = self.start_enforcing(sock, conf)
                samples, before, after = {}, {}, {}
                for change, (addr, args, prepare) in changes.items():
                    log(f"link -> in force: {rounds} links {change}d with {n} apps")
                    cmd = probe + [addr, "9"] + args + ["--", "daemon"]
                    samples[change] = []
                    for i in range(rounds + 1):
                        prepare()
                        # The daemon has seen the link as it is before the change (bwl1 a wifi link).
                        self.wait_for(lambda: change == "create" or self.link_map().get(WIFI_LINK) == "kind_wifi",
                                      f"{WIFI_LINK} in the daemon's links map as wifi", 10)
                        if i == rounds:
                            # Once more, unchanged: the table and links as the daemon has them before the change.
                            before[change] = (run(nftx + ["list", "table", "inet", "netpermd"]).stdout, self.link_map())
                            run(ipn + ["link", "del", WIFI_LINK], check=False)
                        else:
                            samples[change].append(self.tool_json(cmd, in_ns=True, name=f"linkforce ({change})"))
                            if i == 0:
                                after[change] = self.link_map()
                                if not after[change].get(WWAN_LINK, "").endswith("_wwan"):
                                    raise BenchError(f"the daemon did not send {WWAN_LINK} to wwan's chain ({after[change]})")
                            run(ipn + ["link", "del", WWAN_LINK])
                        self.wait_for(gone, f"{WWAN_LINK} and {WIFI_LINK} gone from the daemon's links map", 10)
                self.stop(d)
                if os.path.exists(sock):
                    os.unlink(sock)
                for change, (addr, args, prepare) in changes.items():
                    # The baseline: the table as the daemon had it, then the daemon's script for the map by nft -f
                    # (Ruleset.linkUpdate: the whole map again, in one transaction).
                    text, links = before[change]
                    load = os.path.join(self.dir, f"linkforce-{change}-table.nft")
                    with open(load, "w") as f:
                        f.write("table inet netpermd {}\ndelete table inet netpermd\n" + text)
                    script = os.path.join(self.dir, f"linkforce-{change}.nft")
                    if after[change] == links:
                        raise BenchError(f"the {change} did not change the links map ({links})")
                    text = "flush map inet netpermd links\n"
                    if after[change]:
                        text += "add element inet netpermd links { " + ", ".join(
                            f'"{name}" : goto {chain}' for name, chain in after[change].items()) + " }\n"
                    with open(script, "w") as f:
                        f.write(text)
                    base = []
                    for _ in range(rounds):
                        run(nftx + ["-f", load], timeout=120)
                        prepare()
                        base.append(self.tool_json(probe + [addr, "9"] + args + ["--", "run", "nft", "-f", script],
                                                   in_ns=True, name=f"linkforce ({change}, nft -f)"))
                        run(ipn + ["link", "del", WWAN_LINK])
                    run(nftx + ["delete", "table", "inet", "netpermd"])
                    daemon = samples[change]
                    out[f"{change}_{n}"] = {
                        "change": change, "apps": n + 1, "script": text,
                        "netpermd_us": stats([s["in_force_us"] for s in daemon]),
                        "nft_us": stats([s["in_force_us"] for s in base]),
                        "configured_us": stats([s["configured_us"] for s in daemon + base]),
                        "nft_exit_us": stats([s["cmd_us"] for s in base]),
                        "netpermd_passed": [int(s["passed"]) for s in daemon],
                        "nft_passed": [int(s["passed"]) for s in base],
                        # From the first datagram that left through the link after the change to the first
                        # rejected: how long it was open.
                        "netpermd_open_us": stats([s["in_force_us"] - s["first_passed_us"] for s in daemon
                                                   if s["first_passed_us"] >= 0]),
                        "nft_open_us": stats([s["in_force_us"] - s["first_passed_us"] for s in base
                                              if s["first_passed_us"] >= 0]),
                        "buffer_full": sum(int(s["buffer_full"]) for s in daemon + base)}
        finally:
            for link in (WWAN_LINK, WIFI_LINK):
                run(ipn + ["link", "del", link], check=False)
            run(ipn + ["route", "del", "unreachable", WWAN_NET, "metric", "4000"], check=False)
        self.results["linkforce"] = out

    def bench_glib(self):
        """13: the GLib module in a GLib process against GLib's own netlink monitor, and its signal's latency."""
        c = self.c
        if not os.path.exists(os.path.join(GIO_MODULES, "libgionetpermd.so")):
            raise BenchError(f"{GIO_MODULES}/libgionetpermd.so is missing: build it (make gio-module)")
        env = {k: v for k, v in self.env.items() if k not in ("GIO_EXTRA_MODULES", "GIO_USE_NETWORK_MONITOR")}
        module = dict(env, GIO_EXTRA_MODULES=GIO_MODULES, NETPERMD_SOCKET=self.sock)
        glib = dict(env, GIO_USE_NETWORK_MONITOR="netlink")
        out = {"module": [], "netlink": []}
        log(f"GLib: get_default() and RSS, {c['glib_inits']} processes with the module and as many with GLib's netlink monitor")
        for _ in range(c["glib_inits"]):
            for side, e in (("module", module), ("netlink", glib)):
                r = subprocess.run(["ip", "netns", "exec", self.ns, self.tool("glibmon"), "init"], env=e, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
                if r.returncode != 0:
                    raise BenchError(f"glibmon init ({side}) failed: {r.stderr.strip()[-2000:]}")
                o = json.loads(r.stdout.strip().splitlines()[-1])
                want = "NetpermdNetworkMonitor" if side == "module" else "GNetworkMonitorNetlink"
                if o["type"] != want:
                    raise BenchError(f"glibmon init ({side}): GLib chose {o['type']}, not {want}: {r.stderr[-2000:]}")
                out[side].append(o)
        self.results["glib"] = {side: {"init_us": stats([o["init_us"] for o in v]),
                                       "rss_kb": stats([o["rss_kb_after"] for o in v]),
                                       "rss_kb_before": stats([o["rss_kb_before"] for o in v])}
                                for side, v in out.items()}
        log(f"GLib: verdict change -> network-changed, {c['glib_toggles']} toggles")
        self.results["glib"]["latency"] = self.tool_json(
            ["env", f"GIO_EXTRA_MODULES={GIO_MODULES}", f"NETPERMD_SOCKET={self.sock}", self.tool("glibmon"),
             "latency", self.sock, WIFI_PEER, str(c["glib_toggles"]), str(c["latency_gap_ms"])], in_ns=True,
            timeout=120)
        self.wait_for(lambda: self.kernel_link(WIFI)["operstate"] == "UP", "bwifi0 back up", 5)

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

    def paced(self, sock, request, seconds):
        """A good client's round trips, one request every PACE_US (figures 14-16)."""
        return self.tool_json([self.tool("pacedq"), sock, request, str(PACE_US), str(seconds)], timeout=seconds + 60,
                              name="pacedq")

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

    def hwm_kb(self, pid):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        raise BenchError(f"no VmHWM for pid {pid}")

    def loud_lines(self, log_name):
        """The daemon's lines at notice and above (what a journal keeps), and at err."""
        with open(os.path.join(self.dir, log_name), errors="replace") as f:
            lines = [l for l in f if l[:3] in ("<3>", "<4>", "<5>")]
        return lines, [l for l in lines if l.startswith("<3>")]

    def cgroup_root(self):
        with open("/proc/self/mountinfo") as f:
            for line in f:
                head, _, tail = line.partition(" - ")
                if tail.split(" ")[0] == "cgroup2" and head.split(" ")[3] == "/":
                    return head.split(" ")[4]
        raise BenchError("no cgroup2 hierarchy in /proc/self/mountinfo")

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
            # Once the churn's scopes are in the rules (the issue's scope came halfway through).
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

    def bench_desktop(self):
        """21: a desktop session's apps (issue 32). A user manager's tree of the bench's own at the root of the
        hierarchy (npbench-PID.slice/npbench-PID-user.slice/user@UID.service/app.slice), and a policy with no [App]:
        [Defaults] WiFi=deny. 300 desktop apps launched one after another in scopes named for their application IDs,
        each refused by the kernel before it was ever named in a policy; a good client's QUERY meanwhile."""
        c = self.c
        root = os.path.join(self.cgroup_root(), f"npbench-{os.getpid()}-desk.slice")
        apps_dir = os.path.join(root, f"npbench-{os.getpid()}-user.slice", f"user@{TPUT_UID}.service", "app.slice")
        os.makedirs(apps_dir)
        conf = os.path.join(self.dir, "desktop.conf")
        sock = os.path.join(self.dir, "desktop.sock")
        with open(conf, "w") as f:
            f.write(f"[Interface {WIFI}]\nKind=wifi\n\n[Enforcement]\nMode=block\n\n[Defaults]\nWiFi=deny\n\n"
                    f"[App {APP}]\nExecutable=/opt/npbench/{APP}\nWiFi=allow\n")
        d = None
        try:
            d = self.start_in_force(sock, conf, "enforcement", "enforcing", "netpermd", "desktop apps", "desktop")
            log(f"desktop: {c['desktop_apps']} desktop apps launched and stopped for {c['desktop_s']} s")
            rest = self.paced(sock, f"QUERY {APP}", c["rest_s"])
            apps = self.spawn(["nsenter", f"--net=/run/netns/{self.ns}", self.tool("desktopapps"), apps_dir,
                               str(c["desktop_apps"]), str(c["desktop_s"]), "10.99.0.2", "9"], stdout=subprocess.PIPE)
            during = self.paced(sock, f"QUERY {APP}", c["desktop_s"])
            out, _ = apps.communicate(timeout=c["desktop_s"] + 120)
            self.stop(d)
        finally:
            if d and d.poll() is None:
                d.kill()
                d.wait()
            for p in (apps_dir, os.path.dirname(apps_dir), os.path.dirname(os.path.dirname(apps_dir)), root):
                try:
                    os.rmdir(p)
                except OSError as e:
                    log(f"warning: {p}: {e}")
        self.results["desktop"] = {"apps": c["desktop_apps"], "seconds": c["desktop_s"], **json.loads(out),
                                   "rest": rest, "during": during}

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
        self.results["seconds"] = round(time.monotonic() - t_start, 1)
        return self.results


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


def build_rows(r, smoke):
    """(figure, netpermd, baseline, comparison, target, met) rows, and the targets as data. Only the phases that
    ran have rows."""
    rows, targets = [], []

    def target(name, ok, detail):
        targets.append({"target": name, "met": bool(ok), "detail": detail})
        return "met" if ok else "MISSED"

    def paired_rows(fig, e, title, cost, target_name):
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

    if "latency" in r:
        lat = r["latency"]
        added = lat["added_us"]
        rows.append(("1 event latency: toggle -> link+app events read (µs)", triple(lat["netpermd_us"], "us"),
                     "raw RTMGRP_LINK listener: " + triple(lat["kernel_us"], "us"),
                     f"added: median {fmt(added['median'], 'us')}, p99 {fmt(added['p99'], 'us')} µs",
                     "added median < 300 µs, p99 < 2 ms",
                     target("event latency", added["median"] < 300 and added["p99"] < 2000,
                            f"added median {added['median']:.1f} µs, p99 {added['p99']:.1f} µs")))
    if "query" in r:
        q = r["query"]
        for n in (1, 8, 64):
            a, b = q[f"netpermd_{n}"], q[f"echo_{n}"]
            ratio = a["rtt_us"]["median"] / b["rtt_us"]["median"]
            tput = a["throughput"] / b["throughput"]
            tgt, met = "", ""
            if n == 1:
                tgt = "median within 2x of echo"
                met = target("query median within 2x of echo", ratio <= 2, f"ratio {ratio:.2f}")
            elif n == 8:
                tgt = "throughput >= 0.5x echo"
                met = target("8-client throughput >= half of echo", tput >= 0.5, f"ratio {tput:.2f}")
            rows.append((f"2 QUERY round trip, {n} client{'s' if n > 1 else ''} (µs)", triple(a["rtt_us"], "us"),
                         "echo server: " + triple(b["rtt_us"], "us"),
                         f"median x{ratio:.2f}; {a['throughput']:.0f}/s vs {b['throughput']:.0f}/s = x{tput:.2f}",
                         tgt, met))
        if "netpermd_8_uncached" in q:
            a, b = q["netpermd_8_uncached"], q["echo_8"]
            tput = a["throughput"] / b["throughput"]
            rows.append(("2 QUERY round trip, 8 clients, no reply cache (µs)", triple(a["rtt_us"], "us"),
                         "echo server: " + triple(b["rtt_us"], "us"),
                         f"median x{a['rtt_us']['median'] / b['rtt_us']['median']:.2f}; "
                         f"{a['throughput']:.0f}/s vs {b['throughput']:.0f}/s = x{tput:.2f}",
                         "throughput >= 0.5x echo",
                         target("8-client uncached throughput >= half of echo", tput >= 0.5, f"ratio {tput:.2f}")))
    if "cli" in r:
        cli = r["cli"]
        med = cli["netpermctl"]["wall_us"]["median"]
        rows.append(("3 `netpermctl query APP`, one process (ms)", triple(cli["netpermctl"]["wall_us"], "ms"),
                     "socat one-shot: " + triple(cli["socat"]["wall_us"], "ms"),
                     f"median x{med / cli['socat']['wall_us']['median']:.2f}", "< 5 ms a process",
                     target("netpermctl query < 5 ms", med < 5000, f"median {med / 1000:.2f} ms")))
    fo = r.get("fanout", {})
    for n in sorted({int(k.split("_")[1]) for k in fo}):
        a, b = fo[f"netpermd_{n}"], fo[f"raw_{n}"]
        ratio = a["last_us"]["median"] / b["last_us"]["median"]
        tgt, met = "", ""
        if n >= 10000:
            tgt = "within 2x of raw"
            met = target("10,000 subscribers within 2x of raw fan-out", ratio <= 2, f"ratio {ratio:.2f}")
        rows.append((f"4 fan-out, {n} subscribers: toggle -> last one read (ms)", triple(a["last_us"], "ms"),
                     "C fan-out loop: " + triple(b["last_us"], "ms"), f"median x{ratio:.2f}", tgt, met))
        if "leave_ms" in a:
            tgt, met = "", ""
            if n >= 10000:
                tgt = "< 1 s"
                met = target("10,000 subscribers leave, STATUS within 1 s", a["leave_ms"] < 1000,
                             f"{a['leave_ms']:.0f} ms")
            rows.append((f"4 fan-out, {n} subscribers leave at once -> next STATUS answered (ms)",
                         f"{a['leave_ms']:.1f}", f"STATUS when idle: {a['idle_status_ms']:.2f}",
                         f"x{a['leave_ms'] / max(a['idle_status_ms'], 0.001):.0f}", tgt, met))
    rss = r["rss_kb"]
    mem = r["memory_idle"]
    rows.append(("5 RSS idle after start-up (MiB)", f"{rss['idle'] / 1024:.1f}",
                 f"echo server: {rss['echo_server'] / 1024:.1f}",
                 f"anon {mem['anonymous'] / 1024:.1f}, file-backed {(mem['rss'] - mem['anonymous']) / 1024:.1f}, "
                 f"PSS {mem['pss'] / 1024:.1f}",
                 "< 8 MiB", target("RSS idle < 8 MiB", rss["idle"] < 8 * 1024, f"{rss['idle'] / 1024:.1f} MiB")))
    if fo:
        nmax = max(int(k.split("_")[1]) for k in fo if k.startswith("netpermd_"))
        rows.append((f"5 RSS with {nmax} subscribers (MiB)", f"{rss[f'subscribers_{nmax}'] / 1024:.1f}",
                     f"idle: {rss['idle'] / 1024:.1f}",
                     f"+{(rss[f'subscribers_{nmax}'] - rss['idle']) / nmax:.2f} kB per subscriber", "", ""))
    if "memory_queries" in r:
        growth = rss["after_all_queries"] - rss["after_warm"]
        mq = r["memory_queries"]
        ma = r["memory_after_queries"]
        nq = mq["warm"]["replies"] + mq["rest"]["replies"]
        rows.append((f"5 RSS after {nq} queries (MiB)", f"{rss['after_all_queries'] / 1024:.1f}",
                     f"after the first {mq['warm']['replies']}: {rss['after_warm'] / 1024:.1f}",
                     f"growth {growth:+d} kB; anon {ma['anonymous'] / 1024:.1f}, "
                     f"file-backed {(ma['rss'] - ma['anonymous']) / 1024:.1f}", "no growth (<= 64 kB)",
                     target("no RSS growth after 1,000,000 queries", growth <= 64, f"{growth:+d} kB")))
    if "startup" in r:
        su, se = r["startup"], r["startup_echo"]
        rows.append(("6 start-up: exec -> READY=1 (ms)", triple(su["ready_us"], "ms"),
                     "echo server: " + triple(se["ready_us"], "ms"),
                     f"+{(su['ready_us']['median'] - se['ready_us']['median']) / 1000:.2f} ms", "< 30 ms",
                     target("exec to READY < 30 ms", su["ready_us"]["median"] < 30000,
                            f"median {su['ready_us']['median'] / 1000:.2f} ms")))
        rows.append(("6 start-up: exec -> first answered QUERY (ms)", triple(su["answer_us"], "ms"),
                     "echo server: " + triple(se["answer_us"], "ms"),
                     f"+{(su['answer_us']['median'] - se['answer_us']['median']) / 1000:.2f} ms", "", ""))
    if "storm" in r:
        s = r["storm"]
        conv = s["converge_ms"]
        rows.append((f"7 storm, {s['toggles']} toggles: last toggle -> daemon's view = kernel's (ms)",
                     f"{conv:.1f}", f"kernel's last message: {s['kernel_settle_ms']:.1f}",
                     f"burst {s['burst_ms']:.0f} ms long; marker seen after {s['marker_ms']:.1f}", "< 1000 ms",
                     target("storm converges within 1 s", s["converged"] and conv < 1000, f"{conv:.1f} ms")))
        rows.append(("7 storm: events per toggle", f"{s['events_per_toggle']:.3f} ({s['events']} events)",
                     f"kernel messages: {s['kernel_msgs_per_toggle']:.2f}",
                     f"{s['daemon_resyncs_after_overrun']} overrun resync(s)", "fewer events than toggles",
                     target("storm: fewer events than toggles", s["events"] < s["toggles"],
                            f"{s['events']} events for {s['toggles']} toggles")))
    apps = "big" if smoke else "10,000"
    if "startup_big" in r:
        sb, su = r["startup_big"], r["startup"]
        rows.append((f"8 {apps}-app policy: exec -> READY=1 (ms)", triple(sb["ready_us"], "ms"),
                     "1-app policy: " + triple(su["ready_us"], "ms"),
                     f"load +{(sb['ready_us']['median'] - su['ready_us']['median']) / 1000:.1f} ms", "", ""))
    if "big_policy" in r:
        bp = r["big_policy"]
        nb = bp["query_big"]["replies"]
        rows.append((f"8 {apps}-app policy: RELOAD round trip (ms)", triple(bp["reload_big"]["rtt_us"], "ms"),
                     "1-app policy: " + triple(bp["reload_small"]["rtt_us"], "ms"),
                     f"median x{bp['reload_big']['rtt_us']['median'] / bp['reload_small']['rtt_us']['median']:.0f}",
                     "", ""))
        rows.append((f"8 {apps}-app policy: SIGHUP -> policy event read (ms)", triple(bp["sighup_big"], "ms"),
                     "1-app policy: " + triple(bp["sighup_small"], "ms"),
                     f"median x{bp['sighup_big']['median'] / bp['sighup_small']['median']:.0f}", "", ""))
        rows.append((f"8 {apps}-app policy: QUERY round trip, 1 client (µs)", triple(bp["query_big"]["rtt_us"], "us"),
                     "1-app policy: " + triple(bp["query_small"]["rtt_us"], "us"),
                     f"median x{bp['query_big']['rtt_us']['median'] / bp['query_small']['rtt_us']['median']:.2f}"
                     f" ({nb} queries; RSS {bp['rss_kb'] / 1024:.1f} MiB)", "", ""))
    if "enforcement" in r:
        e = r["enforcement"]
        rows += paired_rows(10, e, f"TCP bulk of an allowed app, Mode=block, {e['apps']}-app policy", "the rules' cost",
                            "throughput with enforcement within 5% of none")
    for key, e in sorted(r.get("inforce", {}).items(), key=lambda kv: kv[1]["apps"]):
        ratio = e["netpermd_us"]["median"] / e["nft_us"]["median"]
        rows.append((f"11 policy change (SIGHUP) -> the kernel rejects the app, {e['apps']} apps (ms)",
                     triple(e["netpermd_us"], "ms"), "nft -f of the same table: " + triple(e["nft_us"], "ms"),
                     f"median x{ratio:.2f}", "", ""))
    if "decide" in r:
        e = r["decide"]
        ratio = e["netpermd_us"]["median"] / e["nft_us"]["median"]
        rows.append((f"17 one ask decision (DECIDE --once, by netpermctl) -> the kernel rejects the app, {e['apps']} apps (ms)",
                     triple(e["netpermd_us"], "ms"), "nft -f of the same elements: " + triple(e["nft_us"], "ms"),
                     f"median x{ratio:.2f}", "", ""))
        rows.append((f"17 the same: the daemon's own transaction of those elements (ms)", triple(e["netpermd_load_us"], "ms"),
                     "nft -f of them, as above: " + triple(e["nft_us"], "ms"),
                     f"median x{e['netpermd_load_us']['median'] / e['nft_us']['median']:.3f}", "", ""))
    if "steer" in r:
        st = r["steer"]
        ratio = st["full_us_per_change"] / max(st["empty_us_per_change"], 1e-9)
        rows.append((f"18 Mode=steer: a main-table route change, {st['routes']} routes in table 200: daemon CPU per change (µs)",
                     f"{st['full_us_per_change']:.1f}", f"table 200 empty: {st['empty_us_per_change']:.1f}",
                     f"x{ratio:.2f} ({st['changes']} changes each)", "within 2x",
                     target("steer mode: a route change with 100,000 routes elsewhere within 2x of none", ratio <= 2,
                            f"x{ratio:.2f}")))
    if "reloadq" in r:
        rq = r["reloadq"]
        d, rest = rq["during"]["rtt_us"], rq["rest"]["rtt_us"]
        rows.append((f"19 {rq['reloads']} whole-table reloads of {rq['apps']} apps, enforcing: good client's QUERY (ms)",
                     triple(d, "ms"), "at rest: " + triple(rest, "ms"), f"max {fmt(d['max'], 'ms')} ms", "p99 < 10 ms",
                     target("good client's QUERY p99 < 10 ms during whole-table reloads", d["p99"] < 10000,
                            f"p99 {d['p99'] / 1000:.1f} ms")))
    what = {"create": "a wwan link appears", "rename": "a wifi link renamed to wwan"}
    for key, e in sorted(r.get("linkforce", {}).items(), key=lambda kv: (kv[1]["change"] != "create", kv[1]["apps"])):
        ratio = e["netpermd_us"]["median"] / e["nft_us"]["median"]
        leaked, window = sum(1 for p in e["netpermd_passed"] if p), e["netpermd_open_us"]
        tgt, met = "", ""
        if e["apps"] > 1000:
            tgt = "median <= nft -f's"
            met = target(f"link change ({e['change']}) in force no later than nft -f of the same change", ratio <= 1,
                         f"ratio {ratio:.2f}")
        rows.append((f"12 link change ({what[e['change']]}) -> the kernel rejects the app, {e['apps']} apps (ms)",
                     triple(e["netpermd_us"], "ms"), "nft -f of the same links-map change: " + triple(e["nft_us"], "ms"),
                     f"median x{ratio:.2f}; open before in {leaked} of {len(e['netpermd_passed'])} rounds"
                     + (f", for a median {fmt(window['median'], 'ms')} ms" if leaked else ""),
                     tgt, met))
    if "glib" in r:
        g = r["glib"]
        mi, ni = g["module"]["init_us"], g["netlink"]["init_us"]
        rows.append(("13 GLib: g_network_monitor_get_default() with the module (ms)", triple(mi, "ms"),
                     "GLib's netlink monitor: " + triple(ni, "ms"),
                     f"median x{mi['median'] / max(ni['median'], 0.001):.2f} "
                     f"({mi['median'] / 1000 - ni['median'] / 1000:+.2f} ms)", "", ""))
        mr, nr = g["module"]["rss_kb"], g["netlink"]["rss_kb"]
        rows.append(("13 GLib: RSS of the process after get_default() (MiB)",
                     f"{mr['min'] / 1024:.1f} / {mr['median'] / 1024:.1f} / {mr['p99'] / 1024:.1f}",
                     f"GLib's netlink monitor: {nr['min'] / 1024:.1f} / {nr['median'] / 1024:.1f} / {nr['p99'] / 1024:.1f}",
                     f"extra: median {mr['median'] - nr['median']:+.0f} kB", "", ""))
        lat = g["latency"]
        rows.append(("13 GLib: verdict change -> network-changed (µs)", triple(lat["module_us"], "us"),
                     "the app event read raw: " + triple(lat["raw_us"], "us"),
                     f"added: median {fmt(lat['added_us']['median'], 'us')}, p99 {fmt(lat['added_us']['p99'], 'us')} µs",
                     "", ""))
    if "routes" in r:
        rt = r["routes"]
        ratio = rt["full_us_per_change"] / max(rt["empty_us_per_change"], 0.001)
        rows.append((f"9 route change with {rt['fill']['routes']} routes in table 200: daemon CPU (µs)",
                     f"{rt['full_us_per_change']:.1f}", f"empty table: {rt['empty_us_per_change']:.1f}",
                     f"x{ratio:.2f} ({rt['changes']} changes each)", "within 2x of an empty table",
                     target("route change cost bounded by the table's size", ratio <= 2, f"ratio {ratio:.2f}")))
        rows.append((f"9 adding {rt['fill']['routes']} routes: daemon CPU (ms)", f"{rt['fill']['daemon_cpu_ms']:.0f}",
                     f"the ip -batch: {rt['fill']['wall_ms']:.0f} ms wall", "", "", ""))
        lf = rt["latency_full"]
        rows.append((f"9 event latency with {rt['fill']['routes']} routes in table 200 (µs)", triple(lf["netpermd_us"], "us"),
                     "raw RTMGRP_LINK listener: " + triple(lf["kernel_us"], "us"),
                     f"added: median {fmt(lf['added_us']['median'], 'us')} µs; RSS {rt['rss_kb_full'] / 1024:.1f} MiB",
                     "", ""))
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
    if "desktop" in r:
        de = r["desktop"]
        f, d, rest = de["first_refused_us"], de["during"]["rtt_us"], de["rest"]["rtt_us"]
        rows.append((f"21 {de['apps']} desktop apps launched and stopped ({de['launched']}, {de['refused']} refused): "
                     "scope made -> first datagram refused (ms)", triple(f, "ms"), "", f"max {fmt(f['max'], 'ms')} ms",
                     "every launch refused", target("every desktop app's launch refused by [Defaults]",
                                                    de["refused"] == de["launched"] > 0,
                                                    f"{de['refused']} of {de['launched']}")))
        rows.append(("21 the same: good client's QUERY (ms)", triple(d, "ms"), "at rest: " + triple(rest, "ms"),
                     f"p99 x{d['p99'] / max(rest['p99'], 1):.0f}, max {fmt(d['max'], 'ms')} ms", "", ""))
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
    if "soak" in r:
        so = r["soak"]
        d, rest = so["during"]["rtt_us"], so["rest"]["rtt_us"]
        rows.append((f"16 soak, {so['seconds']} s, {so['clients']} clients: QUERY round trip (ms)", triple(d, "ms"),
                     "at rest: " + triple(rest, "ms"),
                     f"max {fmt(d['max'], 'ms')} ms (at rest {fmt(rest['max'], 'ms')}); DECIDE p99 "
                     f"{fmt(so['decide_us']['p99'], 'ms')} ms; {len(so['loop_held_lines'])} loop-held lines",
                     "no QUERY over 1 s", target("soak: no QUERY over 1 s", d["max"] < 1e6, f"max {d['max'] / 1000:.0f} ms")))
    if "usage" in r:
        u = r["usage"]
        rows += paired_rows(20, u, f"TCP bulk of a counted app, Count=yes, metered link with a budget, {u['apps']}-app policy",
                            "counting's cost", "throughput with counting within 5% of none")
        rd = u["reading"]
        rows.append((f"20 reading every counter, {u['apps']} apps' elements: USAGE APP round trip (ms)",
                     triple(rd["all_apps_us"], "ms"), "one app's: " + triple(rd["one_app_us"], "ms"),
                     f"daemon CPU per reading {rd['all_apps_cpu_us'] / 1000:.2f} ms (one app's {rd['one_app_cpu_us'] / 1000:.2f}); "
                     f"nft -j list of the table {rd['nft_list_ms']:.0f} ms ({rd['elements']} counters)", "", ""))
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"), help="where netpermd and netpermctl are")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: check the harness, not the performance")
    ap.add_argument("--only", help=f"comma-separated phases to run (default all: {','.join(PHASES)})")
    ap.add_argument("--out", help="JSON results (default bench/results/latest.json; smoke.json with --smoke, "
                    "partial.json with --only)")
    args = ap.parse_args()
    default = "smoke.json" if args.smoke else "partial.json" if args.only else "latest.json"
    out = args.out or os.path.join(HERE, "results", default)

    def on_signal(signo, _frame):
        raise SystemExit(f"signal {signo}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    def on_alarm(_signo, _frame):
        raise BenchError("the benchmark ran past its time limit")
    signal.signal(signal.SIGALRM, on_alarm)

    bench = Bench(args)
    signal.alarm(bench.c["alarm_s"])
    ok = False
    try:
        results = bench.main()
        rows, targets = build_rows(results, args.smoke)
        ok = True
    except BenchError as e:
        print(f"bench: FAILED: {e}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, SystemExit) as e:
        print(f"bench: interrupted ({e or 'SIGINT'})", file=sys.stderr)
        return 130
    finally:
        signal.alarm(0)
        bench.cleanup()
        if ok or not os.listdir(bench.dir):
            shutil.rmtree(bench.dir, ignore_errors=True)
        else:
            print(f"bench: logs kept in {bench.dir}", file=sys.stderr)
    m = machine()
    report = {"mode": "smoke" if args.smoke else "full", "machine": m, "counts": bench.c, "targets": targets,
              "table": [dict(zip(("figure", "netpermd", "baseline", "comparison", "target", "met"), r)) for r in rows],
              "results": results}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"netpermd benchmarks ({report['mode']}) — {m['date']}; {m['nproc']} CPUs, {m['cpu']}, "
          f"kernel {m['kernel']}; {results['seconds']} s")
    if args.smoke:
        # Tiny counts say nothing about performance: no verdicts.
        rows = [r[:5] + ("",) for r in rows]
    print(render(rows))
    if args.smoke:
        print("\nsmoke mode: the harness works end to end; tiny counts, so the figures say nothing about performance")
    else:
        missed = [t for t in targets if not t["met"]]
        print(f"\ntargets met: {len(targets) - len(missed)} of {len(targets)}"
              + ("".join(f"\n  missed: {t['target']} ({t['detail']})" for t in missed)))
    print(f"results: {os.path.relpath(out, os.getcwd())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
