// SPDX-License-Identifier: LGPL-2.1-or-later
/* A verdict as GLib reports it: network-available, network-metered, the link, and can_reach()'s error. */
#include "netpermd-verdict.h"

#include "netpermd-json.h"

#include <string.h>

/* A dimension of the policy as a message names it. */
static const char *
dimension_text (const char *dimension)
{
  return strcmp (dimension, "metered") == 0 ? "metered links" : dimension;
}

/* Why the app may not use `dimension`, from its effective permission and where that comes from. */
static const char *
why_not (JsonObject *verdict, const char *dimension)
{
  const char *permission = netpermd_json_string (netpermd_json_object (verdict, "permissions"), dimension);
  const char *source = netpermd_json_string (netpermd_json_object (verdict, "sources"), dimension);
  if (g_strcmp0 (source, "no-agent") == 0)
    return "its policy says ask and no agent is there to ask the user";
  if (g_strcmp0 (permission, "ask") == 0)
    return "its policy says ask and the user has not decided";
  if (g_strcmp0 (source, "decision") == 0)
    return "a decision denies it";
  /* Once lasts until the daemon restarts or the policy changes (PROTOCOL.md), whoever decided. */
  if (g_strcmp0 (source, "once") == 0)
    return "a decision denies it until netpermd restarts or its policy changes";
  if (g_strcmp0 (source, "user-decision") == 0)
    return "its user's decision denies it";
  if (g_strcmp0 (source, "user-once") == 0)
    return "its user's decision denies it until netpermd restarts or its policy changes";
  if (g_strcmp0 (source, "budget") == 0)
    return "its metered budget for this period is used up";
  return "its policy denies it";
}

/* "maps may not use wwan: its policy denies it", or with several "... wwan (why) or ethernet (why)". */
static char *
kinds_message (JsonObject *verdict, const char *app, JsonArray *kinds)
{
  guint n = kinds ? json_array_get_length (kinds) : 0;
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "%s may not use ", app);
  if (n == 0)
    {
      g_string_append (s, "the network: no usable link is one it may use");
      return g_string_free (s, FALSE);
    }
  for (guint i = 0; i < n; i++)
    {
      const char *d = json_array_get_string_element (kinds, i);
      if (!d)
        continue;
      if (i > 0)
        g_string_append (s, i + 1 == n ? " or " : ", ");
      if (n == 1)
        g_string_append_printf (s, "%s: %s", dimension_text (d), why_not (verdict, d));
      else
        g_string_append_printf (s, "%s (%s)", dimension_text (d), why_not (verdict, d));
    }
  return g_string_free (s, FALSE);
}

/* awaiting-decision: the person is being asked (asking about itself raised the prompt, as can_reach() does), so the
 * app waits for them: "maps may not use wwan or metered links yet: waiting for your answer". */
static char *
pending_message (const char *app, JsonArray *kinds)
{
  guint n = kinds ? json_array_get_length (kinds) : 0;
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "%s may not use ", app);
  for (guint i = 0; i < n; i++)
    {
      const char *d = json_array_get_string_element (kinds, i);
      if (!d)
        continue;
      if (i > 0)
        g_string_append (s, i + 1 == n ? " or " : ", ");
      g_string_append (s, dimension_text (d));
    }
  if (n == 0)
    g_string_append (s, "the network");
  g_string_append (s, " yet: waiting for your answer");
  return g_string_free (s, FALSE);
}

static const char *const families[] = { "ipv4", "ipv6" };

/* routed-elsewhere: the egress that keeps the app off the network, and the link it could bind to instead. */
static void
routed_elsewhere (JsonObject *verdict, const char *app, NetpermdVerdict *out)
{
  JsonObject *egress = netpermd_json_object (verdict, "egress");
  const char *bind = netpermd_json_string (netpermd_json_object (verdict, "bind_to"), "name");
  g_autofree char *instead = bind ? g_strdup_printf ("; it may use %s", bind) : g_strdup ("");

  /* A usable link of a kind it may not use: a permission, as for denied. */
  for (guint i = 0; i < G_N_ELEMENTS (families); i++)
    {
      JsonObject *route = netpermd_json_object (egress, families[i]);
      const char *name = netpermd_json_string (route, "name"), *kind = netpermd_json_string (route, "kind");
      if (!name || !kind || !netpermd_json_bool (route, "usable") || netpermd_json_bool (route, "allowed"))
        continue;
      const char *permission = netpermd_json_string (netpermd_json_object (verdict, "permissions"), kind);
      const char *dimension = g_strcmp0 (permission, "allow") != 0 ? kind : "metered";
      out->code = G_IO_ERROR_PERMISSION_DENIED;
      out->message = g_strdup_printf ("%s may not use %s: %s (the kernel routes its traffic by %s%s)", app,
                                      dimension_text (dimension), why_not (verdict, dimension), name, instead);
      return;
    }
  out->code = G_IO_ERROR_NETWORK_UNREACHABLE;
  for (guint i = 0; i < G_N_ELEMENTS (families); i++)
    {
      JsonObject *route = netpermd_json_object (egress, families[i]);
      const char *blocked = netpermd_json_string (route, "blocked"), *name = netpermd_json_string (route, "name");
      if (blocked)
        out->message = g_strdup_printf ("the kernel routes %s's traffic into a %s route%s", app, blocked, instead);
      else if (name)
        out->message = g_strdup_printf ("the kernel routes %s's traffic by %s, which is not usable%s", app, name,
                                        instead);
      if (out->message)
        return;
    }
  out->message = g_strdup_printf ("the kernel has no route for %s's traffic%s", app, instead);
}

/* budget-exhausted: not available, with how much of the budget is used and when metered links open again. */
static void
budget_exhausted (JsonObject *verdict, const char *app, NetpermdVerdict *out)
{
  JsonObject *budget = netpermd_json_object (verdict, "budget");
  out->code = G_IO_ERROR_PERMISSION_DENIED;
  if (!budget)
    {
      out->message = g_strdup_printf ("%s may not use metered links: its metered budget for this period is used up", app);
      return;
    }
  g_autofree char *limit = g_format_size_full ((guint64) netpermd_json_int (budget, "limit"), G_FORMAT_SIZE_IEC_UNITS);
  const char *until = netpermd_json_string (budget, "period_end");
  g_autofree char *then = until ? g_strdup_printf ("; they open again on %s", until) : g_strdup ("");
  /* Used up is used up: the counters may stop short of the budget (the kernel refused the packet that would have
   * crossed it, which no counter saw), and "used 3.0 KiB of 4.0 KiB" read as room left. `used` is there only for those
   * who may see the app's usage. */
  out->message = g_strdup_printf ("%s may not use metered links: it has used up its metered budget of %s for this "
                                  "period%s", app, limit, then);
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
  v.metered = netpermd_json_bool (leaves, "metered");
  if (v.available)
    v.via = netpermd_json_int (via, "index");
  else if (strcmp (reason, "no-network") == 0)
    {
      v.code = G_IO_ERROR_NETWORK_UNREACHABLE;
      v.message = g_strdup_printf ("%s cannot use the network: no link is usable", app);
    }
  else if (strcmp (reason, "denied") == 0)
    {
      v.code = G_IO_ERROR_PERMISSION_DENIED;
      v.message = kinds_message (object, app, netpermd_json_array (object, "denied_kinds"));
    }
  else if (strcmp (reason, "awaiting-decision") == 0)
    {
      v.code = G_IO_ERROR_PERMISSION_DENIED;
      v.message = pending_message (app, netpermd_json_array (object, "pending_kinds"));
    }
  else if (strcmp (reason, "routed-elsewhere") == 0)
    routed_elsewhere (object, app, &v);
  else if (strcmp (reason, "budget-exhausted") == 0)
    budget_exhausted (object, app, &v);
  else if (strcmp (reason, "starting") == 0)
    {
      v.code = G_IO_ERROR_NETWORK_UNREACHABLE;
      v.message = g_strdup ("netpermd is still starting");
    }
  else
    {
      /* A reason of a newer daemon: not available, in its own words. */
      v.code = G_IO_ERROR_NETWORK_UNREACHABLE;
      v.message = g_strdup_printf ("%s may not use the network: %s", app, reason);
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
