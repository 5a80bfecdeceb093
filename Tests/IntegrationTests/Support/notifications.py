#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Drives python-dbusmock's notification_daemon on the session bus ($DBUS_SESSION_BUS_ADDRESS) for the tests.

    notifications.py calls              the calls it received, as JSON lines: {"method": ..., "args": [...]}
    notifications.py action ID KEY      it emits ActionInvoked(ID, KEY), as a click on an action would
    notifications.py closed ID REASON   it emits NotificationClosed(ID, REASON)
    notifications.py slow SECONDS       its first Notify from now on takes SECONDS to answer (ids 101, 102, ...)
    notifications.py forge ID KEY       another peer (this one) sends ActionInvoked(ID, KEY) straight to every
                                        other connection but the server's, as a hostile program on the bus could
    notifications.py forge ID KEY owner the same, first sending a NameOwnerChanged that names this peer the
                                        server's new owner, as if the bus had said so
"""
import json
import sys

import dbus
import dbus.lowlevel

PATH = "/org/freedesktop/Notifications"


def plain(v):
    if isinstance(v, (dbus.Array, list)):
        return [plain(x) for x in v]
    if isinstance(v, (dbus.Dictionary, dict)):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, (dbus.Byte, dbus.Int16, dbus.Int32, dbus.Int64, dbus.UInt16, dbus.UInt32, dbus.UInt64)):
        return int(v)
    return str(v)


def forge(nid, key, as_owner=False):
    bus = dbus.SessionBus()
    daemon = dbus.Interface(bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus"), "org.freedesktop.DBus")
    server = daemon.GetNameOwner("org.freedesktop.Notifications")
    targets = [n for n in daemon.ListNames() if n.startswith(":") and n not in (bus.get_unique_name(), server)]
    if not targets:
        sys.exit("no connection but the server's")
    for t in targets:
        if as_owner:
            msg = dbus.lowlevel.SignalMessage("/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged")
            msg.set_destination(t)
            msg.append("org.freedesktop.Notifications", server, bus.get_unique_name(), signature="sss")
            bus.send_message(msg)
        msg = dbus.lowlevel.SignalMessage(PATH, "org.freedesktop.Notifications", "ActionInvoked")
        msg.set_destination(t)
        msg.append(dbus.UInt32(nid), key, signature="us")
        bus.send_message(msg)
    bus.flush()


def main():
    if sys.argv[1] == "forge":
        forge(int(sys.argv[2]), sys.argv[3], as_owner=sys.argv[4:] == ["owner"])
        return
    mock = dbus.Interface(dbus.SessionBus().get_object("org.freedesktop.Notifications", PATH),
                          "org.freedesktop.DBus.Mock")
    if sys.argv[1] == "calls":
        for _, method, args in mock.GetCalls():
            print(json.dumps({"method": str(method), "args": plain(args)}))
    elif sys.argv[1] == "slow":
        mock.AddMethod("org.freedesktop.Notifications", "Notify", "susssasa{sv}i", "u",
                       "import time\nself.slow_calls = getattr(self, 'slow_calls', 0) + 1\n"
                       "if self.slow_calls == 1: time.sleep(%s)\nret = dbus.UInt32(100 + self.slow_calls)" % float(sys.argv[2]))
    elif sys.argv[1] == "action":
        mock.EmitSignal("org.freedesktop.Notifications", "ActionInvoked", "us",
                        [dbus.UInt32(int(sys.argv[2])), sys.argv[3]])
    elif sys.argv[1] == "closed":
        mock.EmitSignal("org.freedesktop.Notifications", "NotificationClosed", "uu",
                        [dbus.UInt32(int(sys.argv[2])), dbus.UInt32(int(sys.argv[3]))])
    else:
        sys.exit(__doc__)


main()
