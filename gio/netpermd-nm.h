// SPDX-License-Identifier: LGPL-2.1-or-later
/* NetworkManager's own `Connectivity` (its captive-portal check), where NetworkManager runs on the system bus:
 * the module caps its FULL by it, so a captive portal still shows as PORTAL or LIMITED. */
#pragma once

#include <gio/gio.h>

typedef struct _NetpermdNM NetpermdNM;

/* Called from the context of netpermd_nm_new()'s caller when the connectivity changed. */
typedef void (*NetpermdNMFunc) (gpointer user_data);

/* Reads the property now (waiting at most `timeout_ms`) and follows it. NULL when there is no system bus. */
NetpermdNM *netpermd_nm_new (int timeout_ms, NetpermdNMFunc func, gpointer user_data);

/* NMConnectivityState (0 unknown, 1 none, 2 portal, 3 limited, 4 full), or -1 while NetworkManager does not run. */
gint netpermd_nm_connectivity (NetpermdNM *nm);

void netpermd_nm_free (NetpermdNM *nm);
