#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""netpermd-settings with a stopwatch, for the tests (nothing of it ships): runs the app's own window in this process,
against $NETPERMD_SOCKET (fake-netpermd.py apps N), and prints one JSON line of what it measured, then quits:

    settings-timed.py SETTINGS_DIR N

- `listed_s`: from the window's making (it connects then) to the first frame drawn with all N apps in the list, and
  `listed_after_snapshot_s` from the daemon's answer (its snapshot's line read off the socket, before it is parsed)
  to then;
- `search_ms`: from typing into the search field to the first frame drawn with the list narrowed, for each search;
- `listed_cpu_ms`, `search_cpu_ms`, `event_cpu_ms`: the main loop's CPU time over the same spans (what the machine's
  other load does not lengthen);
- `event_ms`: from a DECIDE's sending to the first frame with its row's new word (the daemon's event, in place);
- `max_stall_ms`: the longest lateness of a heartbeat (a GLib timeout every 10 ms at high priority, dispatched at
  the main loop's first iteration after it is due: its lateness, wall clock, is how long the main loop was held in
  one go, by its own work, by waiting on the X server, or by the machine's other load), from the window's showing
  (once made and presented) to the end, the first frame included; `max_stall_cpu_ms` the most main-thread CPU time
  between two beats (what the machine's other load does not lengthen); `stalls`: the beats later than 50 ms (their
  lateness, the main thread's CPU time and its time waiting for a CPU on the run queue (/proc schedstat) since the
  last beat, the step, the apps in the list then, the frame's number); `first_frame_ms`, `first_frame_cpu_ms`: the
  lateness of the beat after the first frame; `slowest`: the five latest beats, in the same form;
- `startup_ms`, `startup_cpu_ms`: the window's making and presenting, one callback before anything is shown, apart.

The session's desktop services (the portal, the accessibility bus and its registry) are started before the app, as
a person's session has them: their activation (0.3-0.8 s of GTK and libadwaita waiting on it) is not the app's."""
import json
import os
import sys
import time

import gi

gi.require_version("Gtk", "4.0")
gi.require_version("Adw", "1")
from gi.repository import Adw, Gio, GLib  # noqa: E402

sys.path.insert(0, sys.argv[1])
from netpermd_settings import protocol  # noqa: E402
from netpermd_settings.window import Window  # noqa: E402

# When each line was read off the socket, before its parsing: the snapshot's is the daemon's answer.
line_read = [0.0]
_parse = protocol.parse_line


def parse_line(raw):
    line_read[0] = time.monotonic()
    return _parse(raw)


protocol.parse_line = parse_line

N = int(sys.argv[2])


def run_queue_ms():
    """The main thread's time waiting for a CPU, runnable (the scheduler's statistics): the machine's other load."""
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) / 1e6

out = {"apps": N, "search_ms": [], "stalls": []}


class Run:
    def __init__(self, app):
        self.app = app
        self.last_frame = None
        self.max_gap = 0.0
        self.last_cpu = 0.0
        self.pending = None       # (name, condition, since)
        self.phase = "start"
        self.frames = 0
        self.steps = [self.listed, self.search("app0999", 1), self.search("app09", 100), self.search("", N),
                      self.scroll, self.event]
        self.made, self.made_cpu = time.monotonic(), time.thread_time()
        self.win = Window(app)
        self.win.set_default_size(1000, 720)
        self.win.present()
        self.beat_at, self.beat_cpu = time.monotonic(), time.thread_time()
        out["startup_ms"] = round((self.beat_at - self.made) * 1000, 1)
        out["startup_cpu_ms"] = round((self.beat_cpu - self.made_cpu) * 1000, 1)
        self.beat_queued = run_queue_ms()
        self.max_stall = self.max_stall_cpu = 0.0
        self.slowest = []
        GLib.timeout_add(self.BEAT_MS, self.beat, priority=GLib.PRIORITY_HIGH)
        self.win.add_tick_callback(self.tick)
        # When the daemon's snapshot came: the listing's own time starts there.
        listener = self.win.daemon.listener
        heard = listener.snapshot
        def snapshot(*args):
            out.setdefault("snapshot_s", round(line_read[0] - self.made, 3))
            heard(*args)
        listener.snapshot = snapshot
        told = listener.state
        def state(fault, detail):
            if fault is not None:
                out.setdefault("faults", []).append(f"{fault.value}: {detail}")
            told(fault, detail)
        listener.state = state
        GLib.timeout_add_seconds(60, self.give_up)

    BEAT_MS = 10

    def beat(self):
        now, cpu, queued = time.monotonic(), time.thread_time(), run_queue_ms()
        # Due BEAT_MS after the last beat ran (GLib arms a timeout again from its dispatch).
        late, busy = (now - self.beat_at) * 1000 - self.BEAT_MS, (cpu - self.beat_cpu) * 1000
        beat = [round(late, 1), round(busy, 1), round(queued - self.beat_queued, 1), self.phase,
                self.win.filtered.model.get_n_items(), self.frames]
        self.beat_at, self.beat_cpu, self.beat_queued = now, cpu, queued
        self.max_stall, self.max_stall_cpu = max(self.max_stall, late), max(self.max_stall_cpu, busy)
        if self.frames == 1 and "first_frame_ms" not in out:
            out["first_frame_ms"], out["first_frame_cpu_ms"] = beat[0], beat[1]
        if late > 50:
            out["stalls"].append(beat)
        self.slowest = sorted(self.slowest + [beat], reverse=True)[:5]
        return True

    def tick(self, _widget, clock):
        now, cpu = time.monotonic(), time.thread_time()
        if self.last_frame is not None:
            self.max_gap = max(self.max_gap, (now - self.last_frame) * 1000)
        self.last_frame, self.last_cpu = now, cpu
        self.frames += 1
        if self.pending is not None:
            name, done, since, cpu_since = self.pending
            if done():
                self.pending = None
                took = now - since
                out.setdefault(name + "_cpu_ms", []).append(round((cpu - cpu_since) * 1000, 1))
                if name == "listed":
                    out["listed_s"] = round(took, 3)
                    out["listed_after_snapshot_s"] = round(took - out.get("snapshot_s", 0), 3)
                elif name == "search":
                    out["search_ms"].append(round(took * 1000, 1))
                elif name == "event":
                    out["event_ms"] = round(took * 1000, 1)
                GLib.idle_add(self.next)
        return True

    def next(self):
        if not self.steps:
            out["max_frame_gap_ms"] = round(self.max_gap, 1)
            out["max_stall_ms"], out["max_stall_cpu_ms"] = round(self.max_stall, 1), round(self.max_stall_cpu, 1)
            out["slowest"] = self.slowest
            print(json.dumps(out), flush=True)
            self.app.quit()
            return False
        step = self.steps.pop(0)
        self.phase = getattr(step, "__name__", "?")
        step()
        return False

    def listed(self):
        self.pending = ("listed", lambda: self.win.filtered.model.get_n_items() == N, self.made,
                        self.made_cpu)

    def search(self, text, want):
        def step():
            self.phase = "search " + text
            self.win.search.set_text(text)
            self.pending = ("search", lambda: self.win.filtered.model.get_n_items() == want, time.monotonic(),
                            time.thread_time())
        return step

    def scroll(self):
        # To the end of the list and back: rows are made as they come into view.
        adj = self.win.list.get_vadjustment()
        adj.set_value(adj.get_upper())
        GLib.timeout_add(300, lambda: (adj.set_value(0), GLib.timeout_add(300, self.next))[0] and False)

    def event(self):
        item = self.win.apps.items["app0500"]
        self.win.daemon.decide("app0500", "wifi", False, lambda _r: None)
        self.pending = ("event", lambda: item.choice_key == "some", time.monotonic(), time.thread_time())

    def give_up(self):
        out["error"] = f"not done within 60 s: {self.pending and self.pending[0]}"
        print(json.dumps(out), flush=True)
        self.app.quit()
        return False


def session_services():
    """What a person's session has running before any app starts: the portal, the accessibility bus, its registry."""
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)

    def ping(conn, name, path):
        conn.call_sync(name, path, "org.freedesktop.DBus.Peer", "Ping", None, None, Gio.DBusCallFlags.NONE, 10000, None)
    ping(bus, "org.freedesktop.portal.Desktop", "/org/freedesktop/portal/desktop")
    address = bus.call_sync("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress", None,
                            GLib.VariantType.new("(s)"), Gio.DBusCallFlags.NONE, 10000, None).unpack()[0]
    a11y = Gio.DBusConnection.new_for_address_sync(
        address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
        None, None)
    ping(a11y, "org.a11y.atspi.Registry", "/org/a11y/atspi/registry")


def main():
    session_services()
    app = Adw.Application(application_id="org.netpermd.Settings.Timed")
    app.connect("activate", lambda a: setattr(a, "run_", Run(a)) or a.run_.next())
    app.run([sys.argv[0]])


if __name__ == "__main__":
    main()
