#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A notification server that struggles, as dunst does under a flood: it takes Notify and CloseNotification one at a
time, each SECONDS after the one before (--notify-delay, --close-delay), and answers it then. Signals go out at once,
as a person's click does. It speaks python-dbusmock's org.freedesktop.DBus.Mock GetCalls and EmitSignal, so that
Support/notifications.py reads and drives it as it does the mock; a call is in GetCalls once the server has taken it
(drawn or closed it), not when it arrived.

    slow-notifications.py [--notify-delay SECONDS] [--close-delay SECONDS]

Ids are 1, 2, ... in the order the notifications are drawn; a Notify that replaces an id shown keeps it.
"""
import argparse
import time

import dbus
import dbus.lowlevel
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
MOCK = "org.freedesktop.DBus.Mock"


class Server(dbus.service.Object):
    def __init__(self, bus, notify_delay, close_delay):
        super().__init__(bus, PATH)
        self.bus = bus
        self.delays = {"Notify": notify_delay, "CloseNotification": close_delay}
        self.queue = []
        self.busy = False
        self.calls = []
        self.next_id = 1
        self.shown = set()

    # The queue: one call at a time, each after its delay.
    def enqueue(self, method, args, ok, err):
        self.queue.append((method, args, ok, err))
        if not self.busy:
            self.next_call()

    def next_call(self):
        if not self.queue:
            self.busy = False
            return
        self.busy = True
        method = self.queue[0][0]
        GLib.timeout_add(int(self.delays[method] * 1000), self.take)

    def take(self):
        method, args, ok, _ = self.queue.pop(0)
        self.calls.append((time.time(), method, args))
        if method == "Notify":
            nid = int(args[1])
            if nid == 0 or nid not in self.shown:
                nid = self.next_id
                self.next_id += 1
            self.shown.add(nid)
            ok(dbus.UInt32(nid))
        else:
            nid = int(args[0])
            ok()
            if nid in self.shown:
                self.shown.discard(nid)
                self.NotificationClosed(dbus.UInt32(nid), dbus.UInt32(3))
        self.next_call()
        return False

    @dbus.service.method(NAME, in_signature="", out_signature="as")
    def GetCapabilities(self):
        return ["body", "actions"]

    @dbus.service.method(NAME, in_signature="", out_signature="ssss")
    def GetServerInformation(self):
        return ("slow-notify", "test", "1.0", "1.2")

    @dbus.service.method(NAME, in_signature="susssasa{sv}i", out_signature="u", async_callbacks=("ok", "err"))
    def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout, ok, err):
        self.enqueue("Notify", [app, replaces, icon, summary, body, actions, hints, timeout], ok, err)

    @dbus.service.method(NAME, in_signature="u", out_signature="", async_callbacks=("ok", "err"))
    def CloseNotification(self, nid, ok, err):
        self.enqueue("CloseNotification", [nid], ok, err)

    @dbus.service.signal(NAME, signature="uu")
    def NotificationClosed(self, nid, reason):
        pass

    @dbus.service.method(MOCK, in_signature="", out_signature="a(tsav)")
    def GetCalls(self):
        return [(dbus.UInt64(int(t)), m, a) for t, m, a in self.calls]

    @dbus.service.method(MOCK, in_signature="sssav", out_signature="")
    def EmitSignal(self, interface, name, signature, args):
        msg = dbus.lowlevel.SignalMessage(PATH, interface, name)
        msg.append(*args, signature=signature)
        self.bus.send_message(msg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--notify-delay", type=float, default=0)
    ap.add_argument("--close-delay", type=float, default=0)
    a = ap.parse_args()
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    server = Server(bus, a.notify_delay, a.close_delay)
    # The name last: once it is owned, the server answers.
    name = dbus.service.BusName(NAME, bus)
    GLib.MainLoop().run()
    del server, name


main()
