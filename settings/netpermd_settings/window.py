# SPDX-License-Identifier: LGPL-2.1-or-later
"""The window: Apps, Data and Waiting in a view stack whose switcher moves to the bottom on a phone's width; a line
that says when the daemon is gone (and goes once it is back); every change heard on the subscription brings the
three pages up to date (APPS, USAGE, PROMPTS), at most every `REFRESH_MS`."""
import ctypes
import sys

from gi.repository import Adw, GLib, Gtk

from .apps import AppsPage
from .client import Client, socket_path
from .data import DataPage
from .text import _, app_name
from .waiting import WaitingPage

APP_ID = "org.netpermd.Settings"
REFRESH_MS = 100
# What apps use moves without an event: while the Data page is shown, it is read again this often.
DATA_MS = 2000


class Window(Adw.ApplicationWindow):
    def __init__(self, app, screenshot=None):
        super().__init__(application=app, title=_("Network Permissions"), default_width=900, default_height=720)
        self.set_size_request(360, 480)
        self.screenshot = screenshot
        self.privileged = False
        self.names = {}
        self.pending = None
        self.loading = 0

        self.stack = Adw.ViewStack(vexpand=True)
        self.apps = AppsPage(self)
        self.data = DataPage(self)
        self.waiting = WaitingPage(self)
        for page, name in ((self.apps, "apps"), (self.data, "data"), (self.waiting, "waiting")):
            self.stack.add_titled_with_icon(page, name, page.get_title(), page.get_icon_name())
        title = Adw.ViewSwitcherTitle(stack=self.stack, title=_("Network Permissions"))
        header = Adw.HeaderBar(title_widget=title)
        bar = Adw.ViewSwitcherBar(stack=self.stack)
        title.bind_property("title-visible", bar, "reveal", 0)

        self.status = Gtk.Label(wrap=True, margin_top=6, margin_bottom=6, margin_start=12, margin_end=12)
        self.status.add_css_class("warning")
        self.status_bar = Gtk.Revealer(child=self.status)
        self.toasts = Adw.ToastOverlay(child=self.stack)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
        for w in (header, self.status_bar, self.toasts, bar):
            box.append(w)
        self.set_content(box)

        self.data_timer = None
        self.stack.connect("notify::visible-child", self._page_shown)

        self.client = Client(["links", "apps", "policy", "prompts"], self._event, self._state, self._subscribed)
        self.client.start()

    def _page_shown(self, *_args):
        if self.stack.get_visible_child() is self.data:
            self.refresh()
            if self.data_timer is None:
                self.data_timer = GLib.timeout_add(DATA_MS, self._data_tick)
        elif self.data_timer is not None:
            GLib.source_remove(self.data_timer)
            self.data_timer = None

    def _data_tick(self):
        if self.client.connected:
            self.client.request("USAGE", lambda r: r.get("ok") and self.data.show(r, self.privileged, self.names))
        return True

    def _state(self, connected, message):
        if connected:
            self.status_bar.set_reveal_child(False)
            self.status.set_visible(False)
            self.refresh()
            return
        self.status.set_label(_("netpermd is not running ({socket}); waiting for it to start").format(socket=socket_path())
                              + (f": {message}" if message else ""))
        self.status.update_property([Gtk.AccessibleProperty.LABEL], [_("netpermd is not running")])
        self.status.set_visible(True)
        self.status_bar.set_reveal_child(True)

    def _subscribed(self, reply):
        self.privileged = bool(reply.get("privileged"))

    def _event(self, event):
        self.refresh()

    def toast(self, text):
        self.toasts.add_toast(Adw.Toast(title=text))

    def refresh(self):
        """Asks for every page's contents soon: several changes in a burst make one refresh."""
        if self.pending is None:
            self.pending = GLib.timeout_add(REFRESH_MS, self._refresh)

    def _refresh(self):
        self.pending = None
        self.loading = 3
        self.client.request("APPS", self._apps)
        self.client.request("USAGE", self._usage)
        self.client.request("PROMPTS", self._prompts)
        return False

    def _loaded(self):
        self.loading -= 1
        if self.loading == 0 and self.screenshot:
            path, self.screenshot = self.screenshot, None
            GLib.timeout_add(300, self._shoot, path)

    def _apps(self, reply):
        if reply.get("ok"):
            verdicts = reply.get("apps", [])
            self.names = {v["app"]: app_name(v) for v in verdicts if app_name(v)}
            self.apps.show(verdicts)
        self._loaded()

    def _usage(self, reply):
        if reply.get("ok"):
            self.data.show(reply, self.privileged, self.names)
        self._loaded()

    def _prompts(self, reply):
        if reply.get("ok"):
            self.waiting.show(reply.get("prompts", []))
        self._loaded()

    def _shoot(self, path, tries=50):
        """The window as it is drawn, into a PNG (the tests' screenshots for README). On a busy machine it may not be
        drawn yet 300 ms after its pages were filled (nothing to render): tried again every 200 ms, for 10 s."""
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
