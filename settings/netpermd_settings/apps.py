# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Apps list and an app's page. The list is a Gtk.ListView over the apps' Gio.ListStore, filtered by the search
field: rows are made only as they scroll into view, and bound to their item's properties, so an event changes a
row in place. The page shows one app: the three choices, metered and roaming, why it cannot connect now, its
data, and the links behind it. A choice is a set of DECIDEs (`verdicts.decisions_for`) through the window; with "For
everyone" checked, for everyone (`verdicts.decisions_for_everyone`), which polkit allows or not."""
import os

from gi.repository import Gio, GLib, Gtk, Pango

from . import activity, verdicts
from .text import _, choice_word, day, details, size

UI = os.path.join(os.path.dirname(__file__), "ui")


def list_factory():
    """Rows made and bound by GTK from app-row.ui, as they scroll into view."""
    with open(os.path.join(UI, "app-row.ui"), "rb") as f:
        return Gtk.BuilderListItemFactory.new_from_bytes(None, GLib.Bytes.new(f.read()))


class Search:
    """The search field over the list: a filter whose match is a casefolded substring of the name or the id.
    GTK 4.8's list view makes or drops the rows of up to 200 items in one go (about 0.1 ms of CPU each: clearing a
    search of 1,000 apps held the loop for 60-95 ms, narrowing it to one app 22-34 ms), so both go in steps, one per
    main loop iteration, by each item's rank among the matches: narrowing drops first the items past the rows GTK
    made (no rows, one step), then the rows `NARROW` at a time from the last; widening lets the new matches in `STEP`
    at a time, the rest at once when past the rows or all in."""

    STEP = 25
    NARROW = 60
    ROWS = 240

    def __init__(self, entry, store):
        self.text = ""
        self.before = None      # while widening: the narrower text whose matches stay in
        self.limit = None       # while widening: the matches (by rank) let in so far
        self.wider = None       # while narrowing: the wider text whose matches below `cut` stay in
        self.cut = None
        self.matches = 0
        self.different = False
        self.store = store
        self.pending = None
        self.filter = Gtk.CustomFilter.new(self._match)
        self.model = Gtk.FilterListModel(model=store, filter=self.filter)
        entry.connect("search-changed", self._changed)

    def _match(self, item):
        if self.text and self.text not in item.key:
            return self.cut is not None and item.rank < self.cut and self.wider in item.key
        if self.limit is None:
            return True
        return item.rank < self.limit or (self.before is not None and self.before in item.key)

    def _changed(self, entry):
        text = entry.get_text().casefold().strip()
        if text == self.text:
            return
        if self.pending is not None:
            GLib.source_remove(self.pending)
            self.pending = None
        narrower = text.startswith(self.text) and self.limit is None
        if narrower:
            self._narrow(text)
            return
        # Widened while narrowing: what the narrowing still showed goes at the first step (its last rows at once).
        self.different = self.cut is not None
        self.cut = self.wider = None
        self.before = self.text if self.text.startswith(text) else None
        self.text = text
        # Each match's rank, in the list's order: what the steps let in (1,000 apps: 1-2 ms).
        rank = 0
        for i in range(self.store.get_n_items()):
            item = self.store.get_item(i)
            if text in item.key:
                item.rank = rank
                rank += 1
        self.limit, self.matches = 0, rank
        self._widen()

    def _narrow(self, text):
        if self.cut is None:
            # Each shown item's rank: the rows are the first ones.
            for i in range(self.model.get_n_items()):
                self.model.get_item(i).rank = i
            self.wider, self.cut = self.text, self.ROWS + self.NARROW
        self.text = text
        self._narrower()

    def _narrower(self):
        self.cut -= self.NARROW
        if self.cut <= 0:
            self.cut = self.wider = self.pending = None
        else:
            self.pending = GLib.idle_add(self._narrower)
        self.filter.changed(Gtk.FilterChange.MORE_STRICT)
        return False

    def _widen(self):
        self.limit += self.STEP
        # The first step takes out what no longer matches, unless the last text's matches all stay.
        first = self.limit == self.STEP and (self.before is None or self.different)
        change = Gtk.FilterChange.DIFFERENT if first else Gtk.FilterChange.LESS_STRICT
        # Once past the rows GTK makes, or all in (each step filters every app again: 6-7 ms of CPU for 1,000).
        if self.limit >= min(self.ROWS, self.matches):
            self.limit = self.before = self.pending = None
        else:
            self.pending = GLib.idle_add(self._widen)
        self.filter.changed(change)
        return False


@Gtk.Template(filename=os.path.join(UI, "app-page.ui"))
class AppPage(Gtk.Box):
    """One app's page; `show(item)` follows that item until another is shown."""
    __gtype_name__ = "NetpermAppPage"
    back = Gtk.Template.Child()
    icon = Gtk.Template.Child()
    title = Gtk.Template.Child()
    choice_box = Gtk.Template.Child()
    choice_note = Gtk.Template.Child()
    everyone = Gtk.Template.Child()
    metered_row = Gtk.Template.Child()
    roaming_row = Gtk.Template.Child()
    why_row = Gtk.Template.Child()
    data_row = Gtk.Template.Child()
    details_row = Gtk.Template.Child()
    activity_group = Gtk.Template.Child()
    activity_none = Gtk.Template.Child()

    def __init__(self):
        super().__init__()
        self.item = None
        self.report = None
        self.activity_shown = None
        self.activity_rows = []
        self.handler = None
        self.on_decide = None     # on_decide(app, {kind: allow?}, everyone): set by the window
        self.actions = Gio.SimpleActionGroup()
        self.choice_action = Gio.SimpleAction.new_stateful("choice", GLib.VariantType.new("s"), GLib.Variant("s", ""))
        self.choice_action.connect("activate", self._choose)
        self.actions.add_action(self.choice_action)
        self.switches = {}
        for kind in ("metered", "roaming"):
            a = Gio.SimpleAction.new_stateful(kind, None, GLib.Variant("b", False))
            a.connect("activate", self._switch, kind)
            self.actions.add_action(a)
            self.switches[kind] = a
        self.for_everyone = Gio.SimpleAction.new_stateful("everyone", None, GLib.Variant("b", False))
        self.for_everyone.connect("activate", self._everyone)
        self.actions.add_action(self.for_everyone)
        self.insert_action_group("page", self.actions)
        self.buttons = {}
        for key in verdicts.CHOICE_ORDER:
            text = Gtk.Label(label=choice_word(key), wrap=True, justify=Gtk.Justification.CENTER, width_chars=3)
            text.set_wrap_mode(Pango.WrapMode.WORD_CHAR)
            button = Gtk.ToggleButton(child=text, action_name="page.choice", action_target=GLib.Variant("s", key))
            button.update_property([Gtk.AccessibleProperty.LABEL], [choice_word(key)])
            self.choice_box.append(button)
            self.buttons[key] = button

    def show(self, item):
        if self.item is not None and self.handler is not None:
            self.item.disconnect(self.handler)
        self.item = item
        self.handler = item.connect("notify::version", lambda *_a: self.refresh()) if item else None
        self.refresh()
        self.show_activity(self.report)

    # Places shown on an app's page; the rest are on the App Activity page.
    PLACES = 5

    def show_activity(self, report):
        """The app's part of REPORT's answer (None: not read): its most contacted places, refusals marked."""
        self.report = report
        on = bool(report) and report.get("ok") is not False and report.get("enabled") is True
        entries = [a for a in (report or {}).get("apps") or [] if isinstance(a, dict) and self.item is not None
                   and a.get("app") == self.item.app] if on else []
        # Every uid's entries of the app (root reads them all): one list of places.
        merged = {"app": self.item and self.item.app, "destinations": [d for a in entries for d in a.get("destinations") or []]}
        key = (on, repr(merged))
        if key == self.activity_shown:
            return
        self.activity_shown = key
        for row in self.activity_rows:
            self.activity_group.remove(row)
        self.activity_rows = activity.app_rows(merged, self.PLACES) if merged["destinations"] else []
        for row in self.activity_rows:
            self.activity_group.add(row)
        self.activity_none.set_title(_("No activity recorded yet") if on else _("App Activity is off"))
        self.activity_none.set_visible(not self.activity_rows)
        self.activity_group.set_description(GLib.markup_escape_text(activity.app_summary(merged))
                                            if self.activity_rows else None)

    def refresh(self):
        item = self.item
        if item is None:
            return
        v, privileged = item.verdict, item.privileged
        self.icon.set_from_gicon(item.gicon)
        self.title.set_label(item.title)
        # A privileged person's decisions are everyone's already; for another, "For everyone" changes what is theirs.
        self.everyone.set_visible(not privileged)
        everyone = self.for_everyone.get_state().get_boolean()
        key = verdicts.choice_of(v, True) if everyone else item.choice_key
        privileged = privileged or everyone
        # Set by an administrator: what it is shows pressed, and nothing can be pressed.
        self.choice_action.set_state(GLib.Variant("s", (verdicts.matching(v) or "") if key == "admin" else key))
        for k, button in self.buttons.items():
            button.set_sensitive(key != "admin" and verdicts.can_choose(v, k, privileged))
            button.update_property([Gtk.AccessibleProperty.DESCRIPTION],
                                   [_("Networks for {app}").format(app=item.title)])
        self.choice_note.set_label(self._note(key, v))
        self.choice_note.set_visible(bool(self.choice_note.get_label()))
        p = v.get("permissions", {})
        for kind, row in (("metered", self.metered_row), ("roaming", self.roaming_row)):
            self.switches[kind].set_state(GLib.Variant("b", p.get(kind, "allow") == "allow"))
            self.switches[kind].set_enabled(kind in p and not verdicts.fixed(v, kind, privileged))
        self.why_row.set_title(_("Connection") if v.get("available") else _("Why not now"))
        self.why_row.set_subtitle(item.why)
        self.data_row.set_subtitle(self._data(item))
        self.details_row.set_subtitle(details(v))

    @staticmethod
    def _note(key, v):
        if key == "admin":
            shown = verdicts.matching(v)
            return _("Set by your administrator: {choice}").format(choice=choice_word(shown)) if shown else \
                _("Set by your administrator")
        if key == "asks":
            return _("It asks you the first time it needs a network you have not decided")
        if key == "some":
            allowed = [k for k in verdicts.KINDS if v.get("permissions", {}).get(k) == "allow"]
            from .text import kinds_list
            return _("Allowed on {kinds}").format(kinds=kinds_list(allowed)) if allowed else ""
        return ""

    @staticmethod
    def _data(item):
        usage = getattr(item, "usage", None)
        if not usage:
            return _("Not counted for you")
        cur = usage.get("current") or {}
        text = _("{sent} sent, {received} received").format(sent=size(cur.get("sent_bytes", 0)),
                                                             received=size(cur.get("received_bytes", 0)))
        budget = usage.get("budget") or item.verdict.get("budget")
        if budget:
            left = max(0, budget.get("limit", 0) - budget.get("used", 0))
            text += "\n" + _("{left} of its {limit} left until {end}").format(
                left=size(left), limit=size(budget.get("limit")), end=day(budget.get("period_end"), before=True))
        return text

    def _choose(self, _action, target):
        if self.item is None or self.on_decide is None:
            return
        key = target.get_string()
        everyone = self.for_everyone.get_state().get_boolean() and not self.item.privileged
        wants = verdicts.decisions_for_everyone(self.item.verdict, key) if everyone else \
            verdicts.decisions_for(self.item.verdict, key, self.item.privileged)
        # The buttons show the verdict, not the press: back to it until the daemon's event says otherwise.
        self.refresh()
        if wants:
            self.on_decide(self.item.verdict["app"], wants, everyone)

    def _switch(self, action, _param, kind):
        if self.item is None or self.on_decide is None:
            return
        allow = not action.get_state().get_boolean()
        self.on_decide(self.item.verdict["app"], {kind: allow}, self.for_everyone.get_state().get_boolean())

    def _everyone(self, action, _param):
        action.set_state(GLib.Variant("b", not action.get_state().get_boolean()))
        self.refresh()
