# SPDX-License-Identifier: LGPL-2.1-or-later
"""A unit that starts while others churn: makes the cgroup SCOPE, moves itself into it, and sends a UDP datagram to
HOST:PORT every millisecond until the kernel refuses one (EPERM, the rules' reject) or TIMEOUT seconds pass. Then
it moves back to the cgroup it came from and removes SCOPE.

    first-refused.py SCOPE HOST PORT TIMEOUT

Prints {"ms": from mkdir to the first refusal (null: none), "passed": datagrams sent before it}. Run as root, in
the network namespace of the link (nsenter --net=, so that /sys/fs/cgroup is the host's)."""
import errno
import json
import os
import socket
import sys
import time

scope, host, port, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
with open("/proc/self/cgroup") as f:
    home = f.read().strip().split("::", 1)[1]
mount = None
with open("/proc/self/mountinfo") as f:
    for line in f:
        head, _, tail = line.partition(" - ")
        if tail.split(" ")[0] == "cgroup2" and head.split(" ")[3] == "/":
            mount = head.split(" ")[4]
            break

start = time.monotonic()
os.mkdir(scope)
refused, passed = None, 0
try:
    with open(os.path.join(scope, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    # A socket is its cgroup's from when it is made: after the move.
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    end = start + timeout
    while time.monotonic() < end:
        try:
            s.sendto(b"x", (host, port))
            passed += 1
        except OSError as e:
            if e.errno != errno.EPERM:
                raise
            refused = time.monotonic() - start
            break
        time.sleep(0.001)
    s.close()
finally:
    with open(mount + home + "/cgroup.procs", "w") as f:
        f.write(str(os.getpid()))
    for _ in range(500):
        try:
            os.rmdir(scope)
            break
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            time.sleep(0.01)
print(json.dumps({"ms": None if refused is None else round(refused * 1000, 2), "passed": passed}))
