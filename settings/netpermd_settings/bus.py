# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon's system bus face (docs/DBUS.md) as the settings app uses it: the decisions for everyone, which only
polkit can allow a person who is not an administrator on the socket, by asking for an administrator's password
through the desktop's polkit agent. Calls carry ALLOW_INTERACTIVE_AUTHORIZATION and wait as long as a person may
take to type it; nothing blocks the main loop (the connection and each call are asynchronous). Answers come as the
socket's replies do: {"ok": True, ...} or {"ok": False, "error": CODE, "message": TEXT}."""
from gi.repository import Gio, GLib

NAME, PATH = "org.netpermd.NetPerm1", "/org/netpermd/NetPerm1"
DECISIONS = "org.netpermd.NetPerm1.Decisions"
ERROR_PREFIX = "org.netpermd.NetPerm1.Error."
# How long a decision for everyone may wait for polkit's answer: the person types a password meanwhile (polkit's
# agents give up by themselves; GNOME Shell's dialog has no time-out of its own).
AUTH_TIMEOUT_MS = 5 * 60 * 1000

# D-Bus errors as the socket's error codes, so that the window reads one kind of answer.
_CODES = {
    "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired": "not-authorized",
    "org.freedesktop.DBus.Error.ServiceUnknown": "absent",
    "org.freedesktop.DBus.Error.NameHasNoOwner": "absent",
    "org.freedesktop.DBus.Error.NoReply": "silent",
    "org.freedesktop.DBus.Error.TimedOut": "silent",
}


def _code(error_name):
    """`org.netpermd.NetPerm1.Error.PermissionDenied` -> `permission-denied`; NotAuthorized -> `not-authorized`."""
    if error_name.startswith(ERROR_PREFIX):
        word = error_name[len(ERROR_PREFIX):]
        return "".join("-" + c.lower() if c.isupper() else c for c in word).lstrip("-")
    return _CODES.get(error_name, "failed")


class SystemBus:
    """One connection to the system bus, made when first needed; calls made meanwhile wait for it."""

    def __init__(self):
        self.connection = None
        self.waiting = []      # calls made before the connection: [(method, args, callback)]
        self.connecting = False

    def decide(self, app, kind, allow, callback):
        """DECIDE APP KIND allow|deny for everyone (polkit's org.netpermd.NetPerm1.manage)."""
        self._call("Decide", GLib.Variant("(sssbb)", (app, kind, "allow" if allow else "deny", False, True)), callback)

    def _call(self, method, args, callback):
        if self.connection is None:
            self.waiting.append((method, args, callback))
            if not self.connecting:
                self.connecting = True
                Gio.bus_get(Gio.BusType.SYSTEM, None, self._connected)
            return
        self.connection.call(NAME, PATH, DECISIONS, method, args, GLib.VariantType.new("(a{sv})"),
                             Gio.DBusCallFlags.ALLOW_INTERACTIVE_AUTHORIZATION, AUTH_TIMEOUT_MS, None,
                             self._answered, callback)

    def _connected(self, _source, result):
        self.connecting = False
        waiting, self.waiting = self.waiting, []
        try:
            self.connection = Gio.bus_get_finish(result)
        except GLib.Error as e:
            for _method, _args, callback in waiting:
                callback({"ok": False, "error": "absent", "message": e.message})
            return
        for method, args, callback in waiting:
            self._call(method, args, callback)

    @staticmethod
    def _answered(connection, result, callback):
        try:
            reply = connection.call_finish(result).unpack()[0]
        except GLib.Error as e:
            name = Gio.DBusError.get_remote_error(e) or ""
            Gio.DBusError.strip_remote_error(e)
            callback({"ok": False, "error": _code(name), "message": e.message})
            return
        callback(dict(reply, ok=True))
