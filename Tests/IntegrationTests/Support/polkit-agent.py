#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A polkit authentication agent of the test's own, standing for a desktop's password dialog (BusFaceTests): it
registers with polkit for one process (polkit asks it for that process's calls on the system bus), and when asked
runs polkit's own helper (polkit-agent-helper-1, setuid, which checks the password with PAM and tells polkit), typing
PASSWORD at its prompt. Written against polkit's agent D-Bus interface because Debian's pkttyagent lost what was typed
now and then here (its main thread read the terminal beside the listener's).

    polkit-agent.py PID PASSWORD

Prints "ready" once polkit has the agent, {"asked": USER} when polkit asks (the administrator whose password is
wanted), then {"outcome": "failed"|"complete"}, and ends after one authentication."""
import json
import pwd
import subprocess
import sys
import threading

from gi.repository import Gio, GLib

pid, password = int(sys.argv[1]), sys.argv[2]
PATH = "/org/netpermd/TestAgent"
INTERFACE = Gio.DBusNodeInfo.new_for_xml("""
<node><interface name="org.freedesktop.PolicyKit1.AuthenticationAgent">
  <method name="BeginAuthentication">
    <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="s" direction="in"/>
    <arg type="a{ss}" direction="in"/><arg type="s" direction="in"/><arg type="a(sa{sv})" direction="in"/>
  </method>
  <method name="CancelAuthentication"><arg type="s" direction="in"/></method>
</interface></node>""").interfaces[0]
loop = GLib.MainLoop()


def authenticate(user, cookie):
    """polkit's helper, as PolkitAgentSession runs it: the user as argument, the cookie on stdin, then PAM's
    conversation line by line; SUCCESS or FAILURE at the end."""
    helper = subprocess.Popen(["/usr/lib/polkit-1/polkit-agent-helper-1", user], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    helper.stdin.write(cookie + "\n")
    helper.stdin.flush()
    outcome = "failed"
    for line in helper.stdout:
        if line.startswith("PAM_PROMPT_ECHO_OFF") or line.startswith("PAM_PROMPT_ECHO_ON"):
            helper.stdin.write(password + "\n")
            helper.stdin.flush()
        elif line.strip() == "SUCCESS":
            outcome = "complete"
            break
        elif line.strip() == "FAILURE":
            break
    helper.stdin.close()
    helper.wait()
    return outcome


def on_call(_connection, _sender, _path, _interface, method, params, invocation):
    if method != "BeginAuthentication":
        invocation.return_value(None)
        return
    _action, _message, _icon, _details, cookie, identities = params.unpack()
    uid = next(d["uid"] for kind, d in identities if kind == "unix-user")
    user = pwd.getpwuid(uid).pw_name
    print(json.dumps({"asked": user}), flush=True)

    def run():
        outcome = authenticate(user, cookie)

        def done():
            print(json.dumps({"outcome": outcome}), flush=True)
            # As polkit's own agents: done either way; polkit knows from the helper whether it succeeded.
            invocation.return_value(None)
            GLib.timeout_add(200, loop.quit)
        GLib.idle_add(done)
    threading.Thread(target=run, daemon=True).start()


bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
bus.register_object(PATH, INTERFACE, on_call, None, None)
with open(f"/proc/{pid}/stat") as f:
    start = int(f.read().rsplit(")", 1)[1].split()[19])
subject = ("unix-process", {"pid": GLib.Variant("u", pid), "start-time": GLib.Variant("t", start)})
bus.call_sync("org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
              "org.freedesktop.PolicyKit1.Authority", "RegisterAuthenticationAgent",
              GLib.Variant("((sa{sv})ss)", (subject, "C.UTF-8", PATH)), None, Gio.DBusCallFlags.NONE, 10000, None)
print("ready", flush=True)
GLib.timeout_add_seconds(120, loop.quit)
loop.run()
