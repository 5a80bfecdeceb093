# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 26, the privacy report on disk: the real daemon fed `reportdisk_days` days of `reportdisk_conns` new
connections a day to `reportdisk_names` names the app resolved itself, a day a daemon run (SIGTERM writes the file,
the next run reads it back) with the clock moved a day on by the offset file the tests use; the file's size at the
end (BENCHMARKS.md, docs/PRIVACY.md)."""

import json
import os

from ..common import TPUT_LINK, TPUT_UID, BenchError, log, run

PHASE = "reportdisk"
DNS_ADDRESS = "10.97.0.2"
PYTHON = "/usr/bin/python3"

# The peer's DNS server: hN.bench.test is 10.98.(16 + N / 256).(N % 256), where connflood sends its N-th destination
# from BASE (clear of 10.98.0.1, which figure 7 puts on a link of the namespace: a connection to it would be local).
BASE = "10.98.16.0"
DNS_SERVER = r"""
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 53))
while True:
    q, peer = s.recvfrom(512)
    at, labels = 12, []
    while q[at]:
        labels.append(q[at + 1:at + 1 + q[at]].decode("ascii", "replace")); at += 1 + q[at]
    question = q[12:at + 5]
    name = ".".join(labels)
    ok = len(labels) == 3 and labels[0][:1] == "h" and labels[0][1:].isdigit() and labels[1:] == ["bench", "test"]
    n = int(labels[0][1:]) if ok else 0
    head = q[:2] + struct.pack(">HHHHH", 0x8180 if ok else 0x8183, 1, 1 if ok else 0, 0, 0)
    answer = struct.pack(">HHHIH", 0xC00C, 1, 1, 60, 4) + bytes([10, 98, 16 + n // 256 % 240, n % 256]) if ok else b""
    s.sendto(head + question + answer, peer)
"""

# The app's own resolving: every name asked on one socket of its own, one at a time.
RESOLVER = r"""
import json, socket, struct, sys
server, count = sys.argv[1], int(sys.argv[2])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(2); u.connect((server, 53))
answered = 0
for n in range(count):
    q = struct.pack(">HHHHHH", n % 65536, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in ("h%d" % n, "bench", "test")) + b"\0" + struct.pack(">HH", 1, 1)
    u.send(q)
    try:
        r = u.recv(4096)
        answered += struct.unpack(">H", r[6:8])[0] == 1
    except socket.timeout:
        pass
print(json.dumps({"answered": answered}))
"""


class ReportDisk:
    def reportdisk_conf(self, path):
        with open(path, "w") as f:
            f.write(f"[Interface {TPUT_LINK}]\nKind=wwan\n\n[Usage]\nCount=yes\nSaveIntervalSec=3600\n\n"
                    f"[Report]\nEnabled=yes\nDays=7\n\n[Defaults]\nWWAN=allow\n\n[App tputapp]\nUser={TPUT_UID}\n")

    def reportdisk_as_app(self, cmd):
        return ["ip", "netns", "exec", self.ns, "setpriv", "--reuid", str(TPUT_UID), "--regid", str(TPUT_UID),
                "--clear-groups"] + cmd

    def reportdisk_day(self, sock, conf, offset_file, day):
        """One day: the daemon started with the clock `day` days on, the names resolved, the connections made, the
        daemon stopped (it writes the file at its stop)."""
        c = self.c
        with open(offset_file, "w") as f:
            f.write(f"{day * 86400}\n")
        d = self.start_in_force(sock, conf, "usage", "counting", "netpermd_usage", "[Usage] Count=yes", "reportdisk",
                                extra=["--clock-offset-file", offset_file])
        if day == 0:
            run(self.reportdisk_as_app([os.path.join(self.bin, "netpermctl"), "--socket", sock, "report", "on"]))
        names = self.tool_json(self.reportdisk_as_app([PYTHON, "-c", RESOLVER, DNS_ADDRESS, str(c["reportdisk_names"])]),
                               timeout=120, name="resolver")
        if names["answered"] != c["reportdisk_names"]:
            raise BenchError(f"day {day}: {names['answered']} of {c['reportdisk_names']} names answered")
        rate = c["reportdisk_rate"]
        flood = self.tool_json(self.reportdisk_as_app([self.tool("connflood"), BASE, str(c["reportdisk_names"]), str(rate),
                                            str(c["reportdisk_conns"] / rate)]), timeout=300, name="connflood")
        # What the kernel announced is read before the stop (its CPU settles): how much of it is in the report.
        self.settle_cpu(d.pid)
        r = json.loads(self.ask(sock, "REPORT", timeout=30))
        recorded = sum(dst["connections"] for a in r["apps"] for dst in a["destinations"] if dst["named"])
        self.stop(d, timeout=30)
        self.remove_rules()
        run(["ip", "netns", "exec", self.ns, "conntrack", "-F"], check=False)
        return flood["sent"], recorded

    def bench_reportdisk(self):
        """26: the report's file after `reportdisk_days` days, each of `reportdisk_conns` connections to
        `reportdisk_names` names."""
        c = self.c
        log(f"reportdisk: {c['reportdisk_days']} days of {c['reportdisk_conns']} connections a day to "
            f"{c['reportdisk_names']} names")
        self.tput_links()
        os.chmod(self.dir, 0o755)
        run(["ip", "-n", self.ns, "route", "replace", "10.98.0.0/16", "via", "10.97.0.2", "dev", TPUT_LINK])
        server = self.spawn(["ip", "netns", "exec", self.peer_ns, PYTHON, "-c", DNS_SERVER, DNS_ADDRESS],
                            log_name="reportdisk-dns.log")
        self.wait_for(lambda: run(["ip", "netns", "exec", self.peer_ns, "ss", "-Hlnu", "sport = :53"]).stdout.strip(),
                      "the bench's DNS server", 5)
        sock = os.path.join(self.dir, "reportdisk.sock")
        offset_file = os.path.join(self.dir, "reportdisk-clock")
        conf = os.path.join(self.dir, "reportdisk.conf")
        self.reportdisk_conf(conf)
        days = [self.reportdisk_day(sock, conf, offset_file, day) for day in range(c["reportdisk_days"])]
        sent, recorded = sum(s for s, _ in days), days[-1][1]
        if recorded == 0:
            raise BenchError("the report recorded no connection by name")
        self.stop(server)
        path = os.path.join(self.dir, "state-reportdisk", "report")
        with open(path) as f:
            entries = [line.split() for line in f if line.startswith("entry ")]
        self.results["reportdisk"] = {
            "days": c["reportdisk_days"], "conns": c["reportdisk_conns"], "names": c["reportdisk_names"], "sent": sent,
            "recorded": recorded,
            "bytes": os.path.getsize(path), "entries": len(entries),
            "named": sum(1 for e in entries if not e[6].replace(".", "").isdigit()),
            "day_count": len({e[1] for e in entries}),
            # Every connection the file holds (the DNS queries' own included), by name or not.
            "in_file": sum(int(e[12]) for e in entries),
        }


def rows(r, smoke, target):
    if "reportdisk" not in r:
        return []
    x = r["reportdisk"]
    mib = x["bytes"] / (1 << 20)
    ok = mib < 16
    target("report: 7 days of 10,000 connections a day to 1,000 names on disk < 16 MiB", ok, f"{mib:.2f} MiB")
    return [(f"26 report file: {x['days']} days x {x['conns']} connections/day to {x['names']} names (bytes)",
             f"{x['bytes']:,}", "",
             f"{x['entries']} entries ({x['named']} by name) over {x['day_count']} days; {x['sent']} connections sent, "
             f"{x['recorded']} recorded by name ({x.get('in_file', 0)} in the file in all)",
             "< 16 MiB", "met" if ok else "MISSED")]
