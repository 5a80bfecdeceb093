#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""An app found by what it runs (ExecAppTests): started where a desktop starts apps without a unit of their own, it
waits until it is in the scope netpermd has its user's manager make (`app-netpermd-*`; `--stay`: one that must stay
where it runs) and until its own QUERY says the rules name it, then sends a datagram to the peer every 50 ms and
writes a JSON line to RESULT for its first one and for each change (passed, refused) until 20 s have passed.
With `--own NAME` it first owns NAME on its session bus, as an app owns its ID (GApplication). With
`--open-then-exec PROGRAM` it opens a datagram socket where it was started, says so, and execs PROGRAM (an app's
interpreter) on this script with `--fd N`: that socket, inherited, from which each round sends too (`inherited`).
Usage: exec-app.py RESULT PEER PORT SOCKET [--stay] [--own NAME] [--open-then-exec PROGRAM] [--fd N]"""

import errno
import json
import os
import socket
import sys
import time


def cgroup():
    with open("/proc/self/cgroup") as f:
        return next(line.split(":", 2)[2].strip() for line in f if line.startswith("0::"))


def query(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect(path)
        s.sendall(b"QUERY\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data.split(b"\n")[0])


def main():
    result, peer, port, path = sys.argv[1:5]
    stay = "--stay" in sys.argv[5:]
    out = open(result, "a", buffering=1)
    if "--own" in sys.argv[5:]:
        from gi.repository import Gio, GLib
        bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        name = sys.argv[sys.argv.index("--own") + 1]
        bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "RequestName",
                      GLib.Variant("(su)", (name, 4)), None, Gio.DBusCallFlags.NONE, 5000, None)
        main.bus = bus  # kept: the name is owned while the connection lives

    def say(**kw):
        out.write(json.dumps(dict(kw, pid=os.getpid(), cgroup=cgroup())) + "\n")

    if "--open-then-exec" in sys.argv[5:]:
        at = sys.argv.index("--open-then-exec")
        program = sys.argv[at + 1]
        opened = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        opened.set_inheritable(True)
        say(state="opened")
        rest = sys.argv[5:at] + sys.argv[at + 2:]
        os.execv(program, [program, os.path.abspath(__file__), result, peer, port, path, *rest,
                           "--fd", str(opened.fileno())])
    inherited = None
    if "--fd" in sys.argv[5:]:
        inherited = socket.socket(fileno=int(sys.argv[sys.argv.index("--fd") + 1]))

    deadline = time.monotonic() + 10
    while not stay and "/app-netpermd-" not in cgroup():
        if time.monotonic() > deadline:
            say(state="never-scoped")
            return
        time.sleep(0.005)
    q = query(path)
    # No app of the rules (matched by [Defaults]): nothing to wait for.
    while not q.get("enforced") and q.get("matched_by") != "default":
        if time.monotonic() > deadline:
            say(state="never-enforced", query=q)
            return
        time.sleep(0.01)
        q = query(path)
    say(state="query", query=q)
    last = None
    end = time.monotonic() + 20
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    while time.monotonic() < end:
        state = send(s, peer, port)
        # The inherited socket sends right after the new one: one round, one verdict of the rules.
        held = send(inherited, peer, port) if inherited else None
        if (state, held) != last:
            say(state=state, **({"inherited": held} if inherited else {}))
            last = (state, held)
        time.sleep(0.05)


def send(s, peer, port):
    try:
        s.sendto(b"npt", (peer, int(port)))
        return "passed"
    except OSError as e:
        return "refused" if e.errno == errno.EPERM else errno.errorcode.get(e.errno, str(e.errno))


if __name__ == "__main__":
    main()
