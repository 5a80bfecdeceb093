#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A hostile local user (SoakTests): for SECONDS, makes and removes cgroups in their own delegated tree and desktop
files in their own applications directory, as nastily as the kernel lets them, in rounds:

    hostile-user.py SECONDS CGROUP_DIR APPLICATIONS_DIR SEED

- cgroups: hundreds to thousands at a time, names of 256-3,000 bytes, bytes that are not UTF-8, slices nested as
  deep as the kernel allows, units that look like apps; held a moment, then removed, deepest first;
- desktop files: a huge one, binary junk, 1,500 small ones, symlinks to /dev/zero and /dev/urandom, a symlink loop,
  FIFOs, a directory, names that are not UTF-8, Exec= of odd programs, files just at and just over the size the
  daemon reads, rewritten in place while the daemon may be reading them.

Errors the kernel gives (a limit reached, a name refused) are part of the game: counted, never fatal. Prints one
summary line at the end. Leaves no cgroup behind; the test's own `org.example.Good.desktop` is never touched.
"""
import errno
import os
import random
import sys
import time

seconds, cgroups, apps, seed = float(sys.argv[1]), os.fsencode(sys.argv[2]), os.fsencode(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
deadline = time.monotonic() + seconds
counts = {"rounds": 0, "cgroups": 0, "deepest": 0, "files": 0}
refused = {}  # by errno name


def junk(n):
    """n bytes of anything a name may hold (no '/', no NUL)."""
    return rng.randbytes(n).replace(b"\0", b"\1").replace(b"/", b"_")


def hostile_name():
    kind = rng.randrange(6)
    if kind == 0:
        return b"app-" + b"x" * rng.randint(246, 2990) + b".scope"
    if kind == 1:
        return b"app-" + junk(rng.randint(246, 2990)).replace(b"\n", b"-") + b".scope"  # cgroupfs refuses a newline
    if kind == 2:
        return b"app-gnome-org.example.\xff\xfe" + junk(rng.randint(1, 40)) + b"-1.scope"
    if kind == 3:
        return b"app-flatpak-" + b"a." * rng.randint(130, 1400) + b"b-77.scope"
    if kind == 4:
        return b"dbus-:1.2-" + junk(rng.randint(200, 2000)).replace(b"\n", b"-") + b"@0.service"
    return b"app-org.example.H%05d-%d.scope" % (rng.randrange(100000), rng.randrange(1000))


def refuse(e):
    name = errno.errorcode.get(e.errno, str(e.errno))
    refused[name] = refused.get(name, 0) + 1


def mkdir_at(fd, name):
    try:
        os.mkdir(name, dir_fd=fd)
        counts["cgroups"] += 1
        return True
    except OSError as e:
        refuse(e)
        return False


def cgroup_round():
    top = os.open(cgroups, os.O_RDONLY | os.O_DIRECTORY)
    made = []  # (parent fd, name), in the order made
    opened = []
    try:
        for _ in range(rng.randint(300, 2500)):
            name = hostile_name()
            if mkdir_at(top, name):
                made.append((top, name))
        # Slices nested as deep as the kernel allows, each name long, each level with a unit in it.
        fd = top
        for depth in range(rng.randint(10, 120)):
            name = (b"n%d-" % depth) + (b"y" * rng.randint(0, 1500)) + b".slice"
            if not mkdir_at(fd, name):
                break
            made.append((fd, name))
            mkdir_at(fd, b"app-org.example.Deep-%d.scope" % depth)
            made.append((fd, b"app-org.example.Deep-%d.scope" % depth))
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            opened.append(fd)
            counts["deepest"] = max(counts["deepest"], depth + 1)
        time.sleep(rng.random() * 0.3)
    finally:
        for parent, name in reversed(made):
            try:
                os.rmdir(name, dir_fd=parent)
            except OSError:
                pass
        for fd in reversed(opened):
            os.close(fd)
        os.close(top)


def write(name, data):
    try:
        with open(os.path.join(apps, name), "wb") as f:
            f.write(data)
        counts["files"] += 1
    except OSError as e:
        refuse(e)


def remove(name):
    path = os.path.join(apps, name)
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.unlink(path)
    except OSError:
        pass


ENTRY = b"[Desktop Entry]\nType=Application\n"


def desktop_round():
    n = counts["rounds"]
    write(b"org.example.Huge.desktop", ENTRY + b"Name=Huge\n" + b"#" * (4 << 20))
    write(b"org.example.Junk.desktop", junk(rng.randint(1, 70000)))
    write(b"org.example.JunkEntry.desktop", ENTRY + junk(rng.randint(1, 60000)))
    write(b"org.example.AtLimit.desktop", ENTRY + b"Name=AtLimit\n" + b"#" * (65536 - len(ENTRY) - 13 - 1) + b"\n")
    write(b"org.example.OverLimit.desktop", ENTRY + b"Name=Over\n" + b"#" * 65536 + b"\n")
    write(b"org.example.Odd.desktop", ENTRY + b"Name=\x1b[2J\x1b]0;owned\x07Odd\\n\\s\\\nExec=/proc/self/exe --help %u\n"
          b"Exec=\xff\xfe\nExec=" + b"A" * 30000 + b"\nExec=rm -rf ~ ; :(){ :|:& };:\nTryExec=/dev/zero\n"
          + b"".join(b"Name[l%d]=%d\n" % (i, i) for i in range(2000)) + b"[Desktop Entry]\n" * 50 + b"[unclosed\n")
    write(b"org.example.\xff\xfe.desktop", ENTRY + b"Name=NotText\n")
    write(b"\xc3(.desktop", ENTRY + b"Name=NotText\n")
    write(junk(rng.randint(1, 200)) + b".desktop", junk(rng.randint(0, 3000)))
    for name, target in [(b"org.example.Zero.desktop", b"/dev/zero"), (b"org.example.Random.desktop", b"/dev/urandom"),
                         (b"org.example.Loop.desktop", b"org.example.Loop.desktop"),
                         (b"org.example.Dangling.desktop", b"/nonexistent/x")]:
        remove(name)
        try:
            os.symlink(target, os.path.join(apps, name))
        except OSError as e:
            refuse(e)
    for name in [b"org.example.Fifo.desktop", b"org.example.Fifo2.desktop"]:
        remove(name)
        try:
            os.mkfifo(os.path.join(apps, name))
        except OSError as e:
            refuse(e)
    remove(b"org.example.Dir.desktop")
    try:
        os.mkdir(os.path.join(apps, b"org.example.Dir.desktop"))
    except OSError:
        pass
    # Many files, half of them changed each round; one rewritten in place, byte by byte, as it may be read.
    for i in range(1500):
        if n == 0 or rng.random() < 0.5:
            write(b"org.example.M%04d.desktop" % i, ENTRY + b"Name=M%d-%d\n" % (i, n))
    try:
        fd = os.open(os.path.join(apps, b"org.example.Torn.desktop"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for chunk in [ENTRY, b"Name=Tor", b"n\n", junk(100)]:
            os.write(fd, chunk)
        os.close(fd)
    except OSError as e:
        refuse(e)


while time.monotonic() < deadline:
    cgroup_round()
    desktop_round()
    counts["rounds"] += 1
    time.sleep(rng.random() * 0.05)
print(" ".join("%s=%d" % kv for kv in counts.items()), "refused:", " ".join("%s=%d" % kv for kv in sorted(refused.items())))
