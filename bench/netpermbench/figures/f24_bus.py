# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 24, the system bus face (docs/DBUS.md): a method call's round trip (Query, the caller's own verdict)
beside a trivial sd-bus service's on the same bus in the same run, and the daemon's RSS with the face on the bus
beside a daemon with no bus that answered as many QUERYs on its socket (BENCHMARKS.md)."""

import json
import os
import subprocess
import time

from ..common import BenchError, log, memory_breakdown, run, triple

PHASE = "bus"
NAME, PATH = "org.netpermd.NetPerm1", "/org/netpermd/NetPerm1"
ECHO = "org.netpermd.BenchEcho"


class Bus:
    def start_bus(self):
        """A system bus of the bench's own: no service directories, anyone may own and call anything."""
        conf = os.path.join(self.dir, "bus.conf")
        with open(conf, "w") as f:
            f.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>system</type><listen>unix:path={self.dir}/system_bus_socket</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*" eavesdrop="true"/>
<allow eavesdrop="true"/></policy></busconfig>
""")
        p = self.spawn(["dbus-daemon", f"--config-file={conf}", "--nofork", "--print-address=1"],
                       log_name="dbus.log", stdout=subprocess.PIPE)
        address = p.stdout.readline().strip()
        if not address.startswith("unix:"):
            raise BenchError("dbus-daemon printed no address")
        return p, dict(self.env, DBUS_SYSTEM_BUS_ADDRESS=address)

    def start_bus_daemon(self, name, env):
        sock = os.path.join(self.dir, name + ".sock")
        p = self.spawn(self.daemon_cmd(sock, self.small_conf, os.path.join(self.dir, name + "-state")),
                       log_name=name + ".log", in_ns=True, env=env)
        self.wait_for(lambda: p.poll() is None and self.ask(sock, "PING", timeout=2) == '{"ok":true,"pong":true}',
                      f"netpermd ({name})", 15)
        return p

    def busq(self, env, dest, path, member, count, warmup):
        cmd = [self.tool("busq"), dest, path, dest, member, str(count), str(warmup)]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300, env=env)
        if r.returncode != 0:
            raise BenchError(f"busq {member} failed: {r.stderr.strip()[-2000:]}")
        return json.loads(r.stdout.strip().splitlines()[-1])

    def bench_bus(self):
        c = self.c
        log(f"bus: {c['bus_calls']} method calls to netpermd and to a trivial sd-bus service")
        bus, env = self.start_bus()
        srv = self.spawn([self.tool("bussrv"), str(self.reply_len)], log_name="bussrv.log", env=env)
        # The same daemon with no bus at all (its address names no socket): what the face costs is the difference.
        # (in a directory of its own, where nothing is ever made: the daemon watches it for the socket).
        nowhere = os.path.join(self.dir, "no-bus")
        os.makedirs(nowhere)
        off = self.start_bus_daemon("nobus", dict(self.env, DBUS_SYSTEM_BUS_ADDRESS=f"unix:path={nowhere}/socket"))
        on = self.start_bus_daemon("bus", env)
        for name in (NAME, ECHO):
            self.wait_for(lambda: run(["busctl", "--system", "status", name], check=False, env=env).returncode == 0,
                          f"{name} on the bench's bus", 10)
        # Start-up's pages released (CodePages, once its first readings are done) in both; each measured beside the
        # other at the same moment.
        time.sleep(2)
        rss = {"nobus_idle": self.rss_kb(off.pid), "bus_idle": self.rss_kb(on.pid)}
        rounds = []
        for _ in range(2):
            rounds.append({"echo": self.busq(env, ECHO, "/org/netpermd/BenchEcho", "Get", c["bus_calls"], c["bus_warmup"]),
                           "netpermd": self.busq(env, NAME, PATH, "Query", c["bus_calls"], c["bus_warmup"])})
            # The daemon with no bus answers as many of the same request on its socket: its request path's pages and
            # heap are in its RSS as the bus daemon's are.
            self.qclient(os.path.join(self.dir, "nobus.sock"), "QUERY", 1, c["bus_calls"] + c["bus_warmup"], 0)
        rss["bus_after_calls"] = self.rss_kb(on.pid)
        rss["nobus_after"] = self.rss_kb(off.pid)
        self.results["bus"] = {"rounds": rounds, "rss_kb": rss, "reply_len": self.reply_len,
                               "memory": {"bus": memory_breakdown(on.pid), "nobus": memory_breakdown(off.pid)}}
        for p in (on, off, srv, bus):
            self.stop(p)


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    if "bus" not in r:
        return []
    b = r["bus"]
    last = b["rounds"][-1]
    nd, echo = last["netpermd"]["calls"], last["echo"]["calls"]
    ratio = nd["median"] / echo["median"]
    rss = b["rss_kb"]
    added = rss["bus_after_calls"] - rss["nobus_after"]
    mem = b["memory"]
    return [
        ("24 bus: Query() round trip, 1 caller (µs)", triple(nd, "µs"),
         "trivial sd-bus service: " + triple(echo, "µs"),
         f"median x{ratio:.2f}; {last['netpermd']['per_s']}/s vs {last['echo']['per_s']}/s; first round x"
         f"{b['rounds'][0]['netpermd']['calls']['median'] / b['rounds'][0]['echo']['calls']['median']:.2f}",
         "median within 2x", target("bus Query() within 2x of a trivial service", ratio <= 2, f"x{ratio:.2f}")),
        ("24 bus: RSS with the bus face, after the calls (MiB)", f"{rss['bus_after_calls'] / 1024:.1f}",
         f"no bus, as many QUERYs on the socket: {rss['nobus_after'] / 1024:.1f}",
         f"{added:+d} kB (anon {mem['bus']['anonymous'] - mem['nobus']['anonymous']:+d}); idle: "
         f"{rss['bus_idle'] - rss['nobus_idle']:+d} kB", "+1 MiB at most",
         target("RSS with the bus face +1 MiB at most", added <= 1024, f"{added:+d} kB")),
    ]
