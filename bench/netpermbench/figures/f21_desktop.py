# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 21, a desktop session's apps launched and stopped: each refused from its scope's first moments
(BENCHMARKS.md)."""

import json
import os
import subprocess

from ..common import APP, TPUT_UID, WIFI, fmt, log, triple

PHASE = "desktop"


class Desktop:
    def bench_desktop(self):
        """21: a desktop session's apps (issue 32). A user manager's tree of the bench's own at the root of the
        hierarchy (npbench-PID.slice/npbench-PID-user.slice/user@UID.service/app.slice), and a policy with no [App]:
        [Defaults] WiFi=deny. 300 desktop apps launched one after another in scopes named for their application IDs,
        each refused by the kernel before it was ever named in a policy; a good client's QUERY meanwhile."""
        c = self.c
        root = os.path.join(self.cgroup_root(), f"npbench-{os.getpid()}-desk.slice")
        apps_dir = os.path.join(root, f"npbench-{os.getpid()}-user.slice", f"user@{TPUT_UID}.service", "app.slice")
        os.makedirs(apps_dir)
        conf = os.path.join(self.dir, "desktop.conf")
        sock = os.path.join(self.dir, "desktop.sock")
        with open(conf, "w") as f:
            f.write(f"[Interface {WIFI}]\nKind=wifi\n\n[Enforcement]\nMode=block\n\n[Defaults]\nWiFi=deny\n\n"
                    f"[App {APP}]\nExecutable=/opt/npbench/{APP}\nWiFi=allow\n")
        d = None
        try:
            d = self.start_in_force(sock, conf, "enforcement", "enforcing", "netpermd", "desktop apps", "desktop")
            log(f"desktop: {c['desktop_apps']} desktop apps launched and stopped for {c['desktop_s']} s")
            rest = self.paced(sock, f"QUERY {APP}", c["rest_s"])
            apps = self.spawn(["nsenter", f"--net=/run/netns/{self.ns}", self.tool("desktopapps"), apps_dir,
                               str(c["desktop_apps"]), str(c["desktop_s"]), "10.99.0.2", "9"], stdout=subprocess.PIPE)
            during = self.paced(sock, f"QUERY {APP}", c["desktop_s"])
            out, _ = apps.communicate(timeout=c["desktop_s"] + 120)
            self.stop(d)
        finally:
            if d and d.poll() is None:
                d.kill()
                d.wait()
            for p in (apps_dir, os.path.dirname(apps_dir), os.path.dirname(os.path.dirname(apps_dir)), root):
                try:
                    os.rmdir(p)
                except OSError as e:
                    log(f"warning: {p}: {e}")
        self.results["desktop"] = {"apps": c["desktop_apps"], "seconds": c["desktop_s"], **json.loads(out),
                                   "rest": rest, "during": during}


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "desktop" in r:
        de = r["desktop"]
        f, d, rest = de["first_refused_us"], de["during"]["rtt_us"], de["rest"]["rtt_us"]
        rows.append((f"21 {de['apps']} desktop apps launched and stopped ({de['launched']}, {de['refused']} refused): "
                     "scope made -> first datagram refused (ms)", triple(f, "ms"), "", f"max {fmt(f['max'], 'ms')} ms",
                     "every launch refused", target("every desktop app's launch refused by [Defaults]",
                                                    de["refused"] == de["launched"] > 0,
                                                    f"{de['refused']} of {de['launched']}")))
        rows.append(("21 the same: good client's QUERY (ms)", triple(d, "ms"), "at rest: " + triple(rest, "ms"),
                     f"p99 x{d['p99'] / max(rest['p99'], 1):.0f}, max {fmt(d['max'], 'ms')} ms", "", ""))
    return rows
