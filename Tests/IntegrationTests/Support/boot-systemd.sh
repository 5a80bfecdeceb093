#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# PID 1 of fresh pid, mount, uts, ipc and cgroup namespaces (see RealSystemd.swift): builds a throw-away root
# (a tmpfs overlay of /) with the API file systems a system manager needs, copies the staged `make install`
# tree into it, and execs systemd. Nothing here reaches the host: every mount is in the new mount namespace,
# and all writes land in the overlay's tmpfs, which goes away with the namespace.
#   $1 scratch directory (empty), $2 container name, $3 staged tree to copy into the root
set -eu
scratch=$1 name=$2 staged=$3
say() { echo "boot-systemd: $*"; }

mount -t tmpfs -o mode=0755 npt-sd "$scratch"
mkdir "$scratch/upper" "$scratch/work" "$scratch/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$scratch/upper,workdir=$scratch/work" "$scratch/root"
r=$scratch/root

mount -t proc proc "$r/proc"
mount --bind /proc/sys "$r/proc/sys"
mount -o remount,bind,ro "$r/proc/sys"
# A fresh sysfs, not a bind of the host's: its /sys/class/net shows this network namespace's links.
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$r/sys"
# The cgroup namespace's root is the test's own subtree.
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$r/sys/fs/cgroup"
mount -t tmpfs -o mode=0755,nosuid npt-dev "$r/dev"
for d in null zero full random urandom tty; do
    touch "$r/dev/$d"
    mount --bind "/dev/$d" "$r/dev/$d"
done
mkdir "$r/dev/pts" "$r/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$r/dev/pts"
ln -s pts/ptmx "$r/dev/ptmx"
touch "$r/dev/console"
mount --bind /dev/null "$r/dev/console"
mount -t tmpfs -o mode=0755,nosuid,nodev npt-run "$r/run"
mount -t tmpfs -o mode=1777,nosuid,nodev npt-tmp "$r/tmp"

# Units that must not run in a throw-away container (clocks, terminals, the host's own services, timers).
for u in systemd-timesyncd.service systemd-pstore.service getty.target getty@.service console-getty.service \
         serial-getty@.service systemd-logind.service remote-fs.target timers.target cron.service ssh.service \
         ssh.socket postgresql.service e2scrub_reap.service systemd-networkd.service systemd-networkd.socket \
         systemd-resolved.service systemd-udevd.service systemd-udev-trigger.service systemd-hwdb-update.service \
         systemd-journald-audit.socket; do
    ln -sfn /dev/null "$r/etc/systemd/system/$u"
done
# The test's own target: only what every service needs.
cat > "$r/etc/systemd/system/npt-test.target" <<EOF
[Unit]
Description=netpermd test container
Requires=sysinit.target sockets.target
After=sysinit.target sockets.target
EOF
echo "$name" > "$r/etc/hostname"
# Copy the tree, not the staging directory's own mode (a mkdtemp 0700 would lock every other user out of /).
mode=$(stat -c %a "$r")
cp -a "$staged/." "$r/"
chmod "$mode" "$r"

mkdir -p "$r/oldroot"
cd "$r"
pivot_root . oldroot
umount -l /oldroot
rmdir /oldroot
say "starting systemd"
# No loading modules, setting clocks, rebooting the host or raw I/O, even as this namespace's root.
exec setpriv --bounding-set -sys_module,-sys_time,-sys_boot,-sys_rawio,-wake_alarm \
    env -i container="$name" /lib/systemd/systemd --unit=npt-test.target
