// SPDX-License-Identifier: LGPL-2.1-or-later
/* The module's pure parts on the lines netpermd writes: what GLib reports for each verdict, and which lines of a
 * subscription carry the app's own; and what can_reach() says of a route the kernel refuses. Run by `make gio-test`
 * (part of `make test`). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "netpermd-protocol.h"
#include "netpermd-route.h"
#include "netpermd-verdict.h"

#define PERMS_ALL_ALLOW                                                                                                \
  "\"permissions\":{\"wifi\":\"allow\",\"wwan\":\"allow\",\"ethernet\":\"allow\",\"other\":\"allow\","            \
  "\"metered\":\"allow\"}"
#define SOURCES_POLICY                                                                                                 \
  "\"sources\":{\"wifi\":\"policy\",\"wwan\":\"policy\",\"ethernet\":\"policy\",\"other\":\"policy\","             \
  "\"metered\":\"policy\"}"
#define WLAN "{\"index\":3,\"name\":\"wlan0\",\"kind\":\"wifi\",\"metered\":false,\"over\":null"
#define WWAN "{\"index\":4,\"name\":\"wwan0\",\"kind\":\"wwan\",\"metered\":true,\"over\":null"

/* Reads `json` as a verdict; asserts it is one. */
static NetpermdVerdict
read_verdict (const char *json)
{
  g_autoptr (JsonParser) p = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (json_parser_load_from_data (p, json, -1, &error));
  NetpermdVerdict v = { 0 };
  g_assert_true (netpermd_verdict_read (json_node_get_object (json_parser_get_root (p)), &v));
  return v;
}

static void
assert_refused (const char *json, GIOErrorEnum code, const char *message)
{
  NetpermdVerdict v = read_verdict (json);
  g_assert_false (v.available);
  g_assert_cmpint (v.code, ==, code);
  g_assert_cmpstr (v.message, ==, message);
  g_assert_cmpint (v.via, ==, 0);
  netpermd_verdict_clear (&v);
}

static void
test_ok (void)
{
  NetpermdVerdict v = read_verdict ("{\"app\":\"maps\",\"available\":true,\"reason\":\"ok\",\"via\":" WLAN "},"
                                    "\"egress\":{\"ipv4\":" WLAN ",\"usable\":true,\"allowed\":true},\"ipv6\":null},"
                                    "\"bind_to\":null,\"denied_kinds\":[\"wwan\"],\"pending_kinds\":[]," PERMS_ALL_ALLOW
                                    "," SOURCES_POLICY ",\"enforced\":false,\"enforced_why\":\"mode-off\"}");
  g_assert_true (v.available);
  g_assert_false (v.metered);
  g_assert_cmpint (v.via, ==, 3);
  g_assert_null (v.message);
  netpermd_verdict_clear (&v);

  /* Metered is the link the traffic leaves by. */
  v = read_verdict ("{\"app\":\"maps\",\"available\":true,\"reason\":\"ok\",\"via\":" WWAN "},\"egress\":{}}");
  g_assert_true (v.metered);
  g_assert_cmpint (v.via, ==, 4);
  netpermd_verdict_clear (&v);

  /* A roaming link, even one the config calls unmetered, is metered to GLib: it costs as much. */
  v = read_verdict ("{\"app\":\"maps\",\"available\":true,\"reason\":\"ok\",\"via\":{\"index\":4,\"name\":\"wwan0\","
                    "\"kind\":\"wwan\",\"metered\":false,\"roaming\":true,\"over\":null},\"egress\":{}}");
  g_assert_true (v.metered);
  netpermd_verdict_clear (&v);
}

/* The daemon says why (its `message`); the module gives it GLib's code by reason. */
static void
test_no_network (void)
{
  assert_refused ("{\"app\":\"maps\",\"available\":false,\"reason\":\"no-network\",\"via\":null,\"egress\":{\"ipv4\":null,"
                  "\"ipv6\":null},\"denied_kinds\":[],\"pending_kinds\":[],"
                  "\"message\":\"maps cannot use the network: no link is usable\"}",
                  G_IO_ERROR_NETWORK_UNREACHABLE, "maps cannot use the network: no link is usable");
}

static void
test_denied (void)
{
  assert_refused ("{\"app\":\"maps\",\"available\":false,\"reason\":\"denied\",\"via\":null,"
                  "\"egress\":{\"ipv4\":" WWAN ",\"usable\":true,\"allowed\":false},\"ipv6\":null},"
                  "\"denied_kinds\":[\"wwan\"],\"pending_kinds\":[],\"message\":\"maps may not use wwan: its policy denies it\"}",
                  G_IO_ERROR_PERMISSION_DENIED, "maps may not use wwan: its policy denies it");
  /* Roaming=deny on a roaming modem: a permission, in the daemon's words. */
  assert_refused ("{\"app\":\"maps\",\"available\":false,\"reason\":\"denied\",\"via\":null,"
                  "\"egress\":{\"ipv4\":{\"index\":4,\"name\":\"wwan0\",\"kind\":\"wwan\",\"metered\":true,\"roaming\":true,"
                  "\"over\":null,\"usable\":true,\"allowed\":false},\"ipv6\":null},\"denied_kinds\":[\"roaming\"],"
                  "\"pending_kinds\":[],\"message\":\"maps may not use roaming links: its policy denies it\"}",
                  G_IO_ERROR_PERMISSION_DENIED, "maps may not use roaming links: its policy denies it");
  /* A daemon that says nothing: the reason, in few words. */
  assert_refused ("{\"app\":\"maps\",\"available\":false,\"reason\":\"denied\",\"via\":null,\"egress\":{}}",
                  G_IO_ERROR_PERMISSION_DENIED, "maps may not use the network: denied");
}

static void
test_awaiting_decision (void)
{
  assert_refused ("{\"app\":\"maps\",\"available\":false,\"reason\":\"awaiting-decision\",\"via\":null,"
                  "\"egress\":{\"ipv4\":" WWAN ",\"usable\":true,\"allowed\":false},\"ipv6\":null},"
                  "\"denied_kinds\":[],\"pending_kinds\":[\"wwan\"],"
                  "\"message\":\"maps may not use wwan yet: waiting for your answer\"}",
                  G_IO_ERROR_PERMISSION_DENIED, "maps may not use wwan yet: waiting for your answer");
}

static void
test_budget_exhausted (void)
{
  assert_refused ("{\"app\":\"maps\",\"available\":false,\"reason\":\"budget-exhausted\",\"via\":null,\"egress\":{},"
                  "\"message\":\"maps may not use metered links: its metered budget for this period is used up\"}",
                  G_IO_ERROR_PERMISSION_DENIED,
                  "maps may not use metered links: its metered budget for this period is used up");
}

static void
test_routed_elsewhere (void)
{
  /* By a usable link it may not use: a permission. */
  g_autofree char *by_wwan = g_strdup (
      "{\"app\":\"maps\",\"available\":false,\"reason\":\"routed-elsewhere\",\"via\":null,"
      "\"egress\":{\"ipv4\":" WWAN ",\"usable\":true,\"allowed\":false},\"ipv6\":null},\"bind_to\":" WLAN "},"
      "\"message\":\"maps may not use wwan: its policy denies it (the kernel routes its traffic by wwan0; it may use wlan0)\"}");
  assert_refused (by_wwan, G_IO_ERROR_PERMISSION_DENIED,
                  "maps may not use wwan: its policy denies it (the kernel routes its traffic by wwan0; it may use wlan0)");
  NetpermdVerdict v = read_verdict (by_wwan);
  g_assert_true (v.metered);
  netpermd_verdict_clear (&v);
  /* Not a permission: a blocking route, or a link without carrier. */
  assert_refused ("{\"app\":\"maps\",\"available\":false,\"reason\":\"routed-elsewhere\",\"via\":null,"
                  "\"egress\":{\"ipv4\":{\"blocked\":\"blackhole\"},\"ipv6\":null},\"bind_to\":" WLAN "},"
                  "\"message\":\"the kernel routes maps's traffic into a blackhole route; it may use wlan0\"}",
                  G_IO_ERROR_NETWORK_UNREACHABLE, "the kernel routes maps's traffic into a blackhole route; it may use wlan0");
  assert_refused ("{\"app\":\"maps\",\"available\":false,\"reason\":\"routed-elsewhere\",\"via\":null,"
                  "\"egress\":{\"ipv4\":" WLAN ",\"usable\":false,\"allowed\":true}},\"bind_to\":" WWAN "},"
                  "\"message\":\"x\"}",
                  G_IO_ERROR_NETWORK_UNREACHABLE, "x");
}

static void
test_not_a_verdict (void)
{
  g_autoptr (JsonParser) p = json_parser_new ();
  NetpermdVerdict v = { .available = TRUE, .via = 9 };
  for (const char *const *json = (const char *const[]){ "{\"app\":\"maps\"}", "{\"available\":true,\"reason\":\"ok\"}",
                                                        "{\"app\":\"maps\",\"available\":\"yes\",\"reason\":\"ok\"}",
                                                        NULL };
       *json; json++)
    {
      g_assert_true (json_parser_load_from_data (p, *json, -1, NULL));
      g_assert_false (netpermd_verdict_read (json_node_get_object (json_parser_get_root (p)), &v));
      g_assert_cmpint (v.via, ==, 9);
    }
}

static void
test_equal (void)
{
  NetpermdVerdict a = read_verdict ("{\"app\":\"maps\",\"available\":true,\"reason\":\"ok\",\"via\":" WLAN "}}");
  NetpermdVerdict b = { 0 };
  netpermd_verdict_copy (&a, &b);
  g_assert_true (netpermd_verdict_equal (&a, &b));
  /* The same answer by another link is a change: connections on the old one are gone. */
  NetpermdVerdict c = read_verdict ("{\"app\":\"maps\",\"available\":true,\"reason\":\"ok\",\"via\":"
                                    "{\"index\":5,\"name\":\"eth0\",\"kind\":\"ethernet\",\"metered\":false}}");
  g_assert_false (netpermd_verdict_equal (&a, &c));
  netpermd_verdict_clear (&a);
  netpermd_verdict_clear (&b);
  netpermd_verdict_clear (&c);
}

static void
test_connectivity (void)
{
  g_assert_cmpint (netpermd_connectivity (FALSE, 4), ==, G_NETWORK_CONNECTIVITY_LOCAL);
  g_assert_cmpint (netpermd_connectivity (TRUE, -1), ==, G_NETWORK_CONNECTIVITY_FULL);
  g_assert_cmpint (netpermd_connectivity (TRUE, 0), ==, G_NETWORK_CONNECTIVITY_FULL);
  g_assert_cmpint (netpermd_connectivity (TRUE, 1), ==, G_NETWORK_CONNECTIVITY_LOCAL);
  g_assert_cmpint (netpermd_connectivity (TRUE, 2), ==, G_NETWORK_CONNECTIVITY_PORTAL);
  g_assert_cmpint (netpermd_connectivity (TRUE, 3), ==, G_NETWORK_CONNECTIVITY_LIMITED);
  g_assert_cmpint (netpermd_connectivity (TRUE, 4), ==, G_NETWORK_CONNECTIVITY_FULL);
  /* Issue 36, 5: NetworkManager's none with an ok verdict was available with LOCAL connectivity, which GLib's
   * contract does not allow: not available then, for NetworkManager's reason. */
  NetpermdVerdict v = { .available = TRUE };
  netpermd_verdict_cap (&v, netpermd_connectivity (TRUE, 1));
  g_assert_false (v.available);
  g_assert_cmpint (v.code, ==, G_IO_ERROR_NETWORK_UNREACHABLE);
  g_assert_cmpstr (v.message, ==, "NetworkManager says this machine has no network connectivity");
  netpermd_verdict_clear (&v);
  NetpermdVerdict limited = { .available = TRUE };
  netpermd_verdict_cap (&limited, netpermd_connectivity (TRUE, 3));
  g_assert_true (limited.available);
}

static NetpermdLine
read_line (JsonParser *p, const char *line, const char *app, char **app_out, NetpermdVerdict *v, GError **error)
{
  return netpermd_protocol_read (p, line, strlen (line), app, app_out, v, error);
}

static void
test_protocol (void)
{
  g_autoptr (JsonParser) p = json_parser_new_immutable ();
  g_autofree char *app = NULL;
  NetpermdVerdict v = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_cmpint (read_line (p, "{\"ok\":true,\"subscribed\":[\"self\"],\"app\":\"maps\",\"privileged\":false}", NULL,
                              &app, &v, &error), ==, NETPERMD_LINE_ACK);
  g_assert_cmpstr (app, ==, "maps");
  /* Issue 36, 4: a daemon in another network namespace than this process is not this process's answer. */
  struct stat st;
  g_assert_cmpint (stat ("/proc/self/ns/net", &st), ==, 0);
  g_autofree char *same = g_strdup_printf ("{\"ok\":true,\"subscribed\":[\"self\"],\"app\":\"maps\",\"netns\":\"%" G_GUINT64_FORMAT
                                           "\"}", (guint64)st.st_ino);
  g_autofree char *acked = NULL;
  g_assert_cmpint (read_line (p, same, NULL, &acked, &v, &error), ==, NETPERMD_LINE_ACK);
  g_assert_cmpint (read_line (p, "{\"ok\":true,\"subscribed\":[\"self\"],\"app\":\"maps\",\"netns\":\"1\"}", NULL, &acked, &v,
                              &error), ==, NETPERMD_LINE_ERROR);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  /* The snapshot's entry for the app, whatever else it lists. */
  g_assert_cmpint (read_line (p, "{\"event\":\"snapshot\",\"seq\":1,\"apps\":[{\"app\":\"other\",\"available\":true,"
                              "\"reason\":\"ok\"},{\"app\":\"maps\",\"available\":false,\"reason\":\"no-network\"}]}",
                              app, NULL, &v, &error), ==, NETPERMD_LINE_VERDICT);
  g_assert_false (v.available);
  g_assert_cmpint (read_line (p, "{\"event\":\"app\",\"seq\":2,\"app\":\"maps\",\"available\":true,\"reason\":\"ok\","
                              "\"via\":" WLAN "}}", app, NULL, &v, &error), ==, NETPERMD_LINE_VERDICT);
  g_assert_true (v.available);
  g_assert_cmpint (v.via, ==, 3);
  g_assert_cmpint (read_line (p, "{\"event\":\"resync\",\"seq\":9,\"why\":\"fell-behind\",\"dropped\":3,\"apps\":"
                              "[{\"app\":\"maps\",\"available\":false,\"reason\":\"no-network\"}]}", app, NULL, &v, &error),
                   ==, NETPERMD_LINE_VERDICT);
  g_assert_false (v.available);
  /* Under SUBSCRIBE self an app event of another name is the app a reload made the process (issue 36, 1: the module
   * dropped it, and reported the old app's verdict for good): its verdict, and its name. */
  g_autofree char *renamed = NULL;
  g_assert_cmpint (read_line (p, "{\"event\":\"app\",\"seq\":3,\"app\":\"mapsx\",\"available\":true,\"reason\":\"ok\"}",
                              app, &renamed, &v, &error), ==, NETPERMD_LINE_VERDICT);
  g_assert_cmpstr (renamed, ==, "mapsx");
  g_assert_true (v.available);
  g_clear_pointer (&renamed, g_free);
  g_assert_cmpint (read_line (p, "{\"event\":\"resync\",\"seq\":5,\"why\":\"fell-behind\",\"apps\":"
                              "[{\"app\":\"maps2\",\"available\":false,\"reason\":\"denied\"}]}", app, &renamed, &v, &error),
                   ==, NETPERMD_LINE_VERDICT);
  g_assert_cmpstr (renamed, ==, "maps2");
  g_assert_false (v.available);
  /* The stopping event, a snapshot before the acknowledgement: nothing for the module. */
  g_assert_cmpint (read_line (p, "{\"event\":\"stopping\",\"seq\":4}", app, NULL, &v, &error), ==, NETPERMD_LINE_OTHER);
  g_assert_cmpint (read_line (p, "{\"event\":\"snapshot\",\"seq\":1,\"apps\":[{\"app\":\"maps\",\"available\":true,"
                              "\"reason\":\"ok\"}]}", NULL, NULL, &v, &error), ==, NETPERMD_LINE_OTHER);
  g_assert_false (v.available);
  g_assert_no_error (error);

  /* A daemon that refuses the request, or a stream that is not netpermd's. */
  g_assert_cmpint (read_line (p, "{\"ok\":false,\"error\":\"bad-arguments\",\"message\":\"unknown topic 'self'\"}", app,
                              NULL, &v, &error), ==, NETPERMD_LINE_ERROR);
  g_assert_cmpstr (error->message, ==, "netpermd refused SUBSCRIBE self: bad-arguments: unknown topic 'self'");
  g_clear_error (&error);
  g_assert_cmpint (read_line (p, "HTTP/1.1 400 Bad Request", app, NULL, &v, &error), ==, NETPERMD_LINE_ERROR);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  g_assert_cmpint (read_line (p, "[1,2]", app, NULL, &v, &error), ==, NETPERMD_LINE_ERROR);
  g_clear_error (&error);
  netpermd_verdict_clear (&v);
}

/* REACH: the request for an address, and its reply read as yes, no (with the verdict's reason) or "not asked"
 * (an older daemon, an error, a line that is no verdict), which can_reach() judges without the daemon. */
static void
test_reach (void)
{
  g_autoptr (GInetAddress) v4 = g_inet_address_new_from_string ("10.64.0.9");
  g_autoptr (GInetAddress) v6 = g_inet_address_new_from_string ("2001:db8::1");
  g_autofree char *now = netpermd_reach_request (v4, 0);
  g_autofree char *wait = netpermd_reach_request (v6, 600);
  g_assert_cmpstr (now, ==, "REACH 10.64.0.9\n");
  g_assert_cmpstr (wait, ==, "REACH 2001:db8::1 600\n");

  g_autoptr (JsonParser) p = json_parser_new ();
  g_autoptr (GError) error = NULL;
  const char *yes = "{\"ok\":true,\"destination\":\"127.0.0.1\",\"app\":\"maps\",\"available\":true,\"reason\":\"ok\","
                    "\"via\":{\"index\":1,\"name\":\"lo\",\"kind\":\"loopback\",\"metered\":false,\"over\":null}}";
  g_assert_cmpint (netpermd_reach_reply (p, yes, strlen (yes), &error), ==, NETPERMD_REACH_YES);
  g_assert_no_error (error);
  const char *asked = "{\"ok\":true,\"destination\":\"10.64.0.9\",\"app\":\"maps\",\"available\":false,"
                      "\"reason\":\"awaiting-decision\",\"via\":null,\"egress\":{\"ipv4\":" WWAN ",\"usable\":true,"
                      "\"allowed\":false},\"ipv6\":null},\"pending_kinds\":[\"wwan\",\"metered\"],\"message\":\"maps may "
                      "not use wwan or metered links yet: waiting for your answer (the kernel sends traffic for 10.64.0.9 by "
                      "wwan0)\"}";
  g_assert_cmpint (netpermd_reach_reply (p, asked, strlen (asked), &error), ==, NETPERMD_REACH_NO);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED);
  g_assert_cmpstr (error->message, ==, "maps may not use wwan or metered links yet: waiting for your answer (the "
                                       "kernel sends traffic for 10.64.0.9 by wwan0)");
  g_clear_error (&error);
  const char *blocked = "{\"ok\":true,\"destination\":\"198.51.100.1\",\"app\":\"maps\",\"available\":false,"
                        "\"reason\":\"routed-elsewhere\",\"via\":null,\"egress\":{\"ipv4\":{\"blocked\":\"unreachable\"},"
                        "\"ipv6\":null},\"bind_to\":null,\"message\":\"the kernel routes maps's traffic into an unreachable route\"}";
  g_assert_cmpint (netpermd_reach_reply (p, blocked, strlen (blocked), &error), ==, NETPERMD_REACH_UNROUTED);
  g_assert_cmpstr (error->message, ==, "the kernel routes maps's traffic into an unreachable route");
  g_clear_error (&error);
  const char *unknown = "{\"ok\":false,\"error\":\"unknown-verb\",\"message\":\"unknown verb 'REACH'\"}";
  const char *starting = "{\"ok\":true,\"destination\":\"10.64.0.9\",\"app\":\"maps\",\"available\":false,"
                         "\"reason\":\"starting\"}";
  g_assert_cmpint (netpermd_reach_reply (p, unknown, strlen (unknown), &error), ==, NETPERMD_REACH_UNASKED);
  g_assert_cmpint (netpermd_reach_reply (p, "{\"ok\":true}", 11, &error), ==, NETPERMD_REACH_UNASKED);
  g_assert_cmpint (netpermd_reach_reply (p, "HTTP/1.1 400", 12, &error), ==, NETPERMD_REACH_UNASKED);
  g_assert_no_error (error);
  g_assert_cmpint (netpermd_reach_reply (p, starting, strlen (starting), &error), ==, NETPERMD_REACH_NO);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NETWORK_UNREACHABLE);
}

static void
assert_route_refused (int e, GIOErrorEnum code, const char *message)
{
  g_autoptr (GError) error = NULL;
  netpermd_route_refused (e, "192.0.2.1", &error);
  g_assert_error (error, G_IO_ERROR, (gint)code);
  g_assert_cmpstr (error->message, ==, message);
}

/* Every route the kernel refuses, by connect()'s errno (docs/APPS.md's table): never the errno's own code (EINVAL
 * is no invalid argument of the app's, EACCES no permission of netpermd's). */
static void
test_route_refused (void)
{
  assert_route_refused (ENETUNREACH, G_IO_ERROR_NETWORK_UNREACHABLE, "no route to 192.0.2.1: Network is unreachable");
  assert_route_refused (EHOSTUNREACH, G_IO_ERROR_HOST_UNREACHABLE,
                        "no route to 192.0.2.1: an unreachable route refuses it");
  assert_route_refused (EINVAL, G_IO_ERROR_NETWORK_UNREACHABLE,
                        "no route to 192.0.2.1: a blackhole route drops its traffic");
  assert_route_refused (EACCES, G_IO_ERROR_NETWORK_UNREACHABLE, "no route to 192.0.2.1: a prohibit route refuses it");
  g_autofree char *other = g_strdup_printf ("no route to 192.0.2.1: the kernel refuses it (%s)", g_strerror (EPERM));
  assert_route_refused (EPERM, G_IO_ERROR_NETWORK_UNREACHABLE, other);
  /* No errno turns into "not allowed", nor into an error GLib's monitors never give for a destination. */
  for (int e = 1; e < 134; e++)
    {
      g_autoptr (GError) error = NULL;
      netpermd_route_refused (e, "2001:db8::1", &error);
      g_assert_true (error->domain == G_IO_ERROR);
      g_assert_true (error->code == G_IO_ERROR_NETWORK_UNREACHABLE || error->code == G_IO_ERROR_HOST_UNREACHABLE);
      g_assert_true (g_str_has_prefix (error->message, "no route to 2001:db8::1: "));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/verdict/ok", test_ok);
  g_test_add_func ("/verdict/no-network", test_no_network);
  g_test_add_func ("/verdict/denied", test_denied);
  g_test_add_func ("/verdict/awaiting-decision", test_awaiting_decision);
  g_test_add_func ("/verdict/routed-elsewhere", test_routed_elsewhere);
  g_test_add_func ("/verdict/budget-exhausted", test_budget_exhausted);
  g_test_add_func ("/verdict/not-a-verdict", test_not_a_verdict);
  g_test_add_func ("/verdict/equal", test_equal);
  g_test_add_func ("/verdict/connectivity", test_connectivity);
  g_test_add_func ("/protocol/lines", test_protocol);
  g_test_add_func ("/protocol/reach", test_reach);
  g_test_add_func ("/route/refused", test_route_refused);
  return g_test_run ();
}
