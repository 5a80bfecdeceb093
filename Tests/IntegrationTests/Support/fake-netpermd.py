#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A stand-in for netpermd's control socket, for the settings app's tests of what the real daemon never does.

    fake-netpermd.py SOCKET MODE [N]

MODE: `noise` answers every line with bytes that are not JSON (and one that is not UTF-8); `shape` answers with JSON
of the wrong shape; `silent` accepts and never answers; `apps` is a daemon of N apps (a snapshot of N verdicts under
SUBSCRIBE, USAGE of them, REPORT of the first three, and DECIDE answered with the app's new verdict as an event on every subscriber). It makes
SOCKET.ready once it listens, and serves until killed."""
import json
import os
import selectors
import socket
import sys
import time

KINDS = ("wifi", "wwan", "ethernet", "other")
# The report's times: the same in every answer (a report that did not change).
STARTED = int(time.time())


def verdict(i, perms):
    return {"app": f"app{i:04d}", "name": f"App {i:04d}", "names": {"zh_CN": f"应用 {i:04d}", "de": f"Anwendung {i:04d}"},
            "icon": "no-such-icon-anywhere" if i % 2 else "utilities-terminal", "available": True, "reason": "ok",
            "via": {"index": 2, "name": "eth0", "kind": "ethernet", "metered": False, "roaming": False, "over": None},
            "egress": {"ipv4": None, "ipv6": None}, "bind_to": None, "denied_kinds": [], "pending_kinds": [],
            "permissions": dict(perms), "sources": {k: ("policy" if k in ("metered", "roaming") else "user-decision")
                                                    for k in perms},
            "enforced": True, "message": None}


def report(n):
    """REPORT of the first `n` apps: two named places and an address, one of them refused (the shape of
    docs/PROTOCOL.md; `refused` counts by reason)."""
    now = STARTED - 600
    def place(host, named, kind, connections, refused):
        return {"host": host, "named": named, "address": "192.0.2.7" if named else host, "port": 443, "protocol": "tcp",
                "kind": kind, "metered": kind == "wwan", "roaming": False, "first": now - 86400, "last": now,
                "connections": connections, "bytes": connections * 40960, "refused": {"denied": 0, "ask": refused, "budget": 0}}
    return {"ok": True, "enabled": True, "days": 7, "yours": True, "apps": [
        {"app": f"app{i:04d}", "uid": None, "destinations": [
            place("tiles.example.org", True, "wifi", 12 - i, 0), place("api.example.net", True, "wwan", 3, 2 if i == 0 else 0),
            place("198.51.100.9", False, "ethernet", 1, 0)]} for i in range(n)]}


class Apps:
    def __init__(self, n):
        base = {"wifi": "allow", "wwan": "deny", "ethernet": "allow", "other": "allow", "metered": "allow", "roaming": "allow"}
        self.perms = {i: dict(base) for i in range(n)}
        self.subscribers = []

    def answer(self, conn, line):
        words = line.split()
        verb = words[0].upper() if words else ""
        if verb == "SUBSCRIBE":
            self.subscribers.append(conn)
            return [{"ok": True, "subscribed": words[1:], "app": "settings", "privileged": False},
                    {"event": "snapshot", "seq": 1, "apps": [verdict(i, p) for i, p in self.perms.items()], "prompts": []}]
        if verb == "USAGE":
            return [{"ok": True, "counting": True, "period": {"start": "2026-12-01", "end": "2027-01-01"},
                     "apps": [{"app": f"app{i:04d}", "current": {"sent_bytes": i * 1024, "received_bytes": i * 3 * 1048576,
                                                               "kinds": []}} for i in self.perms]}]
        if verb == "REPORT":
            return [report(min(len(self.perms), 3))]
        if verb == "DECIDE" and len(words) >= 4:
            i = int(words[1][3:])
            self.perms[i][words[2]] = words[3]
            event = dict(verdict(i, self.perms[i]), event="app", seq=2)
            del event["name"], event["names"], event["icon"]
            for s in self.subscribers:
                send(s, [event])
            return [{"ok": True, "decided": {"app": words[1], "kind": words[2], "decision": words[3]}}]
        return [{"ok": False, "error": "unknown-verb", "message": "no"}]


def send(conn, objs):
    try:
        conn.setblocking(True)
        conn.sendall(b"".join(json.dumps(o).encode() + b"\n" for o in objs))
    except OSError:
        pass


def main():
    path, mode = sys.argv[1], sys.argv[2]
    apps = Apps(int(sys.argv[3]) if len(sys.argv) > 3 else 3)
    for p in (path, path + ".ready"):
        if os.path.exists(p):
            os.unlink(p)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o666)
    server.listen(16)
    sel = selectors.DefaultSelector()
    sel.register(server, selectors.EVENT_READ)
    buffers = {}
    # Listening: said by a file beside the socket (SOCKET.ready).
    open(path + ".ready", "w").close()
    while True:
        for key, _ in sel.select():
            if key.fileobj is server:
                conn, _addr = server.accept()
                sel.register(conn, selectors.EVENT_READ)
                buffers[conn] = b""
                continue
            conn = key.fileobj
            data = conn.recv(65536)
            if not data:
                sel.unregister(conn)
                conn.close()
                continue
            buffers[conn] += data
            while b"\n" in buffers[conn]:
                line, buffers[conn] = buffers[conn].split(b"\n", 1)
                if mode == "silent":
                    continue
                if mode == "noise":
                    conn.sendall(b"<html>502 Bad Gateway</html>\n")
                elif mode == "noise-bytes":
                    conn.sendall(b"\xff\xfe{\n")
                elif mode == "shape":
                    send(conn, [{"ok": True, "subscribed": [], "privileged": False}, {"event": "snapshot", "seq": 1, "apps": {"app": 1}}])
                else:
                    send(conn, apps.answer(conn, line.decode()))


if __name__ == "__main__":
    main()
