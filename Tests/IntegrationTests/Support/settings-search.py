#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The settings app's search, typed at different speeds (nothing of it ships): runs the app's window in this process
against $NETPERMD_SOCKET (fake-netpermd.py apps N), types each sequence of texts into the search field with the given
pauses (a narrowing or widening still under way when the next text comes), waits for the search's steps to end, and
compares the list with the apps whose name or id holds the last text. Prints one JSON line, then quits:

    settings-search.py SETTINGS_DIR N

`checked`: the sequences compared; `wrong`: each sequence whose list was not its matches (the sequence, the matches'
count, the list's)."""
import json
import sys
import time

import gi

gi.require_version("Gtk", "4.0")
gi.require_version("Adw", "1")
from gi.repository import Adw, GLib  # noqa: E402

sys.path.insert(0, sys.argv[1])
from netpermd_settings.window import Window  # noqa: E402

N = int(sys.argv[2])
# (text, milliseconds before the next): narrowing, widening, both, and each interrupted by the next.
SEQUENCES = [
    [("app0999", 0)], [("app09", 0)], [("", 0)], [("app0999", 0)], [("app0", 0)],
    [("app0999", 5), ("app099", 5), ("app0", 5), ("app09", 5), ("app", 0)],
    [("app1", 3), ("", 3), ("app0999", 0)], [("app0999", 3), ("app09999", 0)],
    [("", 40), ("app0", 40), ("app00", 40), ("app000", 40), ("app0000", 0)],
    [("app0500", 2), ("app05", 2), ("app050", 2), ("xyz", 0)], [("", 0)],
    [("a", 5), ("ap", 5), ("app0", 5), ("app09", 5)], [("app0999", 30), ("app09", 3), ("app0", 0)],
    [("app099", 10), ("", 10), ("app1", 0)], [("zzz", 0)], [("app", 20), ("app00", 15), ("app000", 0)],
    [("", 0)], [("app0999", 12), ("app", 0)], [("APP05", 8), ("app0", 0)],
]
out = {"checked": 0, "wrong": []}


class Run:
    def __init__(self, app):
        self.app = app
        self.sequences = list(SEQUENCES)
        self.win = Window(app)
        self.win.set_default_size(1000, 720)
        self.win.present()
        GLib.timeout_add(50, self.listed)
        GLib.timeout_add_seconds(150, self.give_up)

    def listed(self):
        if self.win.apps.store.get_n_items() < N or self.win.apps.pending:
            return True
        GLib.idle_add(self.next)
        return False

    def next(self):
        if not self.sequences:
            self.end()
            return False
        sequence = self.sequences.pop(0)
        self.type(sequence, list(sequence))
        return False

    def type(self, sequence, left):
        text, pause = left.pop(0)
        self.win.search.set_text(text)
        if left:
            GLib.timeout_add(max(pause, 1), self.type, sequence, left)
        else:
            GLib.timeout_add(20, self.settled, sequence, text)
        return False

    def settled(self, sequence, text):
        search = self.win.filtered
        if search.pending is not None or search.cut is not None:
            return True
        store, model = self.win.apps.store, search.model
        t = text.casefold().strip()
        want = [store.get_item(i).app for i in range(store.get_n_items()) if t in store.get_item(i).key]
        shown = [model.get_item(i).app for i in range(model.get_n_items())]
        out["checked"] += 1
        if shown != want:
            out["wrong"].append([sequence, len(want), len(shown)])
        GLib.idle_add(self.next)
        return False

    def end(self):
        print(json.dumps(out), flush=True)
        self.app.quit()

    def give_up(self):
        out["error"] = f"not done within 150 s: {out['checked']} checked"
        self.end()
        return False


def main():
    app = Adw.Application(application_id="org.netpermd.Settings.Search")
    app.connect("activate", lambda a: setattr(a, "run_", Run(a)))
    app.run([sys.argv[0]])


if __name__ == "__main__":
    main()
