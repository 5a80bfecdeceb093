#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Drives netpermd-settings as a person would, through its accessibility tree (AT-SPI, pyatspi), for the tests.

    settings-driver.py serve APP [ARGS...]

Starts a session bus of its own (and with it the accessibility bus), runs APP on $DISPLAY with $NETPERMD_SOCKET,
waits for its window in the tree, says {"ready": true, "pid": APP'S PID}, then reads commands on stdin, one per line, and answers each with one JSON line:

    apps                     the Apps list's rows now built: {"name", "data", "choice"} (the choice in a word)
    open NAME                opens app NAME's page (its row's button; found by searching when not built)
    app                      the page shown: {"title", "choice", "sensitive": {choice: bool}, "metered", "roaming",
                             "why", "data", "details", "note"}
    choice NAME              app NAME's row's word and data alone, and when they were read: {"choice", "data",
                             "read_at"} (CLOCK_MONOTONIC)
    choose NAME CHOICE       opens NAME's page and presses CHOICE ("Wi-Fi only")
    search TEXT              types TEXT into the search field (empty: clears it)
    data                     the Data page's rows: {"title", "subtitle", "bar", "paths"} (paths: the accessible
                             objects' of the row and its labels, which a row made again changes)
    prompts                  the Waiting page's rows: {"title", "buttons"}
    lists                    every list shown now, by its name (a group's title: "Most contacted", an app's name on
                             App Activity, "Activity" on an app's page): its rows' {"title", "subtitle", "refused"}
    press LABEL              clicks the button whose accessible name is LABEL ("Allow for Maps")
    check LABEL              clicks the check box or toggle button whose accessible name is LABEL
    status                   the line about the daemon: {"shown": bool, "text"}
    page NAME                shows page NAME (Apps, Data, Waiting) with its switcher button
    texts                    every text shown on the screen now: labels' and buttons' names
    tree                     the whole tree, for a failing test's log
    quit

Every wait is bounded; a command that cannot be done answers {"error": ...}."""
import json
import os
import subprocess
import sys
import time
import traceback

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


def walk_labels_before(nodes, marker):
    """The label just before the label `marker` (the app page's title, before "May use")."""
    last = None
    for n, _ in nodes:
        if role(n) == "label" and showing(n):
            if name(n) == marker:
                if last is not None:
                    yield last
                return
            last = name(n)


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
        """The Apps list (found once: it stays while its rows come and go)."""
        if getattr(self, "_apps_list", None) is None:
            self._apps_list = next(n for n, _ in self.nodes() if role(n) == "list" and name(n) in ("Apps", "应用"))
        return self._apps_list

    def app_rows(self):
        """Each built row: (its button, its labels: name, data, choice)."""
        rows = []
        lst = self.apps_list()
        for i in range(lst.childCount):
            item = lst.getChildAtIndex(i)
            if item is None or role(item) != "list item":
                continue
            button = next((c for c, _ in walk(item) if role(c) == "push button"), None)
            labels = self.labels(item)
            if button is not None and len(labels) >= 3:
                rows.append((button, labels))
        return rows

    def apps(self):
        return [{"name": l[0], "data": l[1], "choice": l[2]} for _b, l in self.app_rows()]

    def search(self, text):
        entry = next(n for n, _ in self.nodes() if role(n) == "entry" and showing(n))
        entry.queryEditableText().setTextContents(text)
        return {"ok": True}

    def open(self, app):
        for attempt in range(2):
            for button, labels in self.app_rows():
                if labels[0] == app:
                    click(button)
                    return {"ok": True}
            if attempt == 0:
                self.search(app)
                time.sleep(0.2)
        return {"error": f"no app {app}: {[l[0] for _b, l in self.app_rows()]}"}

    def page_node(self):
        """The app page: the showing panel holding the three choices."""
        for n, _ in self.nodes():
            if role(n) in ("push button", "toggle button") and name(n) in CHOICES and showing(n):
                return n.parent.parent
        return None

    def app_page(self):
        buttons = {name(n): n for n, _ in self.nodes()
                   if role(n) in ("push button", "toggle button") and name(n) in CHOICES and showing(n)}
        if len(buttons) != 3:
            return {"error": "no app page shown"}
        out = {"choice": next((k for k, b in buttons.items() if checked(b)), None),
               "sensitive": {k: sensitive(b) for k, b in buttons.items()}}
        title = next((c for c in walk_labels_before(self.nodes(), "May use")), "")
        out["title"] = title
        for key, row_title in (("metered", "Metered networks"), ("roaming", "Roaming")):
            box = next((n for n, _ in self.nodes() if role(n) == "check box" and name(n) == row_title and showing(n)), None)
            out[key] = checked(box) if box is not None else None
            out[key + "_sensitive"] = sensitive(box) if box is not None else None
        for n, _ in self.nodes():
            if role(n) == "list item" and showing(n):
                labels = self.labels(n)
                if len(labels) >= 2 and name(n) in ("Why not now", "Connection"):
                    out["why"] = labels[1]
                elif len(labels) >= 2 and name(n) == "Data this period":
                    out["data"] = labels[1]
                elif len(labels) >= 2 and name(n) == "Links":
                    out["details"] = labels[1]
        return out

    def choice(self, app):
        """App `app`'s row's word now, read from its row alone: a quick look, for timing."""
        for _b, labels in self.app_rows():
            if labels[0] == app:
                return {"choice": labels[2], "data": labels[1], "read_at": time.monotonic()}
        return {"error": f"no app {app}"}

    def choose(self, rest):
        for c in CHOICES:
            if rest.endswith(" " + c):
                app = rest[:-len(c) - 1]
                opened = self.open(app)
                if "error" in opened:
                    return opened
                time.sleep(0.1)
                for n, _ in self.nodes():
                    if role(n) in ("push button", "toggle button") and name(n) == c and showing(n):
                        click(n)
                        return {"ok": True}
        return {"error": f"no app and choice in {rest!r}"}

    def texts(self):
        return sorted({name(n) for n, _ in self.nodes()
                       if role(n) in ("label", "push button", "toggle button", "page tab", "check box", "list item")
                       and name(n) and showing(n)})

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
                    bar = next((name(x) for x, _ in walk(item) if role(x) in ("progress bar", "level bar")), None)
                    buttons = [name(x) for x, _ in walk(item) if role(x) == "push button"]
                    # Its accessible objects' paths: a row made again (a new widget) has new ones.
                    paths = [item.path] + [x.path for x, _ in walk(item) if role(x) == "label"]
                    out.append({"name": name(item), "title": labels[0] if labels else "",
                                "subtitle": labels[1] if len(labels) > 1 else "", "bar": bar, "buttons": buttons,
                                "paths": paths})
        return out

    def lists(self):
        out = {}
        for n, _ in self.nodes():
            if role(n) == "list" and showing(n) and name(n):
                rows = []
                for c in range(n.childCount):
                    item = n.getChildAtIndex(c)
                    if item is None or role(item) != "list item" or not showing(item):
                        continue
                    labels = [x for x in self.labels(item) if x]
                    refused = any(role(x) == "image" and name(x) == "Refused" for x, _ in walk(item))
                    rows.append({"title": labels[0] if labels else "", "subtitle": labels[1] if len(labels) > 1 else "",
                                 "refused": refused})
                out.setdefault(name(n), []).extend(rows)
        return out

    def press(self, label):
        for n, _ in self.nodes():
            if role(n) == "push button" and name(n) == label and showing(n):
                click(n)
                return {"ok": True}
        return {"error": f"no button {label!r}"}

    def check(self, label):
        for n, _ in self.nodes():
            if role(n) in ("check box", "toggle button", "push button") and name(n) == label and showing(n):
                click(n)
                return {"ok": True}
        return {"error": f"no check box {label!r}: " + repr([(role(n), name(n), showing(n)) for n, _ in self.nodes()
                                                            if role(n) in ("check box", "toggle button", "push button")])}

    def status(self):
        """The line about the daemon: the label beside the Retry button."""
        for n, _ in self.nodes():
            if role(n) == "push button" and name(n) == "Retry":
                box = n.parent
                label = next((name(c) for c, _ in walk(box) if role(c) == "label" and name(c) != "Retry"), "")
                return {"shown": showing(n), "text": label}
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
        print(json.dumps({"ready": True, "pid": app.pid}), flush=True)
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                break
            try:
                out = command(d, words[0], line.strip()[len(words[0]):].strip())
            except Exception as e:  # the tree moved under us: say so, the test decides
                out = {"error": f"{type(e).__name__}: {e}", "where": traceback.format_exc().splitlines()[-3:]}
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
    if verb == "open":
        return d.open(rest)
    if verb == "app":
        return d.app_page()
    if verb == "search":
        return d.search(rest)
    if verb == "texts":
        return {"texts": d.texts()}
    if verb == "back":
        return d.press("Apps")
    if verb == "data":
        return {"rows": d.rows_of("Data used by each app"), "total": d.rows_of("This period")}
    if verb == "prompts":
        return {"rows": d.rows_of("Waiting for your answer")}
    if verb == "lists":
        return {"lists": d.lists()}
    if verb == "press":
        return d.press(rest)
    if verb == "check":
        return d.check(rest)
    if verb == "status":
        return d.status()
    return {"error": f"unknown command {verb}"}


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        serve(sys.argv[2:])
    else:
        sys.exit(__doc__)
