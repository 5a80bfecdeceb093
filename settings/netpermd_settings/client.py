# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon's control socket, as the settings app talks to it: JSON lines (docs/PROTOCOL.md) over two
connections on GLib's main loop, never blocking it. `requests` answers requests in order; `events` holds one
SUBSCRIBE and hears its events. Either closing (the daemon stopped) is told once; `start()` connects again."""
import json
import os

from gi.repository import Gio, GLib

DEFAULT_SOCKET = "/run/netpermd/netpermd.sock"


def socket_path():
    return os.environ.get("NETPERMD_SOCKET") or DEFAULT_SOCKET


class Line:
    """One connection: lines out, lines in, in order."""

    def __init__(self, path, on_line, on_closed):
        self.path, self.on_line, self.on_closed = path, on_line, on_closed
        self.conn = None
        self.out = None
        self.input = None
        self.closed = False
        self.cancel = Gio.Cancellable()

    def open(self, done):
        client = Gio.SocketClient()
        client.connect_async(Gio.UnixSocketAddress.new(self.path), self.cancel, self._connected, done)

    def _connected(self, client, result, done):
        try:
            self.conn = client.connect_finish(result)
        except GLib.Error as e:
            done(e.message)
            return
        self.out = self.conn.get_output_stream()
        self.input = Gio.DataInputStream.new(self.conn.get_input_stream())
        self._read()
        done(None)

    def send(self, text):
        if self.closed or self.out is None:
            return False
        try:
            self.out.write_all((text + "\n").encode(), None)
        except GLib.Error:
            self.close()
            return False
        return True

    def _read(self):
        self.input.read_line_async(GLib.PRIORITY_DEFAULT, self.cancel, self._got)

    def _got(self, stream, result):
        try:
            line, _ = stream.read_line_finish_utf8(result)
        except GLib.Error:
            line = None
        if line is None:
            self.close()
            return
        try:
            self.on_line(json.loads(line))
        except ValueError:
            pass
        if not self.closed:
            self._read()

    def close(self, notify=True):
        """Closes the connection; `notify`: tell `on_closed` (not when the client closes it itself)."""
        if self.closed:
            return
        self.closed = True
        self.cancel.cancel()
        if self.conn is not None:
            self.conn.close(None)
        if notify:
            self.on_closed()


class Client:
    """Requests and events. `on_state(connected, message)` says when the daemon comes and goes; `on_event(event)`
    each event of the subscription; `on_subscribed(reply)` its reply (whether the caller is privileged)."""

    RETRY_MS = 1000

    def __init__(self, topics, on_event, on_state, on_subscribed):
        self.topics = topics
        self.on_event, self.on_state, self.on_subscribed = on_event, on_state, on_subscribed
        self.requests = self.events = None
        self.waiting = []
        self.connected = False
        self.retry = None

    def start(self):
        self.retry = None
        path = socket_path()
        self.requests = Line(path, self._reply, self._closed)
        self.events = Line(path, self._event, self._closed)

        def opened(error):
            if error is not None:
                self._closed(error)
                return
            self.events.open(subscribed)

        def subscribed(error):
            if error is not None:
                self._closed(error)
                return
            self.events.send("SUBSCRIBE " + " ".join(self.topics))
        self.requests.open(opened)
        return False

    def _event(self, obj):
        if "event" in obj:
            self.on_event(obj)
        elif "subscribed" in obj:
            if not self.connected:
                self.connected = True
                self.on_state(True, None)
            self.on_subscribed(obj)
        elif obj.get("ok") is False:
            self.on_state(False, obj.get("message", obj.get("error", "")))

    def _reply(self, obj):
        if self.waiting:
            callback = self.waiting.pop(0)
            if callback is not None:
                callback(obj)

    def request(self, line, callback=None):
        """Sends `line`; `callback(reply)` gets its answer, or {"ok": false, "error": "unreachable"} if it never comes."""
        if not self.connected or not self.requests.send(line):
            if callback is not None:
                callback({"ok": False, "error": "unreachable", "message": "netpermd is not running"})
            return
        self.waiting.append(callback)

    def _closed(self, message=None):
        for line in (self.requests, self.events):
            if line is not None:
                line.close(notify=False)
        waiting, self.waiting = self.waiting, []
        for callback in waiting:
            if callback is not None:
                callback({"ok": False, "error": "unreachable", "message": "netpermd stopped"})
        was = self.connected
        self.connected = False
        if was or self.retry is None:
            self.on_state(False, message)
        if self.retry is None:
            self.retry = GLib.timeout_add(self.RETRY_MS, self.start)
