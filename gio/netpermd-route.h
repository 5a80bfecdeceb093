// SPDX-License-Identifier: LGPL-2.1-or-later
/* A destination the kernel will not route, as can_reach() says it. Pure: an errno in, a GError out. */
#pragma once

#include <gio/gio.h>

/* Sets `error` for `destination` (an address as text) from what connect() answered for it (`e`): the route type
 * the kernel found, said as a GLib network monitor says an unreachable destination (docs/APPS.md's table). Never
 * G_IO_ERROR_PERMISSION_DENIED, which means netpermd's policy: a prohibit route is the network's, not a permission.
 *   ENETUNREACH (no route; a throw route that ends in none)  G_IO_ERROR_NETWORK_UNREACHABLE
 *   EHOSTUNREACH (an unreachable route)                     G_IO_ERROR_HOST_UNREACHABLE, as GLib's netlink monitor
 *   EINVAL (a blackhole route)                              G_IO_ERROR_NETWORK_UNREACHABLE
 *   EACCES (a prohibit route)                               G_IO_ERROR_NETWORK_UNREACHABLE
 *   anything else                                           G_IO_ERROR_NETWORK_UNREACHABLE, with the errno's words */
void netpermd_route_refused (int e, const char *destination, GError **error);
