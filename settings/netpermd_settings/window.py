# SPDX-License-Identifier: LGPL-2.1-or-later
"""The window: Apps (a list, then a page per app, in an Adw.Leaflet), Data and Waiting in a view stack whose switcher
moves to the bottom on a phone's width; a line that says what is wrong with the daemon, with a retry. It follows the
daemon by events alone (protocol.Daemon): a snapshot or resync replaces the list, an app event changes its row in
place, a `counted` event the moved apps' data; the Data page reads USAGE when shown and after events, never on a
timer."""
import ctypes
import os
import sys

from gi.repository import Adw, Gio, GLib, Gtk

from .activity import ActivityPage
from .apps import AppPage, Search, list_factory
from .data import DataPage
from .model import AppList
from .protocol import Daemon, Fault, Listener, socket_path
from .text import _
from .waiting import WaitingPage

APP_ID = "org.netpermd.Settings"
UI = os.path.join(os.path.dirname(__file__), "ui")
# Events in a burst make one USAGE reading.
USAGE_MS = 300
# Referenced so the template's types exist before it is built.
_TYPES = (AppPage, DataPage, WaitingPage, ActivityPage)


def fault_text(fault, detail):
    where = socket_path()
    text = {
        Fault.ABSENT: _("netpermd is not running ({socket}); waiting for it to start").format(socket=where),
        Fault.STOPPED: _("netpermd stopped; waiting for it to start again"),
        Fault.NOISE: _("netpermd answered with something that is not its protocol"),
        Fault.SHAPE: _("netpermd answered in a form this app does not know"),
        Fault.SILENT: _("netpermd does not answer"),
    }[fault]
    return text + (f" ({detail})" if detail and fault in (Fault.NOISE, Fault.SHAPE) else "")


@Gtk.Template(filename=os.path.join(UI, "window.ui"))
class Window(Adw.ApplicationWindow):
    __gtype_name__ = "NetpermSettingsWindow"
    switcher_title = Gtk.Template.Child()
    switcher_bar = Gtk.Template.Child()
    status_bar = Gtk.Template.Child()
    status = Gtk.Template.Child()
    toasts = Gtk.Template.Child()
    stack = Gtk.Template.Child()
    waiting_page = Gtk.Template.Child()
    leaflet = Gtk.Template.Child()
    list_pane = Gtk.Template.Child()
    search = Gtk.Template.Child()
    list_stack = Gtk.Template.Child()
    list = Gtk.Template.Child()
    app_page = Gtk.Template.Child()
    data = Gtk.Template.Child()
    activity = Gtk.Template.Child()
    waiting = Gtk.Template.Child()

    def __init__(self, app, screenshot=None, show_app=None, show_page=None):
        super().__init__(application=app)
        self.set_size_request(360, 480)
        self.screenshot, self.show_app, self.show_page = screenshot, show_app, show_page
        self.privileged = False
        self.usage_pending = None
        self.usage = None
        self.apps = AppList(self.get_frame_clock)
        self.filtered = Search(self.search, self.apps.store)
        self.filtered.model.connect("items-changed", lambda *_a: self._empty())
        self.list.set_factory(list_factory())
        self.list.set_model(Gtk.NoSelection(model=self.filtered.model))
        self.list.update_property([Gtk.AccessibleProperty.LABEL], [_("Apps")])
        self.switcher_title.bind_property("title-visible", self.switcher_bar, "reveal", 2)  # SYNC_CREATE
        self.app_page.on_decide = self.decide
        self.leaflet.bind_property("folded", self.app_page.back, "visible", 2)
        self.activity.on_keep = self.keep_report
        self.report = None
        self.report_pending = None
        self.waiting.on_answer = self.answer
        self.waiting.on_count = self._badge
        for name, callback in (("retry", lambda *_a: self.daemon.retry()), ("back", lambda *_a: self.back()),
                               ("reset-usage", lambda *_a: self.reset_usage())):
            action = Gio.SimpleAction.new(name, None)
            action.connect("activate", callback)
            self.add_action(action)
        show = Gio.SimpleAction.new("show-app", GLib.VariantType.new("s"))
        show.connect("activate", lambda _a, app: self.open(self.apps.items.get(app.get_string())))
        self.add_action(show)
        self.stack.connect("notify::visible-child", lambda *_a: self._page_shown())
        self.daemon = Daemon(Listener(self._state, self._snapshot, self._app, self.waiting.add, self.waiting.close,
                                      self._changed, counted=self._counted))
        self.daemon.start()

    # -- the daemon's word

    def _state(self, fault, detail):
        # Hidden, not only folded away: a folded revealer's line stays in the accessibility tree.
        if fault is None:
            self.status_bar.set_reveal_child(False)
            self.status_bar.set_visible(False)
            return
        self.status.set_label(fault_text(fault, detail))
        self.status_bar.set_visible(True)
        self.status_bar.set_reveal_child(True)

    def _snapshot(self, verdicts, prompts, privileged):
        self.privileged = privileged
        self.waiting.replace(prompts)
        self.apps.replace(verdicts, privileged, self._listed)

    def _listed(self):
        shown = self.app_page.item and self.apps.items.get(self.app_page.item.app)
        # Wide, the page beside the list shows the first app until another is chosen.
        self.app_page.show(shown or (self.apps.store.get_item(0) if self.apps.store.get_n_items() else None))
        self._empty()
        self._read_usage()
        if self.show_app and self.show_app in self.apps.items:
            self.open(self.apps.items[self.show_app])
        if self.show_page:
            self.stack.set_visible_child_name(self.show_page)

    def _app(self, verdict):
        self.apps.update(verdict, self.privileged)
        self._changed()

    def _changed(self):
        if self.usage_pending is None:
            self.usage_pending = GLib.timeout_add(USAGE_MS, self._read_usage)

    def _read_usage(self):
        self.usage_pending = None
        self.daemon.usage(self._usage)
        self._read_report()
        return False

    def _read_report(self):
        """REPORT, while a page that shows it is shown: App Activity, or the Apps page (an app's page has its part)."""
        if self.stack.get_visible_child() in (self.activity, self.leaflet):
            self.daemon.report(self._report)

    def _report(self, reply):
        if reply is None:
            return
        self.report = reply
        self.app_page.show_activity(reply)
        if self.stack.get_visible_child() is self.activity:
            self.activity.show(reply, self._name, self.privileged)
            self._shoot_when_filled()

    def _name(self, app):
        item = self.apps.items.get(app)
        return item.title if item is not None else app or "?"

    def keep_report(self, keep):
        def answered(reply):
            if reply is None or reply.get("ok") is False:
                self.toast(_("The change was not made"))
            self._read_report()
        self.daemon.keep_report(keep, answered)

    def _counted(self, apps, user_apps):
        """The daemon's `counted` event: the moved apps' totals, into what USAGE last said, each row changed in place
        (no USAGE asked: the event has what moved)."""
        if self.usage is None:
            self._changed()
            return
        for key, entries, ident in (("apps", apps, lambda a: a.get("app")),
                                    ("user_apps", user_apps, lambda a: (a.get("uid"), a.get("app")))):
            known = {ident(a): i for i, a in enumerate(self.usage.get(key) or [])}
            listed = self.usage.setdefault(key, [])
            for a in entries:
                if ident(a) in known:
                    listed[known[ident(a)]] = a
                else:
                    listed.append(a)
        for a in apps:
            self.apps.counted(a)
        if self.stack.get_visible_child() is self.data:
            self.data.show(self.usage, self.privileged, {a: i.title for a, i in self.apps.items.items()})
        self.app_page.refresh()
        # Bytes moved: connections may have too (the report has no events of its own, they would tell destinations).
        if self.report_pending is None:
            self.report_pending = GLib.timeout_add(USAGE_MS, self._report_due)

    def _report_due(self):
        self.report_pending = None
        self._read_report()
        return False

    def _usage(self, reply):
        if reply is not None and reply.get("ok") is not False:
            self.usage = reply
            # The Data page is made only while it is shown: 1,000 rows of it cost the Apps list its smoothness.
            if self.stack.get_visible_child() is self.data:
                self.data.show(reply, self.privileged, {a: i.title for a, i in self.apps.items.items()})
            self.apps.set_usage(reply.get("apps", []), self._usage_shown)
        else:
            self._usage_shown()

    def _usage_shown(self):
        if self.usage is not None:
            self.app_page.refresh()
        # The screenshot is of the pages filled: the apps listed, and their data (App Activity: its report).
        if self.show_page != "activity":
            self._shoot_when_filled()

    def _shoot_when_filled(self):
        if self.screenshot and self.apps.items:
            path, self.screenshot = self.screenshot, None
            GLib.timeout_add(300, self._shoot, path)

    # -- what the person does

    def open(self, item):
        if item is None:
            return
        self.app_page.show(item)
        self.leaflet.set_visible_child(self.app_page)
        self._read_report()

    def back(self):
        self.leaflet.set_visible_child(self.list_pane)

    def decide(self, app, wants, everyone=False):
        said = []

        def answered(reply):
            # One choice is several DECIDEs (one password for all): its failure is said once.
            if said or reply is not None and reply.get("ok") is not False:
                return
            said.append(reply)
            if reply is None:
                self.toast(_("The change was not made: netpermd did not answer"))
            elif reply.get("ok") is False and reply.get("error") == "not-authorized":
                self.toast(_("Not changed for everyone: not authorized"))
            elif reply.get("ok") is False:
                self.toast(_("The change was not made"))
        for kind, allow in wants.items():
            self.daemon.decide(app, kind, allow, answered, everyone=everyone)

    def answer(self, prompt_id, choice):
        self.daemon.answer(prompt_id, choice, lambda r: r is None or r.get("ok") is False and self.toast(_("Not answered")))

    def reset_usage(self):
        self.daemon.reset_usage(lambda _r: self._changed())

    def toast(self, text):
        self.toasts.add_toast(Adw.Toast(title=text))

    def _page_shown(self):
        if self.stack.get_visible_child() is self.activity:
            if self.report is not None:
                self.activity.show(self.report, self._name, self.privileged)
            self._read_report()
        if self.stack.get_visible_child() is self.data:
            if self.usage is not None:
                self.data.show(self.usage, self.privileged, {a: i.title for a, i in self.apps.items.items()})
            self._changed()

    def _badge(self, n):
        self.waiting_page.set_badge_number(n)
        self.waiting_page.set_needs_attention(n > 0)

    def _empty(self):
        if self.apps.store.get_n_items() == 0:
            self.list_stack.set_visible_child_name("empty")
        elif self.filtered.model.get_n_items() == 0:
            self.list_stack.set_visible_child_name("none-found")
        else:
            self.list_stack.set_visible_child_name("list")

    # -- screenshots (README's, AppStream's)

    def _shoot(self, path, tries=50):
        """The window as it is drawn, into a PNG. On a busy machine it may not be drawn yet 300 ms after its pages
        were filled (nothing to render): tried again every 200 ms, for 10 s."""
        paintable = Gtk.WidgetPaintable.new(self)
        snapshot = Gtk.Snapshot()
        paintable.snapshot(snapshot, self.get_width(), self.get_height())
        if self.get_renderer() is not None and render_to_png(snapshot, self.get_renderer(), path):
            self.get_application().quit()
        elif tries > 1:
            GLib.timeout_add(200, self._shoot, path, tries - 1)
        else:
            print(f"netpermd-settings: could not draw {path}", file=sys.stderr)
            self.get_application().failed = True
            self.get_application().quit()
        return False


def render_to_png(snapshot, renderer, path):
    """GTK's render nodes have no Python binding here (PyGObject cannot return a GskTransformNode): the three calls
    through ctypes, on the objects' own pointers."""
    def pointer(obj):
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        return get(obj.__gpointer__, None)
    gtk = ctypes.CDLL("libgtk-4.so.1")
    gtk.gtk_snapshot_to_node.restype, gtk.gtk_snapshot_to_node.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    gtk.gsk_renderer_render_texture.restype = ctypes.c_void_p
    gtk.gsk_renderer_render_texture.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    gtk.gdk_texture_save_to_png.restype, gtk.gdk_texture_save_to_png.argtypes = ctypes.c_bool, [ctypes.c_void_p, ctypes.c_char_p]
    node = gtk.gtk_snapshot_to_node(pointer(snapshot))
    if not node:
        return False
    texture = gtk.gsk_renderer_render_texture(pointer(renderer), node, None)
    return bool(texture) and gtk.gdk_texture_save_to_png(texture, path.encode())
