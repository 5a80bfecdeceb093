// SPDX-License-Identifier: LGPL-2.1-or-later
/* A verdict as GLib reports it: network-available, network-metered, the link, and can_reach()'s error (its code by
 * reason, its words the daemon's). */
#include "netpermd-verdict.h"

#include "netpermd-json.h"

#include <string.h>

static const char *const families[] = { "ipv4", "ipv6" };

/* The GError's code by reason: "not allowed" (PERMISSION_DENIED) or "no network" (NETWORK_UNREACHABLE), as a GLib
 * app tells them apart. routed-elsewhere is a permission when a usable link the app may not use carries it. */
static GIOErrorEnum
code_of (JsonObject *verdict, const char *reason)
{
  if (strcmp (reason, "denied") == 0 || strcmp (reason, "awaiting-decision") == 0
      || strcmp (reason, "budget-exhausted") == 0)
    return G_IO_ERROR_PERMISSION_DENIED;
  if (strcmp (reason, "routed-elsewhere") == 0)
    {
      JsonObject *egress = netpermd_json_object (verdict, "egress");
      for (guint i = 0; i < G_N_ELEMENTS (families); i++)
        {
          JsonObject *route = netpermd_json_object (egress, families[i]);
          if (netpermd_json_string (route, "name") && netpermd_json_bool (route, "usable")
              && !netpermd_json_bool (route, "allowed"))
            return G_IO_ERROR_PERMISSION_DENIED;
        }
    }
  return G_IO_ERROR_NETWORK_UNREACHABLE;
}

gboolean
netpermd_verdict_read (JsonObject *object, NetpermdVerdict *out)
{
  const char *app = netpermd_json_string (object, "app"), *reason = netpermd_json_string (object, "reason");
  gboolean available;
  if (!app || !reason || !netpermd_json_has_bool (object, "available", &available))
    return FALSE;

  NetpermdVerdict v = { .available = available && strcmp (reason, "ok") == 0 };
  JsonObject *via = netpermd_json_object (object, "via");
  JsonObject *egress = netpermd_json_object (object, "egress");
  JsonObject *leaves = via;
  for (guint i = 0; !leaves && i < G_N_ELEMENTS (families); i++)
    {
      JsonObject *route = netpermd_json_object (egress, families[i]);
      if (netpermd_json_string (route, "name"))
        leaves = route;
    }
  /* GLib has no word for roaming: a roaming link costs as a metered one does, so apps that save data on metered
   * links (updaters, sync) save it abroad too. */
  v.metered = netpermd_json_bool (leaves, "metered") || netpermd_json_bool (leaves, "roaming");
  if (v.available)
    v.via = netpermd_json_int (via, "index");
  else
    {
      /* The daemon's sentence (docs/PROTOCOL.md, `message`): the one explanation every face shows. */
      const char *message = netpermd_json_string (object, "message");
      v.code = code_of (object, reason);
      v.message = message ? g_strdup (message) : g_strdup_printf ("%s may not use the network: %s", app, reason);
    }
  netpermd_verdict_clear (out);
  *out = v;
  return TRUE;
}

gboolean
netpermd_verdict_equal (const NetpermdVerdict *a, const NetpermdVerdict *b)
{
  return a->available == b->available && a->metered == b->metered && a->via == b->via && a->code == b->code
         && g_strcmp0 (a->message, b->message) == 0;
}

void
netpermd_verdict_copy (const NetpermdVerdict *from, NetpermdVerdict *to)
{
  netpermd_verdict_clear (to);
  *to = *from;
  to->message = g_strdup (from->message);
}

void
netpermd_verdict_clear (NetpermdVerdict *v)
{
  g_clear_pointer (&v->message, g_free);
  *v = (NetpermdVerdict){ 0 };
}

void
netpermd_verdict_cap (NetpermdVerdict *v, GNetworkConnectivity connectivity)
{
  if (!v->available || connectivity != G_NETWORK_CONNECTIVITY_LOCAL)
    return;
  v->available = FALSE;
  v->code = G_IO_ERROR_NETWORK_UNREACHABLE;
  g_free (v->message);
  v->message = g_strdup (NETPERMD_NM_NONE_MESSAGE);
}

GNetworkConnectivity
netpermd_connectivity (gboolean available, gint nm_connectivity)
{
  if (!available)
    return G_NETWORK_CONNECTIVITY_LOCAL;
  /* NMConnectivityState: 1 none, 2 portal, 3 limited; 0 (unknown), 4 (full) and no NetworkManager leave it FULL. */
  switch (nm_connectivity)
    {
    case 1:
      return G_NETWORK_CONNECTIVITY_LOCAL;
    case 2:
      return G_NETWORK_CONNECTIVITY_PORTAL;
    case 3:
      return G_NETWORK_CONNECTIVITY_LIMITED;
    default:
      return G_NETWORK_CONNECTIVITY_FULL;
    }
}
