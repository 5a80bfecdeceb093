# SPDX-License-Identifier: LGPL-2.1-or-later
"""The apps as the list shows them: one `AppItem` per app in a Gio.ListStore, changed in place as events come (the
rows bound to it follow by property notifications), replaced whole by a snapshot or a resync."""
import os

from gi.repository import Gio, GLib, GObject

from . import verdicts
from .steps import Steps
from .text import app_name, choice_word, size, why


FALLBACK_ICON = "application-x-executable"
_theme = None


def shown_icon(name):
    """The icon to draw: the app's when the theme has it or its path names a file, else the generic one (never
    GTK's broken-image icon)."""
    global _theme
    if name and name.startswith("/"):
        return Gio.FileIcon.new(Gio.File.new_for_path(name)) if os.path.isfile(name) else Gio.ThemedIcon.new(FALLBACK_ICON)
    if _theme is None:
        from gi.repository import Gdk, Gtk
        display = Gdk.Display.get_default()
        _theme = display and Gtk.IconTheme.get_for_display(display)
    return Gio.ThemedIcon.new(name if name and _theme and _theme.has_icon(name) else FALLBACK_ICON)


class AppItem(GObject.Object):
    """One app: what its row and its page show, kept as properties the rows bind to."""
    __gtype_name__ = "NetpermAppItem"

    app = GObject.Property(type=str, default="")
    title = GObject.Property(type=str, default="")
    icon = GObject.Property(type=str, default="")
    choice = GObject.Property(type=str, default="")
    why = GObject.Property(type=str, default="")
    data = GObject.Property(type=str, default="")
    # What the row binds to: the icon the theme has (else the generic one), and the Gio action's target.
    gicon = GObject.Property(type=Gio.Icon)
    target = GObject.Property(type=GObject.TYPE_VARIANT)
    action = GObject.Property(type=str, default="win.show-app")
    # Bumped at every change of the verdict: the page listens to it.
    version = GObject.Property(type=int, default=0)

    def __init__(self, verdict, privileged):
        super().__init__()
        self.verdict = {}
        self.key = ""
        self.usage = None
        # Its rank among the matches a search lets in or takes out in steps (apps.Search); one made while a search
        # widens waits for its end.
        self.rank = 1 << 30
        self.update(verdict, privileged)

    def update(self, verdict, privileged):
        # Events carry no names: those of the snapshot stay.
        for k in ("name", "names", "icon"):
            if k not in verdict and k in self.verdict:
                verdict[k] = self.verdict[k]
        self.verdict = verdict
        self.privileged = privileged
        if self.app != verdict["app"]:
            self.app = verdict["app"]
            self.target = GLib.Variant("s", self.app)
        title = app_name(verdict) or verdict["app"]
        if title != self.title:
            self.title = title
        self.key = (title + "\n" + verdict["app"]).casefold()
        icon = verdict.get("icon") or ""
        if icon != self.icon or self.gicon is None:
            self.icon = icon
            self.gicon = shown_icon(icon)
        self.choice_key = verdicts.choice_of(verdict, privileged)
        word = choice_word(self.choice_key)
        if word != self.choice:
            self.choice = word
        reason = why(verdict)
        if reason != self.why:
            self.why = reason
        self.version += 1

    def set_usage(self, usage):
        cur = (usage or {}).get("current") or {}
        text = size(cur.get("sent_bytes", 0) + cur.get("received_bytes", 0)) if usage else ""
        self.usage = usage
        if text != self.data:
            self.data = text


class AppList:
    """The store, and each app's item by id."""

    # Items into the store at a time while GTK makes their rows (one row is about 0.2 ms of CPU), until `FULL` are
    # in: GTK 4.8's list view makes rows for up to 200 items, past them new items make no rows until scrolled to.
    ROWS = 20
    FULL = 240

    def __init__(self, clock=None):
        """`clock()`: the window's Gdk.FrameClock, whose frames the steps that change rows wait for."""
        self.store = Gio.ListStore(item_type=AppItem)
        self.items = {}
        self.newer = {}
        self.making = {}
        self.work = Steps(clock)
        self.usage = Steps(clock)
        self.by_app = {}

    @property
    def pending(self):
        return self.work.running

    def replace(self, verdict_list, privileged, done=None):
        """A snapshot or a resync: the whole list, sorted by name; items of apps still listed are kept (a page open
        on one stays on it). Made and put into the store in steps (steps.Steps: 1,000 apps at once held the loop for
        40 ms and more, 200 rows made at once 100 ms); `done()` once all are in."""
        ordered = sorted(verdict_list, key=lambda v: ((app_name(v) or v["app"]).casefold(), v["app"]))
        self.newer = {}
        self.work.start(self._replace(ordered, privileged), lambda: done and done())

    def _replace(self, ordered, privileged):
        made = self.making = {}
        for v in ordered:
            # An event that came while the list was being made is newer than the snapshot.
            v = self.newer.pop(v["app"], v)
            item = self.items.get(v["app"])
            if item is None:
                item = AppItem(v, privileged)
            else:
                item.update(v, privileged)
            made[v["app"]] = item
            yield
        items = [made[v["app"]] for v in ordered]
        old = [self.store.get_item(i) for i in range(self.store.get_n_items())]
        self.items = made
        # Unchanged order (a resync of the same apps): the rows stay, their items changed in place.
        if old == items:
            return
        yield Steps.BREAK
        self.store.splice(0, len(old), items[:self.ROWS])
        start = self.ROWS
        while start < len(items):
            yield Steps.FRAME
            # Past the rows GTK makes at once, the rest in one go (no rows: 1 ms for 760 items).
            end = len(items) if start >= self.FULL else start + self.ROWS
            self.store.splice(start, 0, items[start:end])
            start = end

    def update(self, verdict, privileged):
        if self.pending:
            self.newer[verdict["app"]] = verdict
        # While a list is being made, its item if already made (else the snapshot's verdict waits in `newer`).
        item = self.making.get(verdict["app"]) or self.items.get(verdict["app"])
        if item is not None:
            item.update(verdict, privileged)
        return item

    def set_usage(self, usage_apps, done=None):
        """USAGE's answer into the items, in the list's order and in steps: each changed row is laid out again (200
        rows changed at once made a frame of 30 ms)."""
        self.by_app = {a.get("app"): a for a in usage_apps}
        items = [self.store.get_item(i) for i in range(self.store.get_n_items())]
        listed = set(items)
        items += [i for i in self.items.values() if i not in listed]
        self.usage.start(self._set_usage(items), done)

    def _set_usage(self, items):
        for n, item in enumerate(items, 1):
            # Looked up at its turn: a `counted` event may have come since the answer.
            item.set_usage(self.by_app.get(item.app))
            yield Steps.FRAME if n % self.ROWS == 0 and n <= self.FULL else None

    def counted(self, entry):
        """A `counted` event's app: its totals now, whatever USAGE answer is still going in."""
        self.by_app[entry.get("app")] = entry
        item = self.items.get(entry.get("app"))
        if item is not None:
            item.set_usage(entry)
