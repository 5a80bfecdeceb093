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
- `max_stall_ms` (after the window's first frame, which lays out every page): the most CPU time the main loop spent between two frames of the window's frame clock while all that
  happened (a frame is asked for at every tick, so that is the main loop busy in one go), `stalls`: those over 50 ms
  (CPU, wall, the step, the apps in the list then, the frame's number), and `max_gap_ms` the longest wall-clock gap (which the machine's other load lengthens)."""
import json
import os
import sys
import time

import gi

gi.require_version("Gtk", "4.0")
gi.require_version("Adw", "1")
from gi.repository import Adw, GLib  # noqa: E402

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
out = {"apps": N, "search_ms": [], "stalls": []}


class Run:
    def __init__(self, app):
        self.app = app
        self.last_frame = None
        self.max_gap = self.max_busy = 0.0
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

    def tick(self, _widget, clock):
        now, cpu = time.monotonic(), time.thread_time()
        if self.last_frame is not None:
            gap = (now - self.last_frame) * 1000
            busy = (cpu - self.last_cpu) * 1000
            self.max_gap = max(self.max_gap, gap)
            if self.frames > 1:
                self.max_busy = max(self.max_busy, busy)
            if busy > 50 and self.frames > 1:
                out["stalls"].append([round(busy, 1), round(gap, 1), self.phase, self.win.filtered.model.get_n_items(),
                                      self.frames])
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
            out["max_gap_ms"] = round(self.max_gap, 1)
            out["max_stall_ms"] = round(self.max_busy, 1)
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


def main():
    app = Adw.Application(application_id="org.netpermd.Settings.Timed")
    app.connect("activate", lambda a: setattr(a, "run_", Run(a)) or a.run_.next())
    app.run([sys.argv[0]])


if __name__ == "__main__":
    main()
