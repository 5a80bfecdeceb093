# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Data page: what each app sent and received this period, per kind of link, a bar per app against the largest
(drawn with GTK's snapshot API), the total, the period's dates, budgets with what is left, and reset for those who
may; then each desktop app's part of the person's data (USAGE's user_apps)."""
from gi.repository import Adw, Gdk, Graphene, Gtk

from .text import plain_row, _, app_name, kind_name, size


class UsageBar(Gtk.Widget):
    """A bar: `fraction` of its width, in the accent colour, on a trough."""

    def __init__(self, fraction, label):
        super().__init__(hexpand=True, valign=Gtk.Align.CENTER, accessible_role=Gtk.AccessibleRole.PROGRESS_BAR)
        self.fraction = max(0.0, min(1.0, fraction))
        self.set_size_request(60, 8)
        self.update_property([Gtk.AccessibleProperty.LABEL, Gtk.AccessibleProperty.VALUE_MIN,
                              Gtk.AccessibleProperty.VALUE_MAX, Gtk.AccessibleProperty.VALUE_NOW,
                              Gtk.AccessibleProperty.VALUE_TEXT],
                             [label, 0.0, 100.0, self.fraction * 100, label])

    def do_snapshot(self, snapshot):
        w, h = self.get_width(), self.get_height()
        trough, fill = Gdk.RGBA(), Gdk.RGBA()
        trough.parse("rgba(128,128,128,0.25)")
        fill.parse("#3584e4")
        snapshot.append_color(trough, Graphene.Rect().init(0, 0, w, h))
        if self.fraction > 0:
            snapshot.append_color(fill, Graphene.Rect().init(0, 0, max(2.0, w * self.fraction), h))


def totals(app):
    cur = app.get("current", {})
    return cur.get("sent_bytes", 0), cur.get("received_bytes", 0)


class DataPage(Adw.PreferencesPage):
    def __init__(self, window):
        super().__init__(title=_("Data"), icon_name="network-transmit-receive-symbolic")
        self.window = window
        self.summary = Adw.PreferencesGroup(title=_("This period"))
        self.add(self.summary)
        self.total = plain_row(_("Total"))
        self.summary.add(self.total)
        self.reset = Gtk.Button(label=_("Reset"), valign=Gtk.Align.CENTER)
        self.reset.update_property([Gtk.AccessibleProperty.LABEL], [_("Reset every app's data")])
        self.reset.connect("clicked", lambda _b: self.window.client.request("RESET-USAGE", lambda _r: self.window.refresh()))
        self.total.add_suffix(self.reset)
        self.group = None
        self.own = None
        self.rows = []

    def show(self, usage, privileged, names):
        if self.group is not None:
            self.remove(self.group)
        if self.own is not None:
            self.remove(self.own)
            self.own = None
        self.group = Adw.PreferencesGroup(title=_("Data used by each app"))
        self.add(self.group)
        period = usage.get("period") or {}
        counting = usage.get("counting", False)
        self.summary.set_description(
            _("From {start} to {end}").format(start=period.get("start", "?"), end=period.get("end", "?"))
            if counting else _("Data is not counted: [Usage] Count=no"))
        self.reset.set_visible(privileged)
        apps = usage.get("apps", [])
        sent = sum(totals(a)[0] for a in apps)
        received = sum(totals(a)[1] for a in apps)
        self.total.set_subtitle(_("{sent} sent, {received} received").format(sent=size(sent), received=size(received)))
        largest = max([sum(totals(a)) for a in apps] + [1])
        for a in sorted(apps, key=lambda a: -sum(totals(a))):
            s, r = totals(a)
            name = app_name(a) or names.get(a["app"]) or a["app"]
            row = plain_row(name)
            kinds = "\n".join(_("{kind}: {sent} sent, {received} received").format(
                kind=kind_name(k["kind"], k.get("metered"), k.get("roaming")), sent=size(k.get("sent_bytes", 0)),
                received=size(k.get("received_bytes", 0))) for k in a.get("current", {}).get("kinds", []))
            line = _("{sent} sent, {received} received").format(sent=size(s), received=size(r))
            budget = a.get("budget")
            if budget:
                left = max(0, budget.get("limit", 0) - budget.get("used", 0))
                line += " · " + _("budget {limit}, {left} left").format(limit=size(budget.get("limit")), left=size(left))
            row.set_subtitle(line + (f"\n{kinds}" if kinds else ""))
            bar = UsageBar((s + r) / largest, _("{app}: {line}").format(app=name, line=line))
            bar.set_size_request(120, 8)
            row.add_suffix(bar)
            self.group.add(row)
        if not apps:
            self.group.add(plain_row(_("No data used this period")))
        self.show_own(usage.get("user_apps", []), privileged, names)

    def show_own(self, users, privileged, names):
        """Each desktop app's part (USAGE's user_apps): what it used of its user's data, already in the totals above
        (their uid's app, or other processes'), so never added to them."""
        if self.own is not None:
            self.remove(self.own)
            self.own = None
        users = [u for u in users if sum(totals(u))]
        if not users:
            return
        self.own = Adw.PreferencesGroup(title=_("Data used by your desktop apps"),
                                        description=_("Part of the data above, by the app that used it"))
        self.add(self.own)
        largest = max([sum(totals(u)) for u in users] + [1])
        for u in sorted(users, key=lambda u: -sum(totals(u))):
            s, r = totals(u)
            name = app_name(u) or names.get(u["app"]) or u["app"]
            if privileged:
                name = _("{app} (uid {uid})").format(app=name, uid=u.get("uid"))
            line = _("{sent} sent, {received} received").format(sent=size(s), received=size(r))
            row = plain_row(name)
            row.set_subtitle(line)
            bar = UsageBar((s + r) / largest, _("{app}: {line}").format(app=name, line=line))
            bar.set_size_request(120, 8)
            row.add_suffix(bar)
            self.own.add(row)
