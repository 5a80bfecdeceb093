# SPDX-License-Identifier: LGPL-2.1-or-later
"""Starts the settings app: `netpermd-settings [--screenshot FILE --size WxH] [--app ID] [--page NAME] [--dark]`."""
import argparse
import sys

import gi

gi.require_version("Gtk", "4.0")
gi.require_version("Adw", "1")
from gi.repository import Adw  # noqa: E402

from .window import APP_ID, Window  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(prog="netpermd-settings", description="Which networks each app may use, and its data")
    ap.add_argument("--screenshot", help="draw the window into this PNG once its pages are filled, then quit")
    ap.add_argument("--size", default="900x720", help="the window's size, WIDTHxHEIGHT (default 900x720)")
    ap.add_argument("--app", help="open this app's page once the apps are listed")
    ap.add_argument("--page", choices=("apps", "data", "activity", "waiting"), help="show this page once the apps are listed")
    ap.add_argument("--dark", action="store_true", help="the dark style, whatever the desktop prefers")
    args = ap.parse_args(argv)
    width, height = (int(x) for x in args.size.split("x"))
    app = Adw.Application(application_id=APP_ID)

    def activate(a):
        if args.dark:
            Adw.StyleManager.get_default().set_color_scheme(Adw.ColorScheme.FORCE_DARK)
        win = a.get_active_window() or Window(a, screenshot=args.screenshot, show_app=args.app,
                                                 show_page=args.page)
        win.set_default_size(width, height)
        win.present()
    app.connect("activate", activate)
    # A screenshot that could not be drawn fails the command.
    app.failed = False
    status = app.run([sys.argv[0]])
    return 1 if app.failed else status
