// SPDX-License-Identifier: LGPL-2.1-or-later
/* Whether the kernel has a route for an address, as a connect() of the app would find it. */
#pragma once

#include <gio/gio.h>

/* TRUE when the kernel routes `address` (an inet socket address) somewhere, else FALSE and `error` with what
 * connect() would say (G_IO_ERROR_NETWORK_UNREACHABLE, G_IO_ERROR_HOST_UNREACHABLE...). */
gboolean netpermd_reach_route (GSocketAddress *address, GError **error);
