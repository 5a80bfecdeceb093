// SPDX-License-Identifier: LGPL-2.1-or-later
/* What GLib reports for one app, read from netpermd's verdict (docs/PROTOCOL.md, QUERY): pure, no I/O. */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

typedef struct {
  gboolean available;
  /* The link the app's traffic leaves by is metered or roaming (`via`, else the egress link). */
  gboolean metered;
  /* The ifindex of `via`, 0 when not available: a route moving to another link is a change for the app. */
  gint64 via;
  /* Why not, when not available: the GError can_reach() fails with. */
  GIOErrorEnum code;
  char *message;
} NetpermdVerdict;

/* Reads a verdict object (a snapshot's `apps` member, an `app` event) into `out`, replacing what it held. FALSE
 * (and `out` untouched) when it is not a verdict. */
gboolean netpermd_verdict_read (JsonObject *object, NetpermdVerdict *out);

gboolean netpermd_verdict_equal (const NetpermdVerdict *a, const NetpermdVerdict *b);
void netpermd_verdict_copy (const NetpermdVerdict *from, NetpermdVerdict *to);
void netpermd_verdict_clear (NetpermdVerdict *v);

/* NetworkManager's NMConnectivityState, as its `Connectivity` property says (-1: NetworkManager does not run). */
GNetworkConnectivity netpermd_connectivity (gboolean available, gint nm_connectivity);

#define NETPERMD_NM_NONE_MESSAGE "NetworkManager says this machine has no network connectivity"

/* GLib's network-available means FULL, LIMITED or PORTAL: a verdict that says ok where NetworkManager says there is
 * no connectivity (`none`, so LOCAL) is not available, for NetworkManager's reason. */
void netpermd_verdict_cap (NetpermdVerdict *v, GNetworkConnectivity connectivity);
