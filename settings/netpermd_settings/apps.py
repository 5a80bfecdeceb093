# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Apps page: every app the person may decide for, its name and icon, the three-way choice for cellular and the
switches for metered networks and roaming, what the policy fixes, and why it cannot connect now. A change is a DECIDE (a user's
own, for their uid) and shows when the daemon's answer comes."""
from gi.repository import Adw, Gtk, Pango

from .text import plain_row, CHOICES, _, app_name, choice_of, fixed, kind_name, why


def app_icon(verdict):
    icon = verdict.get("icon")
    if icon and icon.startswith("/"):
        image = Gtk.Image.new_from_file(icon)
    else:
        image = Gtk.Image.new_from_icon_name(icon or "application-x-executable")
    image.set_pixel_size(32)
    image.set_accessible_role(Gtk.AccessibleRole.PRESENTATION)
    return image


class AppRow(Adw.ExpanderRow):
    """One app: its choice, its metered and roaming switches, and what fixes them."""

    def __init__(self, page, verdict):
        super().__init__(use_markup=False)
        self.page = page
        self.app = verdict["app"]
        self.updating = False
        self.add_prefix(app_icon(verdict))
        # Open: the choice is one press away, for a pointer, a finger, a keyboard and a screen reader alike.
        self.set_expanded(True)
        # The three-way choice as linked toggle buttons, one group: the row's own control, operable by keyboard.
        self.checks = {}
        choice = Adw.PreferencesRow(activatable=False, focusable=False)
        box = Gtk.Box(homogeneous=True, margin_top=8, margin_bottom=8, margin_start=8, margin_end=8)
        box.add_css_class("linked")
        group = None
        for key, label, _kinds in CHOICES:
            # Labels that wrap: the three fit a phone's 360 px ("Wi-Fi & Cellular" on two lines there).
            text = Gtk.Label(label=label(), wrap=True, justify=Gtk.Justification.CENTER, width_chars=3)
            text.set_wrap_mode(Pango.WrapMode.WORD_CHAR)
            button = Gtk.ToggleButton(child=text)
            button.update_property([Gtk.AccessibleProperty.LABEL], [label()])
            button.update_property([Gtk.AccessibleProperty.DESCRIPTION], [_("Networks for {app}").format(app=self.app)])
            if group is not None:
                button.set_group(group)
            group = group or button
            button.connect("toggled", self._toggled, key)
            box.append(button)
            self.checks[key] = button
        choice.set_child(box)
        self.add_row(choice)
        self.metered_row = plain_row(_("Metered networks"),
                                         subtitle=_("Hotspots and connections marked metered"))
        self.metered = Gtk.Switch(valign=Gtk.Align.CENTER)
        self.metered.connect("notify::active", self._metered)
        self.metered_row.add_suffix(self.metered)
        self.metered_row.set_activatable_widget(self.metered)
        self.add_row(self.metered_row)
        # iOS has one "Data Roaming" for every app; here each app has its own (Roaming=).
        self.roaming_row = plain_row(_("Roaming"), subtitle=_("Cellular data abroad"))
        self.roaming = Gtk.Switch(valign=Gtk.Align.CENTER)
        self.roaming.connect("notify::active", self._roaming)
        self.roaming_row.add_suffix(self.roaming)
        self.roaming_row.set_activatable_widget(self.roaming)
        self.add_row(self.roaming_row)
        self.fixed_row = plain_row(_("Set by the policy"))
        self.add_row(self.fixed_row)
        self.update(verdict)

    def update(self, verdict):
        self.verdict = verdict
        self.updating = True
        self.set_title(app_name(verdict) or self.app)
        self.set_subtitle(why(verdict))
        chosen = choice_of(verdict)
        for key, _label, (wifi, wwan) in CHOICES:
            button = self.checks[key]
            button.set_active(key == chosen)
            # A choice the policy rules out cannot be made here.
            button.set_sensitive(all(not fixed(verdict, k) or verdict["permissions"][k] == want
                                     for k, want in (("wifi", wifi), ("wwan", wwan))))
        self.metered.set_active(verdict.get("permissions", {}).get("metered") == "allow")
        self.metered_row.set_sensitive(not fixed(verdict, "metered"))
        # A daemon from before roaming says nothing of it: allowed, as it was.
        self.roaming.set_active(verdict.get("permissions", {}).get("roaming", "allow") == "allow")
        self.roaming_row.set_sensitive("roaming" in verdict.get("permissions", {}) and not fixed(verdict, "roaming"))
        fixes = [k for k in ("wifi", "wwan", "ethernet", "other", "metered", "roaming")
                 if k in verdict.get("permissions", {}) and fixed(verdict, k)]
        self.fixed_row.set_subtitle(", ".join(
            _("{kind}: {permission}").format(kind=kind_name(k), permission=_("allowed") if verdict["permissions"][k] == "allow"
                                              else _("denied")) for k in fixes) or _("nothing"))
        self.updating = False

    def _toggled(self, check, key):
        if self.updating or not check.get_active():
            return
        wants = dict(zip(("wifi", "wwan"), next(k for c, _l, k in CHOICES if c == key)))
        self.page.decide(self, {k: v for k, v in wants.items()
                                if not fixed(self.verdict, k) and self.verdict["permissions"].get(k) != v})

    def _metered(self, switch, _param):
        if self.updating:
            return
        self.page.decide(self, {"metered": "allow" if switch.get_active() else "deny"})

    def _roaming(self, switch, _param):
        if self.updating:
            return
        self.page.decide(self, {"roaming": "allow" if switch.get_active() else "deny"})


class AppsPage(Adw.PreferencesPage):
    def __init__(self, window):
        super().__init__(title=_("Apps"), icon_name="applications-system-symbolic")
        self.window = window
        self.group = Adw.PreferencesGroup(title=_("Apps"),
                                          description=_("Which networks each app may use"))
        self.add(self.group)
        self.rows = {}
        self.empty = plain_row(_("No apps yet"))
        self.group.add(self.empty)

    def show(self, verdicts):
        seen = set()
        for v in verdicts:
            seen.add(v["app"])
            row = self.rows.get(v["app"])
            if row is None:
                row = self.rows[v["app"]] = AppRow(self, v)
                self.group.add(row)
            else:
                row.update(v)
        for app in list(self.rows):
            if app not in seen:
                self.group.remove(self.rows.pop(app))
        self.empty.set_visible(not self.rows)

    def decide(self, row, wants):
        if not wants:
            self.window.refresh()
            return
        pending = len(wants)

        def answered(reply):
            nonlocal pending
            pending -= 1
            if reply.get("ok") is False:
                self.window.toast(reply.get("message", _("The change was not made")))
            if pending == 0:
                self.window.refresh()
        for kind, decision in wants.items():
            self.window.client.request(f"DECIDE {row.app} {kind} {decision}", answered)
