# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/bench.py's parts: `common` (what every figure shares) and `figures` (one module a figure)."""
