# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real `systemd --user` (Debian's systemd 252) of a uid of the bench's own, for figure 23, as the integration
tests run one (Tests/IntegrationTests/Support/HostUserManager.swift): in the bench's pid namespace, the initial one,
where the kernel's process events are heard and name pids the daemon sees; in the bench's network namespace; in a
delegated cgroup tree of its own, `npbench-PID-um.slice/user-UID.slice/user@UID.service`; with a mount namespace of
its own in which cgroup v2 is where systemd looks for it (this host mounts it hybrid), `/run/systemd/system` exists
(systemd runs a user manager only on a system booted with systemd) and `/etc/passwd` names the uid. Its private
socket is `/run/user/UID/systemd/private`, as everywhere. `stop()` ends it, kills what is left in its tree, and
removes the tree, `/run/user/UID` and its scratch directory, whatever state the start reached."""

import os
import shutil
import subprocess
import tempfile
import time

from .common import BenchError, log, run

# The launching shell moves itself into the tree, makes the mounts (private to its namespace: unshare's default
# propagation), then becomes the manager as the uid.
SCRIPT = r"""
set -e
echo $$ > "$1/cgroup.procs"
mount --bind "$2/passwd" /etc/passwd
mount --bind "$2/group" /etc/group
mount --bind "$2/run-systemd" /run/systemd
[ -e /sys/fs/cgroup/cgroup.controllers ] || mount --bind "$3" /sys/fs/cgroup
shift 3
exec "$@"
"""


class UserManager:
    def __init__(self, cgroup_root, netns, uid):
        self.uid = uid
        self.runtime = f"/run/user/{uid}"
        self.top = os.path.join(cgroup_root, f"npbench-{os.getpid()}-um.slice")
        self.cgroup = os.path.join(self.top, f"user-{uid}.slice", f"user@{uid}.service")
        self.root, self.netns = cgroup_root, netns
        self.process = None
        self.made_run_user = False
        self.scratch = None

    def start(self, timeout=20):
        uid = self.uid
        if os.path.exists(self.runtime):
            raise BenchError(f"{self.runtime} exists: another user manager of uid {uid}?")
        self.scratch = tempfile.mkdtemp(prefix="npbench-um-", dir="/tmp")
        os.chmod(self.scratch, 0o755)
        os.makedirs(self.cgroup)
        for f in ("", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"):
            os.chown(os.path.join(self.cgroup, f), uid, uid)
        if not os.path.isdir("/run/user"):
            os.mkdir("/run/user", 0o755)
            self.made_run_user = True
        os.mkdir(self.runtime, 0o700)
        os.chown(self.runtime, uid, uid)
        home = os.path.join(self.scratch, "home")
        os.mkdir(home, 0o700)
        os.chown(home, uid, uid)
        for name, line in (("passwd", f"npbench{uid}:x:{uid}:{uid}::{home}:/bin/sh\n"),
                           ("group", f"npbench{uid}:x:{uid}:\n")):
            with open(f"/etc/{name}") as src, open(os.path.join(self.scratch, name), "w") as dst:
                dst.write(src.read() + line)
        os.makedirs(os.path.join(self.scratch, "run-systemd", "system"))
        env = [f"HOME={home}", f"USER=npbench{uid}", f"XDG_RUNTIME_DIR={self.runtime}",
               "PATH=/usr/local/bin:/usr/bin:/bin"]
        logf = open(os.path.join(self.scratch, "manager.log"), "ab")
        self.process = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self.netns}", "unshare", "--mount", "sh", "-c", SCRIPT, "sh",
             self.cgroup, self.scratch, self.root, "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
             "env", "-i"] + env + ["/lib/systemd/systemd", "--user"],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
        logf.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise BenchError(f"systemd --user of uid {uid} exited {self.process.returncode}: {self.log_tail()}")
            if os.path.exists(self.runtime + "/systemd/private"):
                r = run(self.as_user(["systemctl", "--user", "show", "--property=SystemState", "--value"]),
                        check=False, timeout=10)
                if r.stdout.strip() in ("running", "degraded"):
                    return
            if time.monotonic() > deadline:
                raise BenchError(f"systemd --user of uid {uid} not running after {timeout} s: {self.log_tail()}")
            time.sleep(0.05)

    def as_user(self, argv):
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "env",
                f"XDG_RUNTIME_DIR={self.runtime}"] + argv

    def make_cgroup(self, relative):
        """A cgroup below the manager's (made by root, as a desktop's own tree would be by the user)."""
        path = os.path.join(self.cgroup, relative)
        os.makedirs(path, exist_ok=True)
        return path

    def log_tail(self):
        try:
            with open(os.path.join(self.scratch, "manager.log"), errors="replace") as f:
                return f.read()[-2000:]
        except (OSError, TypeError):
            return ""

    def stop(self):
        """Safe to call at any point of start() and more than once."""
        p, self.process = self.process, None
        if p and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        if os.path.isdir(self.top):
            self.remove_tree()
        if self.scratch:
            shutil.rmtree(self.runtime, ignore_errors=True)
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
        if self.made_run_user:
            try:
                os.rmdir("/run/user")
            except OSError:
                pass
            self.made_run_user = False

    def remove_tree(self):
        """Whatever the manager left (its units' processes, the bench's apps) dies with the tree; then the
        directories, deepest first, each retried while its last processes exit."""
        kill = os.path.join(self.cgroup, "cgroup.kill")
        if os.path.exists(kill):
            with open(kill, "w") as f:
                f.write("1")
        dirs = [d for d, _, _ in os.walk(self.top)]
        for d in sorted(dirs, key=len, reverse=True):
            deadline = time.monotonic() + 5
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError as e:
                    if time.monotonic() > deadline:
                        log(f"warning: {d} is left behind: {e}")
                        break
                    time.sleep(0.02)
