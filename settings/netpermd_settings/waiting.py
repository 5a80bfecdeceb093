# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Waiting page: the open prompts the person may answer, answered here as in a notification."""
from gi.repository import Adw, Gtk

from .text import plain_row, _, app_name, kind_name


class WaitingPage(Adw.PreferencesPage):
    def __init__(self, window):
        super().__init__(title=_("Waiting"), icon_name="dialog-question-symbolic")
        self.window = window
        self.group = None
        self.show([])

    def show(self, prompts):
        if self.group is not None:
            self.remove(self.group)
        self.group = Adw.PreferencesGroup(title=_("Waiting for your answer"))
        self.add(self.group)
        for p in prompts:
            name = app_name(p) or p.get("app")
            kinds = _(" and ").join(kind_name(k) for k in p.get("kinds", []))
            row = plain_row(_("Allow “{app}” to use {kinds}?").format(app=name, kinds=kinds.lower()),
                                subtitle=_("via {link}").format(link=(p.get("link") or {}).get("name", "?")))
            row.set_title_lines(2)
            box = Gtk.Box(spacing=6, valign=Gtk.Align.CENTER)
            for c in p.get("choices", []):
                b = Gtk.Button(label=c["label"])
                b.update_property([Gtk.AccessibleProperty.LABEL], [_("{choice} for {app}").format(choice=c["label"], app=name)])
                b.connect("clicked", self._answer, p["id"], c["choice"])
                box.append(b)
            row.add_suffix(box)
            self.group.add(row)
        if not prompts:
            self.group.add(plain_row(_("No app is waiting")))

    def _answer(self, _button, prompt, choice):
        def answered(reply):
            if reply.get("ok") is False:
                self.window.toast(reply.get("message", _("Not answered")))
            self.window.refresh()
        self.window.client.request(f"ANSWER {prompt} {choice}", answered)
