# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 12, enforcement: a link change (a wwan link appears, a wifi link renamed) to the kernel rejecting the app,
beside nft -f of the same links-map change (BENCHMARKS.md)."""

import json
import os

from ..common import (TPUT_UID, WIFI_ADDR, WIFI_LINK, WIFI_LINK_PEER, WIFI_PROBE, WWAN_ADDR, WWAN_LINK, WWAN_NET,
    WWAN_PEER, WWAN_PROBE, BenchError, fmt, log, run, stats, triple)

PHASE = "linkforce"


class LinkForce:
    def link_map(self):
        """The `links` map of table inet netpermd: each link name and the chain it goes to (`kind_wifi`,
        `metered_wwan`, ...); {} when there is no table."""
        r = run(["ip", "netns", "exec", self.ns, "nft", "-j", "list", "map", "inet", "netpermd", "links"], check=False)
        if r.returncode != 0:
            return {}
        for item in json.loads(r.stdout)["nftables"]:
            if "map" in item:
                return {name: verdict["goto"]["target"] for name, verdict in item["map"].get("elem", [])}
        return {}

    def wifi_link(self):
        """bwl1 (wifi by an [Interface] override, allowed to the app), up and routing WIFI_NET, its peer in the
        second namespace; NOARP like bwwan1."""
        ipn = ["ip", "-n", self.ns]
        run(ipn + ["link", "add", WIFI_LINK, "type", "veth", "peer", "name", WIFI_LINK_PEER, "netns", self.peer_ns])
        run(ipn + ["link", "set", WIFI_LINK, "arp", "off"])
        run(ipn + ["addr", "add", WIFI_ADDR, "dev", WIFI_LINK])
        run(["ip", "-n", self.peer_ns, "link", "set", WIFI_LINK_PEER, "up"])
        run(ipn + ["link", "set", WIFI_LINK, "up"])

    def bench_linkforce(self):
        """12: a link becoming one of a denied kind (wwan, by an [Interface] override; the app may not use wwan) to
        the kernel rejecting the app's datagram through it, with 10 and 10,000 apps: bwwan1 appearing, and bwl1
        (wifi) renamed bwwan1. Beside `nft -f` of the same change of the `links` map the daemon makes (flush map + add
        element), started by the probe once the change's first request is answered, with the daemon stopped and
        its table as it had it before the change."""
        c = self.c
        self.tput_links()  # the second namespace, for the peers
        ipn = ["ip", "-n", self.ns]
        nftx = ["ip", "netns", "exec", self.ns, "nft"]
        # Until bwwan1 brings its prefix route (metric 0), the probe's address is unreachable (not by the default).
        run(ipn + ["route", "add", "unreachable", WWAN_NET, "metric", "4000"])
        conf = os.path.join(self.dir, "linkforce.conf")
        sock = os.path.join(self.dir, "linkforce.sock")
        probe = [self.tool("linkforce"), str(TPUT_UID)]
        changes = {
            "create": (WWAN_PROBE, ["create", WWAN_LINK, WWAN_PEER, self.peer_ns, WWAN_ADDR], lambda: None),
            "rename": (WIFI_PROBE, ["rename", WIFI_LINK, WWAN_LINK], self.wifi_link),
        }
        rounds = c["linkforce_rounds"]
        out = {}

        def gone():
            m = self.link_map()
            return WWAN_LINK not in m and WIFI_LINK not in m
        try:
            for n in (10, c["big_apps"]):
                self.enforce_conf(conf, n)
                with open(conf, "a") as f:
                    f.write(f"\n[Interface {WWAN_LINK}]\nKind=wwan\n\n[Interface {WIFI_LINK}]\nKind=wifi\n")
                d = self.start_enforcing(sock, conf)
                samples, before, after = {}, {}, {}
                for change, (addr, args, prepare) in changes.items():
                    log(f"link -> in force: {rounds} links {change}d with {n} apps")
                    cmd = probe + [addr, "9"] + args + ["--", "daemon"]
                    samples[change] = []
                    for i in range(rounds + 1):
                        prepare()
                        # The daemon has seen the link as it is before the change (bwl1 a wifi link).
                        self.wait_for(lambda: change == "create" or self.link_map().get(WIFI_LINK) == "kind_wifi",
                                      f"{WIFI_LINK} in the daemon's links map as wifi", 10)
                        if i == rounds:
                            # Once more, unchanged: the table and links as the daemon has them before the change.
                            before[change] = (run(nftx + ["list", "table", "inet", "netpermd"]).stdout, self.link_map())
                            run(ipn + ["link", "del", WIFI_LINK], check=False)
                        else:
                            samples[change].append(self.tool_json(cmd, in_ns=True, name=f"linkforce ({change})"))
                            if i == 0:
                                after[change] = self.link_map()
                                if not after[change].get(WWAN_LINK, "").endswith("_wwan"):
                                    raise BenchError(f"the daemon did not send {WWAN_LINK} to wwan's chain ({after[change]})")
                            run(ipn + ["link", "del", WWAN_LINK])
                        self.wait_for(gone, f"{WWAN_LINK} and {WIFI_LINK} gone from the daemon's links map", 10)
                self.stop(d)
                if os.path.exists(sock):
                    os.unlink(sock)
                for change, (addr, args, prepare) in changes.items():
                    # The baseline: the table as the daemon had it, then the daemon's script for the map by nft -f
                    # (Ruleset.linkUpdate: the whole map again, in one transaction).
                    text, links = before[change]
                    load = os.path.join(self.dir, f"linkforce-{change}-table.nft")
                    with open(load, "w") as f:
                        f.write("table inet netpermd {}\ndelete table inet netpermd\n" + text)
                    script = os.path.join(self.dir, f"linkforce-{change}.nft")
                    if after[change] == links:
                        raise BenchError(f"the {change} did not change the links map ({links})")
                    text = "flush map inet netpermd links\n"
                    if after[change]:
                        text += "add element inet netpermd links { " + ", ".join(
                            f'"{name}" : goto {chain}' for name, chain in after[change].items()) + " }\n"
                    with open(script, "w") as f:
                        f.write(text)
                    base = []
                    for _ in range(rounds):
                        run(nftx + ["-f", load], timeout=120)
                        prepare()
                        base.append(self.tool_json(probe + [addr, "9"] + args + ["--", "run", "nft", "-f", script],
                                                   in_ns=True, name=f"linkforce ({change}, nft -f)"))
                        run(ipn + ["link", "del", WWAN_LINK])
                    run(nftx + ["delete", "table", "inet", "netpermd"])
                    daemon = samples[change]
                    out[f"{change}_{n}"] = {
                        "change": change, "apps": n + 1, "script": text,
                        "netpermd_us": stats([s["in_force_us"] for s in daemon]),
                        "nft_us": stats([s["in_force_us"] for s in base]),
                        "configured_us": stats([s["configured_us"] for s in daemon + base]),
                        "nft_exit_us": stats([s["cmd_us"] for s in base]),
                        "netpermd_passed": [int(s["passed"]) for s in daemon],
                        "nft_passed": [int(s["passed"]) for s in base],
                        # From the first datagram that left through the link after the change to the first
                        # rejected: how long it was open.
                        "netpermd_open_us": stats([s["in_force_us"] - s["first_passed_us"] for s in daemon
                                                   if s["first_passed_us"] >= 0]),
                        "nft_open_us": stats([s["in_force_us"] - s["first_passed_us"] for s in base
                                              if s["first_passed_us"] >= 0]),
                        "buffer_full": sum(int(s["buffer_full"]) for s in daemon + base)}
        finally:
            for link in (WWAN_LINK, WIFI_LINK):
                run(ipn + ["link", "del", link], check=False)
            run(ipn + ["route", "del", "unreachable", WWAN_NET, "metric", "4000"], check=False)
        self.results["linkforce"] = out


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    what = {"create": "a wwan link appears", "rename": "a wifi link renamed to wwan"}
    for key, e in sorted(r.get("linkforce", {}).items(), key=lambda kv: (kv[1]["change"] != "create", kv[1]["apps"])):
        ratio = e["netpermd_us"]["median"] / e["nft_us"]["median"]
        leaked, window = sum(1 for p in e["netpermd_passed"] if p), e["netpermd_open_us"]
        tgt, met = "", ""
        if e["apps"] > 1000:
            tgt = "median <= nft -f's"
            met = target(f"link change ({e['change']}) in force no later than nft -f of the same change", ratio <= 1,
                         f"ratio {ratio:.2f}")
        rows.append((f"12 link change ({what[e['change']]}) -> the kernel rejects the app, {e['apps']} apps (ms)",
                     triple(e["netpermd_us"], "ms"), "nft -f of the same links-map change: " + triple(e["nft_us"], "ms"),
                     f"median x{ratio:.2f}; open before in {leaked} of {len(e['netpermd_passed'])} rounds"
                     + (f", for a median {fmt(window['median'], 'ms')} ms" if leaked else ""),
                     tgt, met))
    return rows
