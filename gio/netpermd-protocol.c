// SPDX-License-Identifier: LGPL-2.1-or-later
/* The subscription's lines as the module reads them. */
#include "netpermd-protocol.h"

#include "netpermd-json.h"

#include <string.h>
#include <sys/stat.h>

/* This process's network namespace, as the inode of /proc/self/ns/net (0 when unknown). */
static guint64
own_netns (void)
{
  struct stat st;
  return stat ("/proc/self/ns/net", &st) == 0 ? (guint64)st.st_ino : 0;
}

/* The app's own verdict among a snapshot's or resync's `apps`; under `SUBSCRIBE self` the only one there, whose
 * name is the app's from now on when a reload made the process another app (`*app_out`). */
static gboolean
find_verdict (JsonObject *event, const char *app, char **app_out, NetpermdVerdict *verdict)
{
  JsonArray *a = netpermd_json_array (event, "apps");
  if (!app || !a)
    return FALSE;
  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      JsonObject *v = json_array_get_object_element (a, i);
      if (v && g_strcmp0 (netpermd_json_string (v, "app"), app) == 0)
        return netpermd_verdict_read (v, verdict);
    }
  JsonObject *only = json_array_get_length (a) == 1 ? json_array_get_object_element (a, 0) : NULL;
  if (!only || !netpermd_json_string (only, "app") || !netpermd_verdict_read (only, verdict))
    return FALSE;
  if (app_out)
    *app_out = g_strdup (netpermd_json_string (only, "app"));
  return TRUE;
}

NetpermdLine
netpermd_protocol_read (JsonParser *parser, const char *line, gsize length, const char *app, char **app_out,
                        NetpermdVerdict *verdict, GError **error)
{
  g_autoptr (GError) parse_error = NULL;
  if (!json_parser_load_from_data (parser, line, (gssize)length, &parse_error))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "netpermd sent a line that is not JSON: %s",
                   parse_error->message);
      return NETPERMD_LINE_ERROR;
    }
  JsonNode *root = json_parser_get_root (parser);
  if (!root || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "netpermd sent a line that is not an object");
      return NETPERMD_LINE_ERROR;
    }
  JsonObject *o = json_node_get_object (root);
  const char *event = netpermd_json_string (o, "event");
  if (event)
    {
      if (strcmp (event, "snapshot") == 0 || strcmp (event, "resync") == 0)
        return find_verdict (o, app, app_out, verdict) ? NETPERMD_LINE_VERDICT : NETPERMD_LINE_OTHER;
      /* Under `SUBSCRIBE self` every app event is the process's own app: one of another name is the app a reload
       * made it (`[App gapp]` renamed, an `[App]` added for a process under `[Defaults]`). */
      const char *named = netpermd_json_string (o, "app");
      if (strcmp (event, "app") == 0 && app && named && netpermd_verdict_read (o, verdict))
        {
          if (g_strcmp0 (named, app) != 0 && app_out)
            *app_out = g_strdup (named);
          return NETPERMD_LINE_VERDICT;
        }
      return NETPERMD_LINE_OTHER;
    }
  gboolean ok;
  if (netpermd_json_has_bool (o, "ok", &ok) && !ok)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "netpermd refused %.*s: %s: %s",
                   (int)strlen (NETPERMD_SUBSCRIBE) - 1, NETPERMD_SUBSCRIBE,
                   netpermd_json_string (o, "error") ? netpermd_json_string (o, "error") : "?",
                   netpermd_json_string (o, "message") ? netpermd_json_string (o, "message") : "");
      return NETPERMD_LINE_ERROR;
    }
  const char *own = netpermd_json_string (o, "app");
  if (json_object_has_member (o, "subscribed") && own)
    {
      /* The daemon's verdicts are about its namespace's links: a process with a namespace of its own
       * (PrivateNetwork=yes, bwrap --unshare-net, firejail --net=none) is not told them; GLib's own monitor sees its
       * links. */
      const char *ns = netpermd_json_string (o, "netns");
      guint64 mine = own_netns ();
      if (ns && mine && g_ascii_strtoull (ns, NULL, 10) != mine)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                       "netpermd answers for another network namespace (net:[%s]; this process is in net:[%" G_GUINT64_FORMAT
                       "]): its verdicts are not about this process's links",
                       ns, mine);
          return NETPERMD_LINE_ERROR;
        }
      *app_out = g_strdup (own);
      return NETPERMD_LINE_ACK;
    }
  return NETPERMD_LINE_OTHER;
}

char *
netpermd_reach_request (GInetAddress *address, guint wait_s)
{
  g_autofree char *text = g_inet_address_to_string (address);
  return wait_s ? g_strdup_printf ("REACH %s %u\n", text, wait_s) : g_strdup_printf ("REACH %s\n", text);
}

NetpermdReach
netpermd_reach_reply (JsonParser *parser, const char *line, gsize length, GError **error)
{
  if (!json_parser_load_from_data (parser, line, (gssize)length, NULL))
    return NETPERMD_REACH_UNASKED;
  JsonNode *root = json_parser_get_root (parser);
  JsonObject *o = root && JSON_NODE_HOLDS_OBJECT (root) ? json_node_get_object (root) : NULL;
  gboolean ok;
  NetpermdVerdict v = { 0 };
  if (!o || !netpermd_json_has_bool (o, "ok", &ok) || !ok || !netpermd_verdict_read (o, &v))
    return NETPERMD_REACH_UNASKED;
  if (v.available)
    {
      netpermd_verdict_clear (&v);
      return NETPERMD_REACH_YES;
    }
  /* The daemon's sentence names the link the destination's traffic would leave by. */
  gboolean unrouted = g_strcmp0 (netpermd_json_string (o, "reason"), "routed-elsewhere") == 0;
  g_set_error_literal (error, G_IO_ERROR, v.code, v.message ? v.message : "netpermd says no");
  netpermd_verdict_clear (&v);
  return unrouted ? NETPERMD_REACH_UNROUTED : NETPERMD_REACH_NO;
}
