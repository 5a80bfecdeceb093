#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Drives netpermd-settings as a person would, through its accessibility tree (AT-SPI, pyatspi), for the tests.

    settings-driver.py serve APP [ARGS...]

Starts a session bus of its own (and with it the accessibility bus), runs APP on $DISPLAY with $NETPERMD_SOCKET,
waits for its window in the tree, then reads commands on stdin, one per line, and answers each with one JSON line:

    apps                     every app row: {"name", "subtitle", "choice", "sensitive": {choice: bool}}
    choice NAME              app NAME's choice alone, and when it was read: {"choice", "read_at"} (CLOCK_MONOTONIC)
    choose NAME CHOICE       clicks the radio button CHOICE ("Wi-Fi only") in the row of app NAME
    data                     the Data page's rows: {"name", "subtitle", "bar"}
    prompts                  the Waiting page's rows: {"title", "buttons"}
    press LABEL              clicks the button whose accessible name is LABEL ("Allow for Maps")
    status                   the daemon line: {"shown": bool, "text"}
    page NAME                shows page NAME (Apps, Data, Waiting) with its switcher button
    tree                     the whole tree, for a failing test's log
    quit

Every wait is bounded; a command that cannot be done answers {"error": ...}."""
import json
import os
import subprocess
import sys
import time

import pyatspi

CHOICES = ("Off", "Wi-Fi only", "Wi-Fi & Cellular")


def walk(node, depth=0):
    yield node, depth
    try:
        count = node.childCount
    except Exception:
        return
    for i in range(count):
        try:
            child = node.getChildAtIndex(i)
        except Exception:
            continue
        if child is not None:
            yield from walk(child, depth + 1)


def role(n):
    try:
        return n.getRoleName()
    except Exception:
        return "?"


def name(n):
    try:
        return n.name or ""
    except Exception:
        return ""


def states(n):
    try:
        return n.getState()
    except Exception:
        return None


def showing(n):
    """On the screen: GTK 4.8 sets no STATE_SHOWING, but a hidden widget has no size."""
    try:
        e = n.queryComponent().getExtents(pyatspi.WINDOW_COORDS)
        return e.width > 0 and e.height > 0
    except Exception:
        return False


def checked(n):
    s = states(n)
    return s is not None and (s.contains(pyatspi.STATE_CHECKED) or s.contains(pyatspi.STATE_PRESSED))


def sensitive(n):
    s = states(n)
    return s is not None and s.contains(pyatspi.STATE_SENSITIVE)


def click(n):
    action = n.queryAction()
    for i in range(action.nActions):
        if action.getName(i) in ("click", "press", "activate", "toggle"):
            return action.doAction(i)
    return action.doAction(0)


def find_app(prog, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        desktop = pyatspi.Registry.getDesktop(0)
        for i in range(desktop.childCount):
            a = desktop.getChildAtIndex(i)
            if a is not None and name(a) == prog:
                return a
        time.sleep(0.1)
    raise SystemExit(f"no {prog} in the accessibility tree within {timeout} s")


def description(n):
    try:
        return n.description or ""
    except Exception:
        return ""


class Driver:
    def __init__(self, app):
        self.app = app

    def nodes(self):
        return list(walk(self.app))

    def tree(self):
        return [f"{'  ' * d}{role(n)} {name(n)!r} {description(n)!r}" for n, d in self.nodes()]

    def labels(self, n):
        return [name(c) for c, _ in walk(n) if role(c) == "label"]

    def apps_list(self):
        """The Apps page's list (found once: it stays while its rows come and go)."""
        if getattr(self, "_apps_list", None) is None:
            self._apps_list = next(n for n, _ in self.nodes() if role(n) == "list" and name(n) == "Apps")
        return self._apps_list

    def app_rows(self):
        """Each app's expander row: the list item holding its header (a named list item) and its three choices."""
        rows = []
        for n, _ in walk(self.apps_list()):
            if role(n) != "list item" or name(n):
                continue
            items = [c for c, _ in walk(n) if role(c) == "list item" and name(c)]
            choices = {name(c): c for c, _ in walk(n) if role(c) in ("toggle button", "push button") and name(c) in CHOICES}
            if len(choices) == 3 and items:
                rows.append((items[0], choices, n))
        return rows

    def apps(self):
        out = []
        for header, choices, row in self.app_rows():
            labels = self.labels(header)
            metered = next((c for c, _ in walk(row) if role(c) == "check box" and name(c).startswith("Metered")), None)
            roaming = next((c for c, _ in walk(row) if role(c) == "check box" and name(c).startswith("Roaming")), None)
            out.append({"name": name(header), "subtitle": labels[1] if len(labels) > 1 else "",
                        "choice": next((k for k, b in choices.items() if checked(b)), None),
                        "sensitive": {k: sensitive(v) for k, v in choices.items()},
                        "metered": checked(metered) if metered is not None else None,
                        "roaming": checked(roaming) if roaming is not None else None})
        return out

    def choice(self, app):
        """App `app`'s choice now, reading only its three buttons (found once): a quick look, for timing."""
        cache = getattr(self, "_rows", None) or {}
        if app not in cache:
            cache = {name(h): c for h, c, _ in self.app_rows()}
            self._rows = cache
        buttons = cache.get(app)
        if buttons is None:
            return {"error": f"no app {app}"}
        chosen = next((k for k, b in buttons.items() if checked(b)), None)
        return {"choice": chosen, "read_at": time.monotonic()}

    def choose(self, rest):
        for header, choices, _row in self.app_rows():
            prefix = name(header) + " "
            if rest.startswith(prefix) and rest[len(prefix):] in choices:
                click(choices[rest[len(prefix):]])
                return {"ok": True}
        return {"error": f"no app row and choice in {rest!r}: {[name(h) for h, _, _ in self.app_rows()]}"}

    def rows_of(self, list_name):
        """The showing list items of the list named `list_name` on the page now shown."""
        out = []
        for n, _ in self.nodes():
            if role(n) == "list" and name(n) == list_name and showing(n):
                for c in range(n.childCount):
                    item = n.getChildAtIndex(c)
                    if role(item) != "list item":
                        continue
                    labels = self.labels(item)
                    bar = next((name(x) for x, _ in walk(item) if role(x) == "progress bar"), None)
                    buttons = [name(x) for x, _ in walk(item) if role(x) == "push button"]
                    out.append({"name": name(item), "title": labels[0] if labels else "",
                                "subtitle": labels[1] if len(labels) > 1 else "", "bar": bar, "buttons": buttons})
        return out

    def press(self, label):
        for n, _ in self.nodes():
            if role(n) == "push button" and name(n) == label and showing(n):
                click(n)
                return {"ok": True}
        return {"error": f"no button {label!r}"}

    def status(self):
        for n, _ in self.nodes():
            if role(n) == "label" and name(n).startswith("netpermd is not running"):
                return {"shown": showing(n), "text": name(n)}
        return {"shown": False, "text": ""}

    def page(self, title):
        for n, _ in self.nodes():
            if role(n) in ("toggle button", "push button", "button", "radio button", "page tab") and name(n) == title and showing(n):
                click(n)
                return {"ok": True}
        return {"error": f"no page button {title}"}


def serve(argv):
    env = dict(os.environ)
    bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1", "--nopidfile"],
                           stdout=subprocess.PIPE, text=True)
    env["DBUS_SESSION_BUS_ADDRESS"] = bus.stdout.readline().strip()
    os.environ["DBUS_SESSION_BUS_ADDRESS"] = env["DBUS_SESSION_BUS_ADDRESS"]
    env["GTK_A11Y"] = "atspi"
    env.pop("NO_AT_BRIDGE", None)
    # The accessibility bus, as a desktop session starts it.
    subprocess.run(["dbus-send", "--session", "--dest=org.a11y.Bus", "--print-reply", "/org/a11y/bus",
                    "org.a11y.Bus.GetAddress"], stdout=subprocess.DEVNULL, timeout=10, env=env, check=True)
    app = subprocess.Popen(argv, env=env)
    try:
        d = Driver(find_app("netpermd-settings"))
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                break
            try:
                out = command(d, words[0], line.strip()[len(words[0]):].strip())
            except Exception as e:  # the tree moved under us: say so, the test decides
                out = {"error": f"{type(e).__name__}: {e}"}
            print(json.dumps(out), flush=True)
    finally:
        app.terminate()
        try:
            app.wait(timeout=5)
        except subprocess.TimeoutExpired:
            app.kill()
        bus.terminate()


def command(d, verb, rest):
    if verb == "tree":
        return {"tree": d.tree()}
    if verb == "page":
        return d.page(rest)
    if verb == "apps":
        apps = d.apps()
        # When the tree was read to its end (CLOCK_MONOTONIC, as the test's own clock): what it says held by then.
        return {"apps": apps, "read_at": time.monotonic()}
    if verb == "choice":
        return d.choice(rest)
    if verb == "choose":
        return d.choose(rest)
    if verb == "data":
        return {"rows": d.rows_of("Data used by each app"), "total": d.rows_of("This period")}
    if verb == "prompts":
        return {"rows": d.rows_of("Waiting for your answer")}
    if verb == "press":
        return d.press(rest)
    if verb == "status":
        return d.status()
    return {"error": f"unknown command {verb}"}


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        serve(sys.argv[2:])
    else:
        sys.exit(__doc__)
