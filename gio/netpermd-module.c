// SPDX-License-Identifier: LGPL-2.1-or-later
/* libgionetpermd.so: the GIO module's entry points (gio-querymodules reads g_io_module_query). */
#include <gio/gio.h>

#include "netpermd-monitor.h"

G_MODULE_EXPORT void
g_io_module_load (GIOModule *module)
{
  /* Resident once loaded: the monitor's sources and D-Bus subscriptions call into this code for as long as the
   * process lives. */
  g_type_module_use (G_TYPE_MODULE (module));
  netpermd_network_monitor_register (module);
}

G_MODULE_EXPORT void
g_io_module_unload (GIOModule *module G_GNUC_UNUSED)
{
}

G_MODULE_EXPORT char **
g_io_module_query (void)
{
  char *points[] = { G_NETWORK_MONITOR_EXTENSION_POINT_NAME, NULL };
  return g_strdupv (points);
}
