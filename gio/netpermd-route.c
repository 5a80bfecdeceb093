// SPDX-License-Identifier: LGPL-2.1-or-later
#include "netpermd-route.h"

#include <errno.h>

void
netpermd_route_refused (int e, const char *destination, GError **error)
{
  /* The kernel's errno names the route type (fib_props / ip6_rt_type_to_error), not a reason an app knows:
   * "Invalid argument" for a blackhole, "Permission denied" for a prohibit route. GLib's own monitor answers
   * HOST_UNREACHABLE for an unreachable route and knows no other kind, so the others are the network's. */
  switch (e)
    {
    case ENETUNREACH:
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NETWORK_UNREACHABLE, "no route to %s: Network is unreachable",
                   destination);
      return;
    case EHOSTUNREACH:
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_HOST_UNREACHABLE, "no route to %s: an unreachable route refuses it",
                   destination);
      return;
    case EINVAL:
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NETWORK_UNREACHABLE,
                   "no route to %s: a blackhole route drops its traffic", destination);
      return;
    case EACCES:
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NETWORK_UNREACHABLE, "no route to %s: a prohibit route refuses it",
                   destination);
      return;
    default:
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NETWORK_UNREACHABLE, "no route to %s: the kernel refuses it (%s)",
                   destination, g_strerror (e));
      return;
    }
}
