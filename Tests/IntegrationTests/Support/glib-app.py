#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A GLib app for the GLib monitor tests: Gio.NetworkMonitor.get_default() in a real GLib, its properties and
network-changed signals as JSON lines on stdout, and commands on stdin, one per line:

    state                   -> {"state": {...}, "changes": N}
    reach HOST PORT         -> {"reach": true} or {"reach": false, "code": "PERMISSION_DENIED", "message": ...}
    reach-async HOST PORT   -> the same, through can_reach_async
    fork                    -> {"forked": PID}: the process forks, and the child runs its own main loop with the
                               same monitor (it takes no commands, and dies with the parent)
    ticks MS                -> {"ticks": N, "max_gap_ms": G}: a 5 ms timeout on the main loop for MS ms, and the
                               longest the loop kept it waiting (what the app's own work would wait)
    quit

The first line says which monitor GLib chose and how long get_default() took. Every network-changed signal is
a line {"changed": N, "available": ..., "state": {...}, "pid": P}, N counting them from 1 (in each process).
"""
import json
import os
import sys
import time

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# GLib writes debug messages (G_MESSAGES_DEBUG) to stdout by default: keep stdout for the JSON lines.
GLib.log_writer_default_set_use_stderr(True)
started = time.monotonic()
monitor = Gio.NetworkMonitor.get_default()
took = time.monotonic() - started
changes = 0


def state():
    return {"available": monitor.get_network_available(), "metered": monitor.get_network_metered(),
            "connectivity": monitor.get_connectivity().value_nick}


def error_reply(key, e):
    code = Gio.IOErrorEnum(e.code).value_nick if e.domain == "g-io-error-quark" else e.code
    return {key: False, "domain": e.domain, "code": code, "message": e.message}


def on_changed(_monitor, available):
    global changes
    changes += 1
    out({"changed": changes, "available": available, "state": state(), "pid": os.getpid()})


monitor.connect("network-changed", on_changed)
out({"type": type(monitor).__gtype__.name, "init_ms": round(took * 1000, 2), "state": state()})
loop = GLib.MainLoop()


def on_reached(m, result, _data):
    try:
        out({"reach-async": m.can_reach_finish(result)})
    except GLib.Error as e:
        out(error_reply("reach-async", e))


pending = b""


def command(words):
    if words[0] == "state":
        out({"state": state(), "changes": changes})
    elif words[0] in ("reach", "reach-async"):
        address = Gio.NetworkAddress.new(words[1], int(words[2]))
        if words[0] == "reach":
            try:
                out({"reach": monitor.can_reach(address, None)})
            except GLib.Error as e:
                out(error_reply("reach", e))
        else:
            monitor.can_reach_async(address, None, on_reached, None)
    elif words[0] == "fork":
        pid = os.fork()
        if pid == 0:
            import ctypes, signal
            ctypes.CDLL(None).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG: it goes with the parent
            GLib.source_remove(stdin_source)
        else:
            out({"forked": pid})
    elif words[0] == "ticks":
        until = time.monotonic() + int(words[1]) / 1000
        seen = {"last": time.monotonic(), "gap": 0.0, "n": 0}

        def tick():
            now = time.monotonic()
            seen["gap"] = max(seen["gap"], now - seen["last"])
            seen["last"] = now
            seen["n"] += 1
            if now < until:
                return True
            out({"ticks": seen["n"], "max_gap_ms": round(seen["gap"] * 1000, 1)})
            return False
        GLib.timeout_add(5, tick)
    elif words[0] == "quit":
        loop.quit()
    else:
        out({"error": f"unknown command {words[0]}"})


def on_input(fd, _condition):
    """Whole lines from stdin as they come (read unbuffered: a buffered reader would hide lines from the loop)."""
    global pending
    data = os.read(fd, 65536)
    if not data:
        loop.quit()
        return False
    pending += data
    while b"\n" in pending:
        line, pending = pending.split(b"\n", 1)
        if line.split():
            command(line.decode().split())
    return True


stdin_source = GLib.unix_fd_add_full(GLib.PRIORITY_DEFAULT, sys.stdin.fileno(), GLib.IOCondition.IN | GLib.IOCondition.HUP,
                                     on_input)
loop.run()
