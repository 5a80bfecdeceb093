# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon as the settings app talks to it: the one module that speaks its protocol (docs/PROTOCOL.md), so that
moving to another transport changes this file (and bus.py) alone. Two connections on GLib's main loop: one
for requests, answered in order, and one holding `SUBSCRIBE mine links policy prompts`, whose snapshot and events
keep the views current. Decisions for everyone go over the system bus instead (bus.py): there polkit may ask for an
administrator's password, where the socket can only refuse a person who is not one. Nothing here blocks: connecting, writing and reading are asynchronous, every request and
the subscription's answer have a time-out, and a fault is told as what it is (`Fault`), never as an empty list."""
import enum
import json
import os
import traceback

from gi.repository import Gio, GLib

from .bus import SystemBus

DEFAULT_SOCKET = "/run/netpermd/netpermd.sock"
# How long a request may wait for its answer, and a connection for its socket (seconds).
TIMEOUT_S = 5
TOPICS = ("mine", "links", "policy", "prompts")


def socket_path():
    return os.environ.get("NETPERMD_SOCKET") or DEFAULT_SOCKET


class Fault(enum.Enum):
    """What went wrong with the daemon, as the window tells it."""
    ABSENT = "absent"        # no socket, or nobody listening on it
    STOPPED = "stopped"      # it closed the connection (stopped, restarted)
    NOISE = "noise"          # it sent what is not a JSON line in UTF-8
    SHAPE = "shape"          # it sent JSON that is not what the protocol says
    SILENT = "silent"        # it did not answer in time


class ProtocolError(Exception):
    def __init__(self, fault, detail):
        super().__init__(detail)
        self.fault, self.detail = fault, detail


def _object(value, what):
    if not isinstance(value, dict):
        raise ProtocolError(Fault.SHAPE, f"{what} is not an object")
    return value


def _verdict(v):
    """A verdict with the members the views read, of the types they read."""
    _object(v, "a verdict")
    if not isinstance(v.get("app"), str):
        raise ProtocolError(Fault.SHAPE, "a verdict without an app id")
    for key in ("permissions", "sources"):
        if not isinstance(v.get(key, {}), dict):
            raise ProtocolError(Fault.SHAPE, f"a verdict's {key} is not an object")
    for key in ("denied_kinds", "pending_kinds"):
        if not isinstance(v.get(key, []), list):
            raise ProtocolError(Fault.SHAPE, f"a verdict's {key} is not a list")
    if not isinstance(v.get("names", {}), dict):
        raise ProtocolError(Fault.SHAPE, "a verdict's names is not an object")
    return v


def _list(obj, key, each):
    value = obj.get(key, [])
    if not isinstance(value, list):
        raise ProtocolError(Fault.SHAPE, f"{key} is not a list")
    return [each(x) for x in value]


def _prompt(p):
    _object(p, "a prompt")
    if not isinstance(p.get("id"), int) or not isinstance(p.get("app"), str):
        raise ProtocolError(Fault.SHAPE, "a prompt without id or app")
    return p


def parse_line(raw):
    """Bytes of one line -> a JSON object, or ProtocolError(NOISE or SHAPE)."""
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(Fault.NOISE, "a line that is not UTF-8") from None
    try:
        obj = json.loads(text)
    except ValueError:
        raise ProtocolError(Fault.NOISE, f"a line that is not JSON: {text[:60]!r}") from None
    return _object(obj, "a line")


class Line:
    """One connection: lines written in order without blocking, lines read one by one."""

    def __init__(self, path, on_line, on_fault):
        self.path, self.on_line, self.on_fault = path, on_line, on_fault
        self.conn = self.out = self.input = None
        self.closed = False
        self.queue = []
        self.writing = False
        self.cancel = Gio.Cancellable()

    def open(self, done):
        # No socket time-out here: it would end the event connection's quiet reads too (a Unix socket's connect does
        # not wait: it is taken or refused at once). Replies have time-outs of their own (`Daemon._request`).
        client = Gio.SocketClient()
        client.connect_async(Gio.UnixSocketAddress.new(self.path), self.cancel, self._connected, done)

    def _connected(self, client, result, done):
        try:
            conn = client.connect_finish(result)
        except GLib.Error as e:
            if not self.closed:
                self.on_fault(Fault.ABSENT, e.message)
            return
        if self.closed:
            # Given up meanwhile (a retry made new connections): this one is not theirs.
            conn.close(None)
            return
        self.conn = conn
        self.out = self.conn.get_output_stream()
        self.input = Gio.DataInputStream.new(self.conn.get_input_stream())
        # A snapshot of 1,000 apps is a line of 700 KB: read in 4 KB pieces it took 170 turns of the main loop.
        self.input.set_buffer_size(256 * 1024)
        self._read()
        done()

    def send(self, text):
        """Queues a line; it is written as the socket takes it, never blocking the main loop."""
        if self.closed:
            return
        self.queue.append((text + "\n").encode())
        self._write()

    def _write(self):
        if self.writing or not self.queue or self.closed:
            return
        self.writing = True
        data = self.queue.pop(0)
        self.out.write_bytes_async(GLib.Bytes.new(data), GLib.PRIORITY_DEFAULT, self.cancel, self._written, data)

    def _written(self, stream, result, data):
        self.writing = False
        try:
            n = stream.write_bytes_finish(result)
        except GLib.Error as e:
            if not self.closed:
                self.on_fault(Fault.STOPPED, e.message)
            return
        if n < len(data):
            self.queue.insert(0, data[n:])
        self._write()

    def _read(self):
        self.input.read_line_async(GLib.PRIORITY_DEFAULT, self.cancel, self._got)

    def _got(self, stream, result):
        if self.closed:
            return
        try:
            raw, _length = stream.read_line_finish(result)
        except GLib.Error as e:
            self.on_fault(Fault.STOPPED, e.message)
            return
        # The end of the stream comes as an empty line here (PyGObject gives no None): the daemon writes none.
        if not raw:
            self.on_fault(Fault.STOPPED, None)
            return
        try:
            self.on_line(parse_line(raw))
        except ProtocolError as e:
            self.on_fault(e.fault, e.detail)
            return
        except Exception:  # a view's bug: said, and the connection goes on (it must not stop reading for good)
            traceback.print_exc()
        if not self.closed:
            self._read()

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.cancel.cancel()
        if self.conn is not None:
            self.conn.close(None)


class Listener:
    """What the views are told (each a callable; the window wires them)."""

    def __init__(self, state, snapshot, app, prompt, prompt_closed, changed, counted=None):
        # state(fault or None, detail); snapshot(apps, prompts, privileged); app(verdict); prompt(prompt);
        # prompt_closed(id); changed(): something moved that the Data page may show (a policy, a budget);
        # counted(apps, user_apps): the new totals of the person's apps whose bytes moved (USAGE's entries).
        self.state, self.snapshot, self.app = state, snapshot, app
        self.prompt, self.prompt_closed, self.changed = prompt, prompt_closed, changed
        self.counted = counted


class Daemon:
    """The daemon's requests and events. `start()` connects; on a fault everything pending is answered with it,
    `listener.state(fault, detail)` says it, and after ABSENT or STOPPED it connects again by itself (`retry()`
    does at once)."""

    RETRY_MS = 1000

    def __init__(self, listener):
        self.listener = listener
        self.requests = self.events = None
        self.waiting = []          # [(callback, parse, deadline source id)]
        self.connected = False
        self.fault = None
        self.retry_source = None
        self.ack_timer = None
        self.privileged = False
        self.bus = SystemBus()

    # -- connection

    def start(self):
        self.retry_source = None
        path = socket_path()
        requests = self.requests = Line(path, self._reply, self._fault)
        events = self.events = Line(path, self._event, self._fault)
        requests.open(lambda: events.open(self._subscribe))
        return False

    def retry(self):
        self._close()
        if self.retry_source is not None:
            GLib.source_remove(self.retry_source)
            self.retry_source = None
        self.start()

    def _subscribe(self):
        self.events.send("SUBSCRIBE " + " ".join(TOPICS))
        self.ack_timer = GLib.timeout_add_seconds(TIMEOUT_S, self._silent, "the subscription")

    def _silent(self, what):
        self.ack_timer = None
        self._fault(Fault.SILENT, what)
        return False

    def _close(self):
        for line in (self.requests, self.events):
            if line is not None:
                line.close()
        if self.ack_timer is not None:
            GLib.source_remove(self.ack_timer)
            self.ack_timer = None
        waiting, self.waiting = self.waiting, []
        for callback, _parse, timer in waiting:
            GLib.source_remove(timer)
            callback(None)
        self.connected = False

    def _fault(self, fault, detail):
        self._close()
        # A daemon that stopped and is not back yet has stopped, not "is not running": its socket's absence while
        # the window waits for it to start again says nothing new.
        if fault == Fault.ABSENT and self.fault == Fault.STOPPED:
            fault = Fault.STOPPED
        self.fault = fault
        self.listener.state(fault, detail)
        if fault in (Fault.ABSENT, Fault.STOPPED) and self.retry_source is None:
            self.retry_source = GLib.timeout_add(self.RETRY_MS, self.start)

    # -- events

    def _event(self, obj):
        if "subscribed" in obj:
            if self.ack_timer is not None:
                GLib.source_remove(self.ack_timer)
                self.ack_timer = None
            self.privileged = obj.get("privileged") is True
            return
        if obj.get("ok") is False:
            raise ProtocolError(Fault.SHAPE, obj.get("message") or str(obj.get("error")))
        name = obj.get("event")
        if not isinstance(name, str):
            raise ProtocolError(Fault.SHAPE, "an event without a name")
        if name in ("snapshot", "resync"):
            apps = _list(obj, "apps", _verdict)
            prompts = _list(obj, "prompts", _prompt)
            if not self.connected or self.fault is not None:
                self.connected, self.fault = True, None
                self.listener.state(None, None)
            self.listener.snapshot(apps, prompts, self.privileged)
        elif name == "app":
            self.listener.app(_verdict(obj))
        elif name == "prompt":
            self.listener.prompt(_prompt(obj))
        elif name in ("prompt-expired", "prompt-answered", "prompt-withdrawn"):
            self.listener.prompt_closed(_prompt(obj)["id"])
        elif name in ("policy", "usage"):
            self.listener.changed()
        elif name == "counted" and self.listener.counted is not None:
            # The apps' bytes as they move, with their new totals (no USAGE asked).
            self.listener.counted(_list(obj, "apps", lambda a: _object(a, "an app's usage")),
                                  _list(obj, "user_apps", lambda a: _object(a, "an app's usage")))
        elif name == "stopping":
            self._fault(Fault.STOPPED, None)

    # -- requests

    def _request(self, line, callback, parse):
        """Sends `line`; `callback(reply)` gets its answer parsed by `parse`, or None when it cannot come (the
        fault is told to the listener as well)."""
        if not self.connected:
            callback(None)
            return
        timer = GLib.timeout_add_seconds(TIMEOUT_S, self._silent, line.split()[0])
        self.waiting.append((callback, parse, timer))
        self.requests.send(line)

    def _reply(self, obj):
        if not self.waiting:
            raise ProtocolError(Fault.SHAPE, "an answer to nothing asked")
        callback, parse, timer = self.waiting.pop(0)
        GLib.source_remove(timer)
        callback(parse(obj) if obj.get("ok") is not False else obj)

    def usage(self, callback):
        def parse(obj):
            _list(obj, "apps", lambda a: _object(a, "an app's usage"))
            if not isinstance(obj.get("period", {}), dict):
                raise ProtocolError(Fault.SHAPE, "USAGE's period is not an object")
            return obj
        self._request("USAGE", callback, parse)

    def decide(self, app, kind, allow, callback, everyone=False):
        """For the person's own processes on the socket (a privileged person's are everyone's there); `everyone`: for
        everyone over the bus, asking polkit, which may ask for a password first."""
        if everyone and not self.privileged:
            self.bus.decide(app, kind, allow, callback)
            return
        self._request(f"DECIDE {app} {kind} {'allow' if allow else 'deny'}", callback, lambda o: o)

    def answer(self, prompt_id, choice, callback):
        self._request(f"ANSWER {int(prompt_id)} {choice}", callback, lambda o: o)

    def reset_usage(self, callback):
        self._request("RESET-USAGE", callback, lambda o: o)

    def report(self, callback):
        """The privacy report of the apps the caller may read (REPORT): each app's destinations, as objects."""
        def parse(obj):
            for a in _list(obj, "apps", lambda a: _object(a, "a report's app")):
                _list(a, "destinations", lambda d: _object(d, "a destination"))
            return obj
        self._request("REPORT", callback, parse)

    def keep_report(self, keep, callback):
        self._request(f"KEEP-REPORT {'yes' if keep else 'no'}", callback, lambda o: o)
