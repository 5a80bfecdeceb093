# SPDX-License-Identifier: LGPL-2.1-or-later
"""Figure 5, memory: RSS at idle (beside the echo server's), with the fan-out's subscribers, after a million queries
(BENCHMARKS.md)."""

from ..common import APP, log, memory_breakdown

PHASE = "memory"


class Memory:
    def bench_memory(self):
        c = self.c
        log(f"memory: {c['mem_total']} queries")
        rss = self.results["rss_kb"]
        rss["before_queries"] = self.rss_kb(self.daemon.pid)
        warm = self.qclient(self.sock, f"QUERY {APP}", 8, c["mem_warm"], 0)
        rss["after_warm"] = self.rss_kb(self.daemon.pid)
        rest = self.qclient(self.sock, f"QUERY {APP}", 8, c["mem_total"] - c["mem_warm"], 0)
        rss["after_all_queries"] = self.rss_kb(self.daemon.pid)
        self.results["memory_queries"] = {"warm": warm, "rest": rest}
        self.results["memory_after_queries"] = memory_breakdown(self.daemon.pid)


def rows(r, smoke, target):
    """This figure's rows of the table (none if its phase did not run); `target` records a target met or missed."""
    rows = []
    fo = r.get("fanout", {})
    rss = r["rss_kb"]
    mem = r["memory_idle"]
    rows.append(("5 RSS idle after start-up (MiB)", f"{rss['idle'] / 1024:.1f}",
                 f"echo server: {rss['echo_server'] / 1024:.1f}",
                 f"anon {mem['anonymous'] / 1024:.1f}, file-backed {(mem['rss'] - mem['anonymous']) / 1024:.1f}, "
                 f"PSS {mem['pss'] / 1024:.1f}",
                 "< 8 MiB", target("RSS idle < 8 MiB", rss["idle"] < 8 * 1024, f"{rss['idle'] / 1024:.1f} MiB")))
    if fo:
        nmax = max(int(k.split("_")[1]) for k in fo if k.startswith("netpermd_"))
        rows.append((f"5 RSS with {nmax} subscribers (MiB)", f"{rss[f'subscribers_{nmax}'] / 1024:.1f}",
                     f"idle: {rss['idle'] / 1024:.1f}",
                     f"+{(rss[f'subscribers_{nmax}'] - rss['idle']) / nmax:.2f} kB per subscriber", "", ""))
    if "memory_queries" in r:
        growth = rss["after_all_queries"] - rss["after_warm"]
        mq = r["memory_queries"]
        ma = r["memory_after_queries"]
        nq = mq["warm"]["replies"] + mq["rest"]["replies"]
        rows.append((f"5 RSS after {nq} queries (MiB)", f"{rss['after_all_queries'] / 1024:.1f}",
                     f"after the first {mq['warm']['replies']}: {rss['after_warm'] / 1024:.1f}",
                     f"growth {growth:+d} kB; anon {ma['anonymous'] / 1024:.1f}, "
                     f"file-backed {(ma['rss'] - ma['anonymous']) / 1024:.1f}", "< 8 MiB; no growth (<= 64 kB)",
                     # Both targets recorded; the row says met only if both are.
                     "met" if (target("RSS after 1,000,000 queries < 8 MiB", rss["after_all_queries"] < 8 * 1024,
                                      f"{rss['after_all_queries'] / 1024:.1f} MiB") == "met")
                     & (target("no RSS growth after 1,000,000 queries", growth <= 64, f"{growth:+d} kB") == "met")
                     else "MISSED"))
    return rows
