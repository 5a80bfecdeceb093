// SPDX-License-Identifier: LGPL-2.1-or-later
/* can_reach()'s two sources: netpermd's judgment of one destination (REACH, on a connection of its own), and, when
 * the daemon cannot be asked, whether the kernel has a route for it at all. */
#pragma once

#include <gio/gio.h>

#include "netpermd-protocol.h"

/* TRUE when the kernel routes `address` (an inet socket address) somewhere, else FALSE and `error` with the route
 * it refused by (netpermd_route_refused: G_IO_ERROR_NETWORK_UNREACHABLE, G_IO_ERROR_HOST_UNREACHABLE). */
gboolean netpermd_reach_route (GSocketAddress *address, GError **error);

/* Asks the daemon at `path` about `address` and blocks at most `timeout_us`; the answer comes at once (a prompt it
 * raises is answered later). */
NetpermdReach netpermd_reach_ask (const char *path, GInetAddress *address, gint64 timeout_us, GError **error);

/* The same without blocking, from the thread-default main context: the reply may wait up to `wait_s` for the
 * person to answer the prompt the question raised. Cancelling closes the connection. */
void netpermd_reach_ask_async (const char *path, GInetAddress *address, guint wait_s, GCancellable *cancellable,
                               GAsyncReadyCallback callback, gpointer user_data);
/* NETPERMD_REACH_UNASKED with `error` G_IO_ERROR_CANCELLED when cancelled. */
NetpermdReach netpermd_reach_ask_finish (GAsyncResult *result, GError **error);

/* The longest REACH reply read (a verdict is about 1 KiB). */
#define NETPERMD_REACH_MAX_REPLY (64 * 1024)
