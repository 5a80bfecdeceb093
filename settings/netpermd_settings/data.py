# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Data page: the period and its total, then what each app sent and received this period with a bar against the
largest, budgets with what is left. Its rows are a Gtk.ListView over `UsageItem`s changed in place: a new reading
changes the texts that changed, it never rebuilds the page."""
import os

from gi.repository import Gio, GObject, Gtk

from .text import _, app_name, day, kind_name, size

UI = os.path.join(os.path.dirname(__file__), "ui")


def totals(app):
    cur = app.get("current") or {}
    return cur.get("sent_bytes", 0), cur.get("received_bytes", 0)


class UsageItem(GObject.Object):
    __gtype_name__ = "NetpermUsageItem"
    title = GObject.Property(type=str, default="")
    line = GObject.Property(type=str, default="")
    fraction = GObject.Property(type=float, default=0.0)

    def set(self, **values):
        for k, v in values.items():
            if self.get_property(k) != v:
                self.set_property(k, v)


def describe(a):
    s, r = totals(a)
    line = _("{sent} sent, {received} received").format(sent=size(s), received=size(r))
    budget = a.get("budget")
    if budget:
        left = max(0, budget.get("limit", 0) - budget.get("used", 0))
        line += " · " + _("{left} of its {limit} left").format(left=size(left), limit=size(budget.get("limit")))
    kinds = [_("{kind}: {total}").format(kind=kind_name(k.get("kind"), k.get("metered"), k.get("roaming")),
                                         total=size(k.get("sent_bytes", 0) + k.get("received_bytes", 0)))
             for k in (a.get("current") or {}).get("kinds", [])]
    return line + ("\n" + " · ".join(kinds) if kinds else "")


@Gtk.Template(filename=os.path.join(UI, "data-row.ui"))
class DataRow(Gtk.Box):
    __gtype_name__ = "NetpermDataRow"
    name = Gtk.Template.Child()
    line = Gtk.Template.Child()
    bar = Gtk.Template.Child()

    def bind(self, item):
        self.bindings = [item.bind_property("title", self.name, "label", 2),
                         item.bind_property("line", self.line, "label", 2),
                         item.bind_property("fraction", self.bar, "value", 2)]
        self.item = item
        self.handler = item.connect("notify::line", lambda *_a: self._label())
        self._label()

    def _label(self):
        self.bar.update_property([Gtk.AccessibleProperty.LABEL], [f"{self.item.title}: {self.item.line}"])

    def unbind(self):
        for b in self.bindings:
            b.unbind()
        self.item.disconnect(self.handler)


@Gtk.Template(filename=os.path.join(UI, "data-page.ui"))
class DataPage(Gtk.Box):
    __gtype_name__ = "NetpermDataPage"
    summary = Gtk.Template.Child()
    total = Gtk.Template.Child()
    reset = Gtk.Template.Child()
    stack = Gtk.Template.Child()
    list = Gtk.Template.Child()

    def __init__(self):
        super().__init__()
        self.store = Gio.ListStore(item_type=UsageItem)
        self.items = {}
        f = Gtk.SignalListItemFactory()
        f.connect("setup", lambda _f, li: li.set_child(DataRow()))
        f.connect("bind", lambda _f, li: li.get_child().bind(li.get_item()))
        f.connect("unbind", lambda _f, li: li.get_child().unbind())
        self.list.set_factory(f)
        self.list.set_model(Gtk.NoSelection(model=self.store))
        self.reset.update_property([Gtk.AccessibleProperty.LABEL], [_("Reset every app's data")])
        self.list.update_property([Gtk.AccessibleProperty.LABEL], [_("Data used by each app")])

    def show(self, usage, privileged, names):
        period = usage.get("period") or {}
        counting = usage.get("counting", False)
        self.summary.set_description(
            _("From {start} to {end}").format(start=day(period.get("start")), end=day(period.get("end"), before=True))
            if counting else _("Data is not counted"))
        self.reset.set_visible(privileged)
        apps = usage.get("apps", [])
        sent = sum(totals(a)[0] for a in apps)
        received = sum(totals(a)[1] for a in apps)
        self.total.set_subtitle(_("{sent} sent, {received} received").format(sent=size(sent), received=size(received)))
        largest = max([sum(totals(a)) for a in apps] + [1])
        ordered = sorted(apps, key=lambda a: -sum(totals(a)))
        keep = []
        for a in ordered:
            item = self.items.get(a.get("app")) or UsageItem()
            item.set(title=app_name(a) or names.get(a.get("app")) or a.get("app", "?"), line=describe(a),
                     fraction=sum(totals(a)) / largest)
            keep.append(item)
        # Each desktop app's part of its user's data (USAGE's user_apps, docs/USAGE.md): already in the total, shown
        # apart so that the person sees what each app used.
        own = sorted((u for u in usage.get("user_apps", []) if sum(totals(u))), key=lambda u: -sum(totals(u)))
        for u in own:
            key = ("user", u.get("uid"), u.get("app"))
            item = self.items.get(key) or UsageItem()
            item.set(title=app_name(u) or names.get(u.get("app")) or u.get("app", "?"),
                     line=describe(u) + "\n" + _("Part of the total above"), fraction=sum(totals(u)) / largest)
            keep.append(item)
        old = [self.store.get_item(i) for i in range(self.store.get_n_items())]
        if old != keep:
            self.store.splice(0, len(old), keep)
        self.items = {a.get("app"): i for a, i in zip(ordered, keep)}
        self.items.update({("user", u.get("uid"), u.get("app")): i for u, i in zip(own, keep[len(ordered):])})
        self.stack.set_visible_child_name("list" if apps else "empty")
