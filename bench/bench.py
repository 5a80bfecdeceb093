#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""netpermd benchmarks, each figure beside its physical baseline measured in the same run.

    python3 bench/bench.py --bin DIR            # full run: table on stdout, bench/results/latest.json
    python3 bench/bench.py --bin DIR --smoke    # tiny counts: checks the harness end to end (not performance)
    python3 bench/bench.py --bin DIR --compare OLD_DIR --rounds 3 --only decide,soak
                                                # two builds in the same run, in turn: a table per run

Needs root (network namespaces), gcc, ip, socat. Everything happens in a namespace of its own
(npbench-PID) with veth pairs and on Unix sockets under a temporary directory; the host's links are never
touched. Every loop is bounded in count and time, and whatever was started is stopped and the namespace
deleted on the way out (exceptions, SIGINT, SIGTERM, and a global alarm included). Python standard library
only; the load generators and baselines are the C programs next to this file, compiled with gcc -O2 into
.build/bench.
"""

import argparse
import json
import os
import shutil
import signal
import sys

# The parts are in bench/netpermbench: common.py (what every figure shares) and figures/fNN_NAME.py (one figure each:
# its set-up, measurement, rows and targets). No bytecode is left beside them (root runs this in the source tree).
sys.dont_write_bytecode = True
from netpermbench.common import HERE, ROOT, PHASES, BenchError, build_rows, machine, render  # noqa: E402
from netpermbench.figures import TABLE_ORDER, Bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"), help="where netpermd and netpermctl are")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: check the harness, not the performance")
    ap.add_argument("--only", help=f"comma-separated phases to run (default all: {','.join(PHASES)})")
    ap.add_argument("--compare", metavar="OLD_BIN", help="another build's netpermd and netpermctl (the one before): "
                    "each round runs the phases with it and with --bin in turn, its order alternating")
    ap.add_argument("--rounds", type=int, default=2, help="with --compare: how many times each build runs (default 2)")
    ap.add_argument("--out", help="JSON results (default bench/results/latest.json; smoke.json with --smoke, "
                    "partial.json with --only)")
    args = ap.parse_args()
    default = "smoke.json" if args.smoke else "partial.json" if args.only else "latest.json"
    out = args.out or os.path.join(HERE, "results", default)

    def on_signal(signo, _frame):
        raise SystemExit(f"signal {signo}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    def on_alarm(_signo, _frame):
        raise BenchError("the benchmark ran past its time limit")
    signal.signal(signal.SIGALRM, on_alarm)

    bench = Bench(args)
    signal.alarm(bench.c["alarm_s"])
    ok = False
    try:
        results = bench.main()
        if args.compare:
            # One table: each run's rows, its build, round and the load average as it began before each figure.
            rows, targets = [], []
            for r in results["runs"]:
                more, t = build_rows(r["results"], args.smoke, TABLE_ORDER)
                head = f"[{r['build']} {r['round']}, load {r['load'][0]:.1f}] "
                rows += [(head + x[0],) + tuple(x[1:]) for x in more]
                targets += [dict(v, target=head + v["target"]) for v in t]
        else:
            rows, targets = build_rows(results, args.smoke, TABLE_ORDER)
        ok = True
    except BenchError as e:
        print(f"bench: FAILED: {e}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, SystemExit) as e:
        print(f"bench: interrupted ({e or 'SIGINT'})", file=sys.stderr)
        return 130
    finally:
        signal.alarm(0)
        bench.cleanup()
        if ok or not os.listdir(bench.dir):
            shutil.rmtree(bench.dir, ignore_errors=True)
        else:
            print(f"bench: logs kept in {bench.dir}", file=sys.stderr)
    m = machine()
    report = {"mode": "smoke" if args.smoke else "full", "machine": m, "counts": bench.c, "targets": targets,
              "table": [dict(zip(("figure", "netpermd", "baseline", "comparison", "target", "met"), r)) for r in rows],
              "results": results}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"netpermd benchmarks ({report['mode']}) — {m['date']}; {m['nproc']} CPUs, {m['cpu']}, "
          f"kernel {m['kernel']}; {results['seconds']} s")
    if args.smoke:
        # Tiny counts say nothing about performance: no verdicts.
        rows = [r[:5] + ("",) for r in rows]
    print(render(rows))
    if args.smoke:
        print("\nsmoke mode: the harness works end to end; tiny counts, so the figures say nothing about performance")
    else:
        missed = [t for t in targets if not t["met"]]
        print(f"\ntargets met: {len(targets) - len(missed)} of {len(targets)}"
              + ("".join(f"\n  missed: {t['target']} ({t['detail']})" for t in missed)))
    print(f"results: {os.path.relpath(out, os.getcwd())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
