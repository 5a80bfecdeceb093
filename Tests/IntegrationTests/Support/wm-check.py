#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A window manager's mark on a test's X display, and nothing else: the EWMH check window (`_NET_SUPPORTING_WM_CHECK`
on the root window and on itself, named by `_NET_WM_NAME`) and an empty `_NET_SUPPORTED`, kept until killed.

    wm-check.py READY_FILE

A desktop always has a window manager. Without one, GTK 4.8 asks the X server for the check window twice in every
frame (gdk_x11_screen_supports_net_wm_hint for `_NET_WM_FRAME_DRAWN`, never cached while there is none): a round trip
that waits for the server to draw everything queued before it, so under Xvfb each frame waited 10-100 ms on the
server's software drawing. With the mark, GTK finds it once and, nothing being supported, draws as it did without a
window manager. Makes READY_FILE once the properties are set. Uses libX11 through ctypes (no other package)."""
import ctypes
import signal
import sys

x11 = ctypes.CDLL("libX11.so.6")
x11.XOpenDisplay.restype = ctypes.c_void_p
x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
x11.XDefaultRootWindow.restype = ctypes.c_ulong
x11.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
x11.XCreateSimpleWindow.restype = ctypes.c_ulong
x11.XCreateSimpleWindow.argtypes = [ctypes.c_void_p, ctypes.c_ulong] + [ctypes.c_int] * 2 + [ctypes.c_uint] * 3 \
    + [ctypes.c_ulong] * 2
x11.XInternAtom.restype = ctypes.c_ulong
x11.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
x11.XChangeProperty.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_int,
                                ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
x11.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]

XA_ATOM, XA_WINDOW, REPLACE = 4, 33, 0


def main():
    display = x11.XOpenDisplay(None)
    if not display:
        sys.exit("wm-check: cannot open the display")
    root = x11.XDefaultRootWindow(display)
    window = x11.XCreateSimpleWindow(display, root, -1, -1, 1, 1, 0, 0, 0)
    atom = lambda name: x11.XInternAtom(display, name, 0)  # noqa: E731
    check = (ctypes.c_ulong * 1)(window)
    for on in (window, root):
        x11.XChangeProperty(display, on, atom(b"_NET_SUPPORTING_WM_CHECK"), XA_WINDOW, 32, REPLACE, check, 1)
    name = b"netpermd-tests"
    x11.XChangeProperty(display, window, atom(b"_NET_WM_NAME"), atom(b"UTF8_STRING"), 8, REPLACE, name, len(name))
    x11.XChangeProperty(display, root, atom(b"_NET_SUPPORTED"), XA_ATOM, 32, REPLACE, (ctypes.c_ulong * 1)(), 0)
    x11.XSync(display, 0)
    open(sys.argv[1], "w").close()
    # The window lives as long as the connection: until killed.
    signal.signal(signal.SIGTERM, lambda *_a: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
