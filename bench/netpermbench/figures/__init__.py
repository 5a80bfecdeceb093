# SPDX-License-Identifier: LGPL-2.1-or-later
"""The figures, one module each, numbered as BENCHMARKS.md numbers them. A module holds its phase's set-up and
measurement as methods of a class of its own (mixed into `Bench` with the shared `BenchBase`), its `PHASE` name
(`--only`), and `rows(r, smoke, target)`: its rows of the table and the targets they meet or miss."""

from ..common import PHASES, BenchBase
from . import (f01_latency, f02_query, f03_cli, f04_fanout, f05_memory, f06_startup, f07_storm, f08_bigpolicy,
               f09_routes, f10_enforcement, f11_inforce, f12_linkforce, f13_glib, f14_churn, f15_silent, f16_soak,
               f17_decide, f18_steer, f19_reloadq, f20_usage, f21_desktop, f22_execload, f23_execfound, f24_bus, f25_report,
               f26_reportdisk)

FIGURES = [f01_latency, f02_query, f03_cli, f04_fanout, f05_memory, f06_startup, f07_storm, f08_bigpolicy, f09_routes,
           f10_enforcement, f11_inforce, f12_linkforce, f13_glib, f14_churn, f15_silent, f16_soak, f17_decide,
           f18_steer, f19_reloadq, f20_usage, f21_desktop, f22_execload, f23_execfound, f24_bus, f25_report,
           f26_reportdisk]

# The order of the table's rows (and of the targets in the results), as the report has always had it.
TABLE_ORDER = [f01_latency, f02_query, f03_cli, f04_fanout, f05_memory, f06_startup, f07_storm, f08_bigpolicy,
               f10_enforcement, f11_inforce, f17_decide, f18_steer, f19_reloadq, f12_linkforce, f13_glib, f09_routes,
               f14_churn, f21_desktop, f22_execload, f23_execfound, f15_silent, f16_soak, f20_usage, f24_bus, f25_report,
               f26_reportdisk]


def _mixin(module):
    return next(v for v in vars(module).values() if isinstance(v, type) and v.__module__ == module.__name__)


class Bench(*(_mixin(f) for f in FIGURES), BenchBase):
    """The whole bench: the shared set-up and helpers, and every figure's `bench_PHASE`."""

assert sorted(f.PHASE for f in FIGURES) == sorted(PHASES), "every phase is one figure's"
