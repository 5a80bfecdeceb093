# SPDX-License-Identifier: LGPL-2.1-or-later
"""netpermd-settings: every app, its permission and its data, as iOS's Settings → Cellular Data shows them."""
