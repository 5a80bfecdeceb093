#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A polkit authentication agent of the test's own, as a desktop's is (BusFaceTests): Debian's pkttyagent, registered
for one process (polkit finds it for that process's calls on the system bus), on a pseudo-terminal of its own (it
reads passwords from its controlling terminal only).

    polkit-agent.py PID PASSWORD

Prints "ready" once polkit has the agent, {"asked": WHO} when a password is asked (whose), types PASSWORD, prints
{"outcome": "failed"|"complete"} and ends: one authentication per agent (a second one on the same pkttyagent never
read what was typed, in this test)."""
import json
import os
import pty
import select
import sys
import termios
import time

pid, password = sys.argv[1], sys.argv[2]
notify_r, notify_w = os.pipe()
child, tty = pty.fork()
if child == 0:
    os.close(notify_r)
    os.execv("/usr/bin/pkttyagent", ["pkttyagent", "--process", pid, f"--notify-fd={notify_w}"])
os.close(notify_w)
# pkttyagent closes the descriptor once registered (or exits): EOF either way.
os.read(notify_r, 1)
# The terminal's own side (pkttyagent's by now), whose settings say when it has turned echo off (the master's do not).
slave = os.open(os.readlink(f"/proc/{child}/fd/0"), os.O_RDWR | os.O_NOCTTY)
print("ready", flush=True)


def type_password():
    # It turns echo off after its prompt, discarding what was typed before (TCSAFLUSH, before the change): type once
    # it has (bounded).
    deadline = time.monotonic() + 5
    while termios.tcgetattr(slave)[3] & termios.ECHO and time.monotonic() < deadline:
        time.sleep(0.005)
    os.write(tty, password.encode() + b"\n")


text = b""
while True:
    ready, _, _ = select.select([tty], [], [], 60)
    if not ready:
        break
    try:
        data = os.read(tty, 4096)
    except OSError:
        break
    if not data:
        break
    text += data
    if b"Authenticating as: " in text and text.rstrip().endswith(b"Password:"):
        who = text.split(b"Authenticating as: ")[-1].split(b"\n")[0].decode(errors="replace").strip()
        print(json.dumps({"asked": who}), flush=True)
        type_password()
        text = b""
    outcome = "failed" if b"AUTHENTICATION FAILED" in text else "complete" if b"AUTHENTICATION COMPLETE" in text else None
    if outcome:
        print(json.dumps({"outcome": outcome}), flush=True)
        break
os.kill(child, 9)
os.waitpid(child, 0)
