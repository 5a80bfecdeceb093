#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes the fuzz targets' seed corpus (Fuzz/corpus/TARGET/) from the docs' examples and the test fixtures.

    python3 Fuzz/seeds.py          regenerate Fuzz/corpus
    python3 Fuzz/seeds.py --check  fail if Fuzz/corpus is not what this script writes (make fuzz runs this)

Input formats are described at the top of each target in Fuzz/Targets/.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "Fuzz", "corpus")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def ini_blocks(path):
    return re.findall(r"```ini\n(.*?)```", read(path), re.S)


def engine_seeds():
    seeds = {}
    # Every verb as the protocol's headings write it, with its placeholders filled in, from a root client (0),
    # an admin (1) and an unprivileged one (2).
    fill = {"APP": "firefox", "KIND": "wifi", "SECONDS": "5", "allow|deny": "allow", "TOPIC": "links",
            "ADDRESS": "192.0.2.1"}
    requests = []
    for m in re.finditer(r"^### `([A-Z]+[^`]*)`", read("docs/PROTOCOL.md"), re.M):
        usage = m.group(1)
        full = re.sub(r"[\[\]]|\.\.\.", "", usage)
        for k, v in fill.items():
            full = re.sub(r"(?<![\w|])" + re.escape(k) + r"(?![\w|])", v, full)
        requests.append(" ".join(full.split()))
        requests.append(usage.split()[0])
    requests += re.findall(r"<<< '([^']*)'", read("docs/PROTOCOL.md"))
    for m in re.finditer(r"printf '([^']*)'", read("README.md")):
        requests += [r for r in m.group(1).split("\\n") if r]
    requests = list(dict.fromkeys(requests))
    seeds["doc-requests"] = "".join(f"{n % 3} {r}\n" for n, r in enumerate(requests))
    # Scenarios: sequences the protocol doc describes (prompts answered and expiring, WAIT held and timing out,
    # reloads during loads, writes failing, subscribers falling behind, QUIT, closes).
    seeds["prompt-answered"] = ("0 SUBSCRIBE prompts\n1 SUBSCRIBE apps\n1 WAIT 30\n0 PROMPTS\n"
                                "0 DECIDE firefox wifi allow\n0 DECIDE firefox wwan deny --once\n1 QUERY\nc1\n")
    seeds["prompt-expires"] = "0 SUBSCRIBE links apps prompts\n1 QUERY\nt31\n1 QUERY\nt60\n0 PROMPTS\n"
    seeds["wait-timeout"] = "2 WAIT 0.5\n1 WAIT updater 2\nk2\nt1\nk0\nt3\n3 WAIT\nc3\n"
    seeds["reload-during-load"] = "m\n0 RELOAD\nr1\n1 RELOAD\np\np\nm\nr2\n0 RELOAD\n0 STATUS\nr0\n0 RELOAD\n"
    seeds["store-slow-and-failing"] = ("s\n0 DECIDE firefox wifi allow\n1 DECIDE firefox wwan deny\n0 FORGET firefox\n"
                                       "e\nd\nd\ns\nE\n0 DECIDE firefox wifi deny\nE\n0 FORGET firefox wifi\n")
    seeds["subscribers-and-kernel"] = ("2 SUBSCRIBE\n3 SUBSCRIBE links\nk1\nK1\nk3\nk4\nu20\nu31000\nk5\n"
                                       "2 SUBSCRIBE apps policy\nx\n")
    seeds["framing"] = "\n   \n0 ping\n0 PING extra\n0\tQUERY\tfirefox\r\nL0\n0 NOSUCHVERB\n0 WAIT 1 2\n0 QUIT\n0 PING\n"
    seeds["peers"] = "o04\n0 QUERY\n0 SUBSCRIBE prompts\no15\n1 RELOAD\no23\n2 QUERY firefox\n2 QUERY\nc0\nc1\n"
    seeds["own-policy"] = ("0 SUBSCRIBE prompts\n1 SUBSCRIBE\nR[Defaults]|WiFi=ask|AdminGroup=wheel|[App firefox]|"
                           "Executable=/usr/bin/f*|WWAN=ask\n1 QUERY\n0 APPS\n0 DECIDE firefox wwan allow\n"
                           "R[App x\n0 RELOAD\n0 STATUS\n")
    seeds["identity-changes"] = ("0 SUBSCRIBE prompts\n1 SUBSCRIBE\ni12\n1 QUERY\ni06\n0 PROMPTS\n0 QUERY\n"
                                 "o26\n2 WAIT\ni20\n2 QUERY\ni01\nr1\n")
    # REACH: judged at once, held for an answer that comes, expires or times out, and a closed asker.
    seeds["reach"] = ("0 SUBSCRIBE prompts\n1 REACH 10.0.0.1\n1 REACH 127.0.0.1 30\n0 PROMPTS\nt31\n1 REACH ::1 5\n"
                      "t6\n2 REACH 192.0.2.1 30\n0 DECIDE firefox wwan allow\n3 REACH 2001:db8::1 9\nc3\nt10\n")
    # Rejected packets (Mode=block's NFLOG): with no agent (logged once), then raising one prompt however many come,
    # quiet after it expires (an asking app still raises it at once), again after the quiet; then for apps and kinds
    # that are not pending (allowed, denied, unknown), and a decision ending it.
    seeds["blocked-prompt"] = ("b01\nb01\n0 SUBSCRIBE prompts\nb00\nb00\nb01\n0 PROMPTS\nt31\nb00\nt31\nb00\n"
                               "1 QUERY\nt31\nb00\nt61\nb00\nb11\nb21\nb51\nb44\n0 DECIDE firefox wifi allow\nb00\n"
                               "r1\nb40\nb41\nc0\nb01\n")
    # The quiet minute runs from the last expiry (a prompt raised by asking expired during it): found by fuzzing.
    seeds["blocked-quiet-twice"] = "0 SUBSCRIBE prompts\nb00\nt31\n1 QUERY\nt31\nb00\nt35\nb00\nt30\nb00\n"
    # Users' own agents (UserDecisions=yes): uid 1001's agent, its app asking and its packets rejected, answers
    # refused once too late, an asker exiting, a privileged agent answering for everyone.
    seeds["user-agents"] = ("o22\n2 SUBSCRIBE prompts\no33\n3 WAIT\nb012\nb013\n2 PROMPTS\n2 ANSWER 1 allow\n"
                            "3 QUERY\nw3\n2 ANSWER 2 once\n2 DECISIONS\n2 DECIDE firefox wwan deny\n2 FORGET firefox\n"
                            "0 SUBSCRIBE prompts\no33\n3 QUERY\nt31\n2 ANSWER 3 deny\n0 ANSWER 4 allow\nw2\nc2\n")
    # Counting and the report (policy 4): connections, ends, answers and refusals of each app, a person turning
    # theirs on (curl, uid 1001's) and off, REPORT read by root and by that person, cleared, off by a reload.
    seeds["report"] = ("r4\n0 REPORT\nn103\nn1109\nn12x\nn13x\nn133\nn4037\n2 KEEP-REPORT yes\nn4037\nn43x\n"
                       "n4335\nn432\n2 REPORT\n2 REPORT curl\n0 REPORT updater\nk1\nn1334\n0 METRICS\nt61\n"
                       "2 RESET-REPORT\n0 KEEP-REPORT yes\n2 KEEP-REPORT no\nn4037\nE\nt61\nE\nr0\n0 REPORT\n")
    return seeds


def config_seeds():
    seeds = {}
    blocks = []
    for doc in ["docs/POLICY.md", "docs/CLASSIFICATION.md", "README.md"]:
        for n, b in enumerate(ini_blocks(doc)):
            if "decisions.conf" in b or "[Service]" in b:
                continue
            name = f"doc-{os.path.basename(doc).split('.')[0]}-{n}"
            seeds[name] = b
            blocks.append(b)
    for conf in sorted(os.listdir(os.path.join(ROOT, "config"))):
        seeds[f"config-{conf}"] = read(f"config/{conf}")
    # Drop-ins: the shipped file, then each example merged over it.
    main = read("config/netpermd.conf")
    for n, b in enumerate(blocks):
        seeds[f"dropin-{n}"] = main + "\0" + b
    seeds["dropin-override"] = ("[App a]\nUser=0\nWiFi=deny\n\0[App a]\nWiFi=allow\nExecutable=/usr/bin/a\n"
                                "\0[Defaults]\nAdminGroup=wheel\nPromptTimeoutSec=5\n\0[Interface wl*]\nKind=wwan\n")
    return seeds


def decisions_seeds():
    seeds = {}
    for doc in ["docs/POLICY.md"]:
        for n, b in enumerate(ini_blocks(doc)):
            if "decisions.conf" in b:
                seeds[f"doc-{n}"] = b
    seeds["written"] = ("# netpermd's stored decisions, written by the daemon (netpermctl decide / forget).\n\n"
                        "[App firefox]\nWiFi=allow\nWWAN=deny\n\n[App maps]\nEthernet=deny\nOther=allow\n")
    return seeds


def classify_seeds():
    seeds = {}
    fixtures = "Tests/NetpermCoreTests/Fixtures"
    for fx in sorted(os.listdir(os.path.join(ROOT, fixtures))):
        net = os.path.join(ROOT, fixtures, fx, "class", "net")
        if not fx.startswith("sysfs-") or not os.path.isdir(net):
            continue  # lease directories (run-*) and the like hold no links
        names = sorted(os.listdir(net))
        facts = {}
        for name in names:
            d = os.path.join(net, name)
            arphrd = open(os.path.join(d, "type")).read().strip() if os.path.exists(os.path.join(d, "type")) else "1"
            devtype = ""
            if os.path.exists(os.path.join(d, "uevent")):
                for line in open(os.path.join(d, "uevent")):
                    if line.startswith("DEVTYPE="):
                        devtype = line.strip()[len("DEVTYPE="):]
            flags = " ".join(f for f in ["phy80211", "wireless"] if os.path.exists(os.path.join(d, f)))
            lowers = sorted(e[len("lower_"):] for e in os.listdir(d) if e.startswith("lower_"))
            ports = sorted(os.listdir(os.path.join(d, "brif"))) if os.path.isdir(os.path.join(d, "brif")) else []
            kind = {"sysfs-veth": "veth", "sysfs-tun": "tun"}.get(fx, "")
            if devtype in ("vlan", "bond", "bridge"):
                kind = devtype
            elif lowers:
                kind = "macvlan"
            elif name.startswith("vnet"):
                kind = "tun"
            facts[name] = dict(arphrd=arphrd, devtype=devtype, flags=flags, kind=kind, lowers=lowers, ports=ports)
        # The first link as the single link; a fixture of several links adds them all as a stack (+ lines):
        # vlan and macvlan name their lower link, bonds and bridges their ports.
        first = facts[names[0]]
        text = f"{names[0]}\n{first['arphrd']}\n{first['kind']}\n{first['devtype']}\n{first['flags']}\n"
        if len(names) > 1:
            index = {n: 10 + i for i, n in enumerate(names)}
            master, lower = {}, {}
            for n, f in facts.items():
                for l in f["lowers"]:
                    if f["kind"] in ("bond", "bridge"):
                        master[l] = n
                    else:
                        lower[n] = l
                for p in f["ports"]:
                    master[p] = n
            for n in names:
                f = facts[n]
                text += " ".join(["+" + str(index[n]), n, f["arphrd"], f["kind"] or "-",
                                  str(index[lower[n]]) if n in lower else "-",
                                  str(index[master[n]]) if n in master else "-", f["devtype"] or "-"]) + "\n"
            text += f"={index[names[0]]} 100\n"
        seeds[fx] = text
    # The classification doc's overrides, applied to a link they match.
    for n, b in enumerate(ini_blocks("docs/CLASSIFICATION.md") + ini_blocks("docs/POLICY.md")):
        for m in re.finditer(r"\[Interface ([^\]]+)\]\n((?:[A-Za-z]+=.*\n)*)", b):
            keys = dict(l.split("=", 1) for l in m.group(2).splitlines())
            name = m.group(1).replace("*", "0").replace("?", "x")
            seeds[f"override-{n}-{name}"] = (f"{name}\n1\n\n\n\n{m.group(1)}\t{keys.get('Kind', '')}"
                                             f"\t{keys.get('Metered', '')}\n")
    return seeds


def watch_seeds():
    """Records (NUL-separated) for the watch target: cgroups as desktops, Flatpak, KDE, D-Bus activation, snap and
    terminals name them (docs/APPS.md, FACTS.md), then as a hostile user may (SoakTests' hostile-user.py): names of
    256-4,000 bytes, bytes that are not UTF-8, deep nesting; the settings app's real desktop file and hostile ones."""
    def records(*rs):
        return b"\0".join(r if isinstance(r, bytes) else r.encode("utf-8") for r in rs)

    seeds = {}
    seeds["desktop-units"] = records(
        "uapp-gnome-org.gnome.Maps-4242.scope", "uapp-flatpak-org.gnome.Maps-77.scope", "uapp-org.kde.okular@9c2d.service",
        "udbus-:1.2-org.gnome.Calculator@0.service", "uapp-gnome-firefox\\x2desr-4242.scope",
        "uapp-org.gnome.Terminal.slice/vte-spawn-5f1e0b3c.scope", "usnap.firefox.firefox.2d8b1a.scope",
        "uapp-org.kde.kate-autostart.service", "sexample.service", "ssystem-getty.slice/getty@tty1.service",
        "suser@4242.service", "!", "r", "!")
    seeds["long-names"] = records(*[kind + prefix + "x" * (n - len(prefix) - len(suffix)) + suffix
                                     for n in (255, 256, 1000, 3000, 4000)
                                     for kind, prefix, suffix in (("u", "app-", ".scope"), ("s", "npt-", ".service"))])
    seeds["not-text"] = records(b"uapp-\xff\xfe.scope", b"uapp-gnome-org.example.\xc3(-1.scope", b"snpt-\xff.service",
                                b"u\xed\xa0\x80.slice/app-a.b-1.scope", "uapp-org.example.\u202eevil-1.scope")
    seeds["deep"] = records("u" + "/".join(f"n{i}.slice" for i in range(40)) + "/app-org.example.Deep-1.scope",
                            "s" + "/".join(f"d{i}-" + "y" * 300 + ".slice" for i in range(12)) + "/deep.service", "!", "r")
    settings = read("settings/data/org.netpermd.Settings.desktop")
    seeds["desktop-files"] = records(
        "dorg.netpermd.Settings.desktop\x01" + settings,
        "dorg.example.Maps.desktop\x01[Desktop Entry]\nType=Application\nName=Maps\nName[de]=Karten\nIcon=org.example.Maps\n"
        "Exec=/usr/bin/false\n",
        "dorg.example.Hidden.desktop\x01[Desktop Entry]\nType=Application\nName=Hidden\nNoDisplay=true\n",
        "dorg.example.Link.desktop\x01[Desktop Entry]\nType=Link\nName=Link\n", "uapp-gnome-org.example.Maps-1.scope")
    seeds["desktop-hostile"] = records(
        "dorg.example.Bank.desktop\x01[Desktop Entry]\nName=\x1b[2J\x1b]0;owned\x07Bank\\n\\s\nExec=rm -rf ~\n",
        b"dorg.example.Junk.desktop\x01\xff\xfe\x00\x01[Desktop Entry]",
        "dorg.example.Names.desktop\x01[Desktop Entry]\n" + "".join(f"Name[l{i}]={i}\n" for i in range(100)) + "[unclosed\n",
        b"dorg.example.\xff.desktop\x01[Desktop Entry]\nName=NotText\n",
        "lorg.example.Zero.desktop", "forg.example.Fifo.desktop", "Dorg.example.Dir.desktop",
        "dorg.example.Late.desktop\x01[Desktop Entry]\nName=Late\n", "xorg.example.Late.desktop", "!")
    # Apart: larger than `make fuzz`'s -max_len, which cuts a seed to it.
    seeds["desktop-over-limit"] = records("dorg.example.Over.desktop\x01[Desktop Entry]\nName=Over\n" + "#" * 65536 + "\n",
                                          "dorg.example.At.desktop\x01[Desktop Entry]\nName=At\n" + "#" * 65509 + "\n")
    return seeds


def main():
    check = "--check" in sys.argv[1:]
    want = {"engine": engine_seeds(), "config": config_seeds(), "decisions": decisions_seeds(),
            "classify": classify_seeds(), "watch": watch_seeds()}
    stale = []
    for target, seeds in want.items():
        d = os.path.join(CORPUS, target)
        have = set(os.listdir(d)) if os.path.isdir(d) else set()
        for name, text in seeds.items():
            path = os.path.join(d, name)
            data = text if isinstance(text, bytes) else text.encode("utf-8")
            if check:
                if name not in have or open(path, "rb").read() != data:
                    stale.append(path)
            else:
                os.makedirs(d, exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
        for extra in sorted(have - set(seeds)):
            if check:
                stale.append(os.path.join(d, extra))
            else:
                os.remove(os.path.join(d, extra))
    if stale:
        print("Fuzz/corpus is stale (run python3 Fuzz/seeds.py):", *[os.path.relpath(p, ROOT) for p in stale],
              sep="\n  ", file=sys.stderr)
        return 1
    if not check:
        print("seeds:", ", ".join(f"{t} {len(s)}" for t, s in want.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
