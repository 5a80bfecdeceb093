# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 2, QUERY round trip over 1, 8 and 64 connections (and 8 without the reply cache), beside an echo server
(BENCHMARKS.md)."""

from ..common import APP, log, triple

PHASE = "query"


class Query:
    def bench_query(self):
        c = self.c
        req = f"QUERY {APP}"
        echo_sock = self.echo_sock
        out = {}
        for clients, total in ((1, c["q1"]), (8, c["q8"]), (64, c["q64"])):
            log(f"queries: {clients} client(s), {total} each against netpermd and the echo server")
            out[f"netpermd_{clients}"] = self.qclient(self.sock, req, clients, total)
            out[f"echo_{clients}"] = self.qclient(echo_sock, req, clients, total)
        # The same query in two spellings, alternating on each connection, so none is answered from the
        # per-connection reply cache: every request is parsed, matched, decided and encoded.
        log(f"queries: 8 clients, {c['q8']} each, uncached")
        out["netpermd_8_uncached"] = self.qclient(self.sock, f"{req}|{req.lower()}", 8, c["q8"])
        self.results["query"] = out


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    if "query" in r:
        q = r["query"]
        for n in (1, 8, 64):
            a, b = q[f"netpermd_{n}"], q[f"echo_{n}"]
            ratio = a["rtt_us"]["median"] / b["rtt_us"]["median"]
            tput = a["throughput"] / b["throughput"]
            tgt, met = "", ""
            if n == 1:
                tgt = "median within 2x of echo"
                met = target("query median within 2x of echo", ratio <= 2, f"ratio {ratio:.2f}")
            elif n == 8:
                tgt = "throughput >= 0.5x echo"
                met = target("8-client throughput >= half of echo", tput >= 0.5, f"ratio {tput:.2f}")
            rows.append((f"2 QUERY round trip, {n} client{'s' if n > 1 else ''} (µs)", triple(a["rtt_us"], "us"),
                         "echo server: " + triple(b["rtt_us"], "us"),
                         f"median x{ratio:.2f}; {a['throughput']:.0f}/s vs {b['throughput']:.0f}/s = x{tput:.2f}",
                         tgt, met))
        if "netpermd_8_uncached" in q:
            a, b = q["netpermd_8_uncached"], q["echo_8"]
            tput = a["throughput"] / b["throughput"]
            rows.append(("2 QUERY round trip, 8 clients, no reply cache (µs)", triple(a["rtt_us"], "us"),
                         "echo server: " + triple(b["rtt_us"], "us"),
                         f"median x{a['rtt_us']['median'] / b['rtt_us']['median']:.2f}; "
                         f"{a['throughput']:.0f}/s vs {b['throughput']:.0f}/s = x{tput:.2f}",
                         "throughput >= 0.5x echo",
                         target("8-client uncached throughput >= half of echo", tput >= 0.5, f"ratio {tput:.2f}")))
    return rows
