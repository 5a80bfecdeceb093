# SPDX-License-Identifier: LGPL-2.1-or-later
"""The App Activity page (the daemon's privacy report, docs/PRIVACY.md): the apps by activity, each with the places
it reached (the name it resolved, or the address), the kind of link, when and how often, and what was refused; the
most contacted places across apps; a switch for the person's own record. What the page shows is computed here from
REPORT's answer; the rows are made again only when the report changed, a few apps per main-loop iteration."""
import os

from gi.repository import Adw, GLib, Gtk

from .text import _, kind_name, plain_row, size, when

UI = os.path.join(os.path.dirname(__file__), "ui")
# An app's places shown at once; the rest behind "N more".
SHOWN = 8
# The most contacted places across apps.
TOP = 10
# Apps whose rows are made in one main-loop iteration.
STEP = 6

REFUSALS = {"denied": lambda: _("not allowed"), "ask": lambda: _("waiting for your answer"),
            "budget": lambda: _("its data budget was used up")}


def refusals(d):
    """A destination's refusals by reason ({reason: count}), from `refused` as REPORT has it (an object of counts),
    or a list of refusals each with its `reason`; missing: none."""
    r = d.get("refused")
    if isinstance(r, dict):
        return {k: v for k, v in r.items() if isinstance(v, int) and v > 0}
    if isinstance(r, list):
        out = {}
        for x in r:
            reason = x.get("reason") if isinstance(x, dict) else x
            if isinstance(reason, str):
                out[reason] = out.get(reason, 0) + 1
        return out
    return {}


def refused_total(d):
    return sum(refusals(d).values())


def connections(d):
    n = d.get("connections")
    return n if isinstance(n, int) else 0


def activity(app):
    """How active an app was: its connections and refusals, then its last time."""
    ds = app.get("destinations") or []
    return (sum(connections(d) + refused_total(d) for d in ds), max((d.get("last") or 0 for d in ds), default=0))


def by_activity(report):
    """The report's apps with any destination, the most active first."""
    apps = [a for a in report.get("apps") or [] if isinstance(a, dict) and a.get("destinations")]
    return sorted(apps, key=lambda a: (-activity(a)[0], -activity(a)[1], str(a.get("app"))))


def _extreme(pick, a, b):
    """min or max of two times, either of which may be missing."""
    known = [t for t in (a, b) if isinstance(t, (int, float))]
    return pick(known) if known else None


def places(app):
    """An app's destinations merged by place (host), the most contacted first: one line per host whatever the links."""
    merged = {}
    for d in app.get("destinations") or []:
        host = str(d.get("host") or d.get("address") or "?")
        m = merged.setdefault(host, {"host": host, "connections": 0, "refused": {}, "kinds": [], "bytes": 0,
                                     "first": d.get("first"), "last": d.get("last")})
        m["connections"] += connections(d)
        for reason, n in refusals(d).items():
            m["refused"][reason] = m["refused"].get(reason, 0) + n
        kind = (d.get("kind"), bool(d.get("metered")), bool(d.get("roaming")))
        if kind not in m["kinds"]:
            m["kinds"].append(kind)
        m["bytes"] += d.get("bytes") if isinstance(d.get("bytes"), int) else 0
        m["first"] = _extreme(min, m["first"], d.get("first"))
        m["last"] = _extreme(max, m["last"], d.get("last"))
    return sorted(merged.values(), key=lambda m: (-(m["connections"] + sum(m["refused"].values())), m["host"]))


def most_contacted(report, names, n=TOP):
    """The places most contacted across apps: [(host, connections, [app names])]."""
    hosts = {}
    for a in report.get("apps") or []:
        for p in places(a):
            h = hosts.setdefault(p["host"], [0, []])
            h[0] += p["connections"] + sum(p["refused"].values())
            name = names(a.get("app"))
            if name not in h[1]:
                h[1].append(name)
    ordered = sorted(hosts.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return [(host, count, apps) for host, (count, apps) in ordered[:n] if count > 0]


def place_line(p):
    """What a place's row says under its name: the links, how often and how much, when; then refusals."""
    kinds = _(", ").join(kind_name(k, m, r) for k, m, r in p["kinds"] if k) or kind_name(None)
    parts = [kinds, _("{n} connections").format(n=p["connections"]) if p["connections"] != 1 else _("1 connection")]
    if p["bytes"]:
        parts.append(size(p["bytes"]))
    text = " · ".join(parts)
    if p["last"]:
        text += "\n" + (_("Last {time}").format(time=when(p["last"])) if p["first"] in (None, p["last"])
                        else _("Last {time}, first {first}").format(time=when(p["last"]), first=when(p["first"])))
    if p["refused"]:
        text += "\n" + refused_line(p["refused"])
    return text


def refused_line(refused):
    reasons = _(", ").join(REFUSALS.get(k, lambda: k)() for k in sorted(refused))
    n = sum(refused.values())
    return (_("Refused once: {reasons}") if n == 1 else _("Refused {n} times: {reasons}")).format(n=n, reasons=reasons)


def place_row(p):
    """A place's row; a refused one is marked with an icon, and says so to a screen reader."""
    row = plain_row(p["host"], place_line(p))
    row.set_subtitle_lines(4)
    if p["refused"]:
        icon = Gtk.Image.new_from_icon_name("action-unavailable-symbolic")
        icon.update_property([Gtk.AccessibleProperty.LABEL], [_("Refused")])
        icon.add_css_class("error")
        row.add_suffix(icon)
    return row


def app_summary(app):
    ps = places(app)
    refused = sum(sum(p["refused"].values()) for p in ps)
    text = _("{n} places").format(n=len(ps)) if len(ps) != 1 else _("1 place")
    if refused:
        text += " · " + (_("refused once") if refused == 1 else _("refused {n} times").format(n=refused))
    return text


def app_rows(app, shown=SHOWN):
    """An app's place rows: the first `shown`, then the rest behind an expander."""
    ps = places(app)
    rows = [place_row(p) for p in ps[:shown]]
    if len(ps) > shown:
        more = Adw.ExpanderRow(title=_("{n} more").format(n=len(ps) - shown))
        for p in ps[shown:]:
            more.add_row(place_row(p))
        rows.append(more)
    return rows


@Gtk.Template(filename=os.path.join(UI, "activity-page.ui"))
class ActivityPage(Adw.Bin):
    __gtype_name__ = "NetpermActivityPage"
    stack = Gtk.Template.Child()
    page = Gtk.Template.Child()
    keep_group = Gtk.Template.Child()
    keep_row = Gtk.Template.Child()
    keep = Gtk.Template.Child()
    top_group = Gtk.Template.Child()
    nothing = Gtk.Template.Child()

    def __init__(self):
        super().__init__()
        self.shown = None          # the report last shown (the rows are made again only when it changes)
        self.groups = []           # the apps' groups and the top group's rows, to be removed at the next change
        self.pending = None
        self.on_keep = None        # on_keep(bool): set by the window
        self.setting = False
        self.keep.connect("notify::active", self._kept)
        self.stack.set_visible_child_name("empty")

    def show(self, report, names, privileged):
        """REPORT's answer (None: not read); `names(app_id)` the app's name in the person's language."""
        if report is None or report.get("ok") is False or report.get("enabled") is not True:
            # Off for the machine, or a daemon that keeps no report: nothing of an earlier answer stays.
            self._stop()
            self.shown = None
            self._clear()
            self.stack.set_visible_child_name("empty" if report is None else "off")
            return
        self.setting = True
        self.keep.set_active(report.get("yours") is True)
        self.setting = False
        # A person's own record is theirs to turn on; root's and an administrator's is the machine's.
        self.keep_row.set_visible(not privileged)
        apps = by_activity(report)
        self.top_group.set_description(GLib.markup_escape_text(
            _("Where your apps went in the last {days} days, kept on this computer").format(days=report.get("days") or 7)))
        key = repr(report.get("apps"))
        if key == self.shown:
            return
        self.shown = key
        self._stop()
        self._clear()
        for host, count, who in most_contacted(report, names):
            row = plain_row(host, _("{n} connections, by {apps}").format(n=count, apps=_(", ").join(who)))
            self.top_group.add(row)
            self.groups.append(row)
        self.nothing.set_visible(not apps)
        # An empty group draws an empty frame.
        self.keep_group.set_visible(self.keep_row.get_visible() or not apps)
        self.stack.set_visible_child_name("list")
        # The first apps at once (no frame shows the page without them), the rest a few per iteration.
        self._add_apps(apps, 0, names)

    def _add_apps(self, apps, start, names):
        for a in apps[start:start + STEP]:
            # A group's title and description are markup: an app's name is text.
            g = Adw.PreferencesGroup(title=GLib.markup_escape_text(names(a.get("app"))),
                                     description=GLib.markup_escape_text(app_summary(a)))
            for row in app_rows(a):
                g.add(row)
            self.page.add(g)
            self.groups.append(g)
        if start + STEP < len(apps):
            self.pending = GLib.idle_add(self._add_apps, apps, start + STEP, names)
        else:
            self.pending = None
        return False

    def _clear(self):
        for g in self.groups:
            if isinstance(g, Adw.PreferencesGroup):
                self.page.remove(g)
            else:
                self.top_group.remove(g)
        self.groups = []

    def _stop(self):
        if self.pending is not None:
            GLib.source_remove(self.pending)
            self.pending = None

    def _kept(self, *_a):
        if not self.setting and self.on_keep is not None:
            self.on_keep(self.keep.get_active())
