# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Waiting page: the open prompts the person may answer, answered here as in a notification. Prompts come and go
by events (a few at a time): a row each, made when one opens, removed when it closes."""
import os

from gi.repository import Adw, Gtk

from .text import _, app_name, plain_row

# A kind as a question names it ("Allow “Maps” to use cellular data?", iOS's words).
ASKED = {"wifi": lambda: _("Wi-Fi"), "wwan": lambda: _("cellular data"), "ethernet": lambda: _("wired networks"),
         "other": lambda: _("other networks"), "metered": lambda: _("metered networks"),
         "roaming": lambda: _("data while roaming")}

UI = os.path.join(os.path.dirname(__file__), "ui")
# The choices' words here, not the daemon's English labels.
def choice_label(choice, kinds):
    if choice == "allow":
        return _("Allow")
    if choice == "once":
        return _("Allow once")
    # Denying cellular leaves Wi-Fi: the iOS words; any other kind denied is just that.
    return _("Wi-Fi only") if "wwan" in kinds and "wifi" not in kinds else _("Don't allow")


def question(p):
    name = app_name(p) or p.get("app")
    kinds = _(" and ").join(ASKED.get(k, lambda: k)() for k in p.get("kinds", []))
    return _("Allow “{app}” to use {kinds}?").format(app=name, kinds=kinds), name


@Gtk.Template(filename=os.path.join(UI, "waiting-page.ui"))
class WaitingPage(Adw.Bin):
    __gtype_name__ = "NetpermWaitingPage"
    stack = Gtk.Template.Child()
    group = Gtk.Template.Child()

    def __init__(self):
        super().__init__()
        self.rows = {}
        self.on_answer = None      # on_answer(id, choice): set by the window
        self.on_count = None       # on_count(n): the switcher's badge
        self.stack.set_visible_child_name("empty")

    def replace(self, prompts):
        for pid in list(self.rows):
            self.close(pid)
        for p in prompts:
            self.add(p)

    def add(self, p):
        if p["id"] in self.rows:
            return
        title, name = question(p)
        row = plain_row(title, subtitle=None)
        row.set_title_lines(3)
        box = Gtk.Box(spacing=6, valign=Gtk.Align.CENTER)
        for c in p.get("choices", []):
            label = choice_label(c.get("choice"), p.get("kinds", []))
            b = Gtk.Button(label=label)
            b.update_property([Gtk.AccessibleProperty.LABEL], [_("{choice} for {app}").format(choice=label, app=name)])
            b.connect("clicked", lambda _b, pid=p["id"], ch=c["choice"]: self.on_answer(pid, ch))
            box.append(b)
        row.add_suffix(box)
        self.group.add(row)
        self.rows[p["id"]] = row
        self._changed()

    def close(self, pid):
        row = self.rows.pop(pid, None)
        if row is not None:
            self.group.remove(row)
            self._changed()

    def _changed(self):
        self.stack.set_visible_child_name("list" if self.rows else "empty")
        if self.on_count is not None:
            self.on_count(len(self.rows))
