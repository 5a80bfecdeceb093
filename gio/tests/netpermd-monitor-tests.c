// SPDX-License-Identifier: LGPL-2.1-or-later
#define _GNU_SOURCE
/* The monitor object itself, in the real GLib: the module loaded from a directory as GLib loads it, talking to a
 * stand-in daemon on a socket of the test's own. What GInitable requires of a repeated init; that a burst of verdicts
 * comes out as fewer network-changed than changes, with the last state; and that a handler may drop the last
 * reference to the monitor. `make gio-test` runs it against a build of the module with AddressSanitizer, so that a
 * use after free fails it. Usage: netpermd-monitor-tests MODULE_DIR */
#include <errno.h>
#include <gio/gio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char *module_dir;
static char *scratch;

#define ACK "{\"ok\":true,\"subscribed\":[\"self\"],\"app\":\"maps\",\"privileged\":false}\n"
#define OK_VERDICT "{\"app\":\"maps\",\"available\":true,\"reason\":\"ok\"}"
#define SNAPSHOT_OK "{\"event\":\"snapshot\",\"seq\":1,\"apps\":[" OK_VERDICT "]}\n"

/* The app event of seq `seq`: ok, or denied. */
static char *
app_event (guint seq, gboolean available)
{
  return available ? g_strdup_printf ("{\"event\":\"app\",\"seq\":%u,\"app\":\"maps\",\"available\":true,"
                                      "\"reason\":\"ok\"}\n", seq)
                   : g_strdup_printf ("{\"event\":\"app\",\"seq\":%u,\"app\":\"maps\",\"available\":false,"
                                      "\"reason\":\"denied\",\"message\":\"maps may not use wifi (%u)\"}\n", seq, seq);
}

static void
write_all (int fd, const char *text)
{
  gsize left = strlen (text);
  while (left > 0)
    {
      ssize_t n = write (fd, text, left);
      if (n < 0 && errno == EINTR)
        continue;
      g_assert_cmpint (n, >, 0);
      text += n;
      left -= (gsize)n;
    }
}

/* The stand-in daemon: accepts one connection and answers SUBSCRIBE self with `maps` ok at once (the module waits
 * 100 ms for it); the test writes the rest on the returned socket. */
typedef struct
{
  int listener;
  GThread *thread;
} Daemon;

static gpointer
serve (gpointer data)
{
  Daemon *d = data;
  int fd = accept4 (d->listener, NULL, NULL, SOCK_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  write_all (fd, ACK SNAPSHOT_OK);
  return GINT_TO_POINTER (fd + 1);
}

static void
daemon_start (Daemon *d, const char *name)
{
  g_autofree char *path = g_build_filename (scratch, name, NULL);
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  g_assert_cmpuint (strlen (path), <, sizeof a.sun_path);
  strcpy (a.sun_path, path);
  d->listener = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (d->listener, >=, 0);
  g_assert_cmpint (bind (d->listener, (struct sockaddr *)&a, sizeof a), ==, 0);
  g_assert_cmpint (listen (d->listener, 4), ==, 0);
  g_setenv ("NETPERMD_SOCKET", path, TRUE);
  d->thread = g_thread_new ("daemon", serve, d);
}

/* The connection the monitor made, once the daemon has answered it. */
static int
daemon_connection (Daemon *d)
{
  int fd = GPOINTER_TO_INT (g_thread_join (d->thread)) - 1;
  close (d->listener);
  return fd;
}

static GType
monitor_type (void)
{
  GIOExtensionPoint *point = g_io_extension_point_lookup (G_NETWORK_MONITOR_EXTENSION_POINT_NAME);
  GIOExtension *e = point ? g_io_extension_point_get_extension_by_name (point, "netpermd") : NULL;
  g_assert_nonnull (e);
  return g_io_extension_get_type (e);
}

/* A monitor on a stand-in daemon, and the daemon's end of its connection in `*fd`. */
static GNetworkMonitor *
connected_monitor (const char *name, int *fd)
{
  Daemon d;
  daemon_start (&d, name);
  g_autoptr (GError) error = NULL;
  GNetworkMonitor *m = g_initable_new (monitor_type (), NULL, &error, NULL);
  g_assert_no_error (error);
  *fd = daemon_connection (&d);
  g_assert_true (g_network_monitor_get_network_available (m));
  return m;
}

static gboolean
on_deadline (gpointer data)
{
  *(gboolean *)data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Runs the default context until *done, for 10 s at the most; then whatever else is ready. */
static void
run_until (const gboolean *done, const char *what)
{
  gboolean late = FALSE;
  guint deadline = g_timeout_add_seconds (10, on_deadline, &late);
  while (!*done && !late)
    g_main_context_iteration (NULL, TRUE);
  if (!late)
    g_source_remove (deadline);
  while (g_main_context_iteration (NULL, FALSE))
    ;
  if (!*done)
    g_error ("no %s in 10 s", what);
}

/* GInitable: a FALSE result sets the error, and a repeated init returns the first one's result. */
static void
test_init_repeated (void)
{
  g_autofree char *absent = g_build_filename (scratch, "absent.sock", NULL);
  g_setenv ("NETPERMD_SOCKET", absent, TRUE);
  g_autoptr (GObject) m = g_object_new (monitor_type (), NULL);
  g_autoptr (GError) first = NULL, second = NULL;
  g_assert_false (g_initable_init (G_INITABLE (m), NULL, &first));
  g_assert_nonnull (first);
  g_assert_false (g_initable_init (G_INITABLE (m), NULL, &second));
  g_assert_nonnull (second);
  g_assert_error (second, first->domain, first->code);
  g_assert_cmpstr (second->message, ==, first->message);

  int fd;
  g_autoptr (GNetworkMonitor) ok = connected_monitor ("init.sock", &fd);
  g_autoptr (GError) again = NULL;
  g_assert_true (g_initable_init (G_INITABLE (ok), NULL, &again));
  g_assert_no_error (again);
  close (fd);
}

typedef struct
{
  guint count;
  gboolean last;
} Changes;

static void
on_changed (GNetworkMonitor *m G_GNUC_UNUSED, gboolean available, gpointer data)
{
  Changes *c = data;
  c->count++;
  c->last = available;
}

typedef struct
{
  Changes changes;
  /* The state waited for, and whether a signal and the property have said it. */
  gboolean want;
  gboolean settled;
} Burst;

static void
on_burst_changed (GNetworkMonitor *m, gboolean available, gpointer data)
{
  Burst *b = data;
  on_changed (m, available, &b->changes);
  b->settled = available == b->want && g_network_monitor_get_network_available (m) == b->want;
}

/* 101 changes in one write, ending denied: fewer signals than that, the last with the last state. */
static void
test_burst_coalesced (void)
{
  int fd;
  g_autoptr (GNetworkMonitor) m = connected_monitor ("burst.sock", &fd);
  Burst b = { .want = FALSE };
  g_signal_connect (m, "network-changed", G_CALLBACK (on_burst_changed), &b);
  const guint n = 101;
  g_autoptr (GString) burst = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *line = app_event (2 + i, i % 2 == 1);
      g_string_append (burst, line);
    }
  write_all (fd, burst->str);
  run_until (&b.settled, "network-changed with the burst's last state");
  g_test_message ("%u changes in one burst: %u network-changed", n, b.changes.count);
  g_assert_cmpuint (b.changes.count, >=, 1);
  g_assert_cmpuint (b.changes.count, <, n);
  g_assert_false (b.changes.last);
  g_assert_false (g_network_monitor_get_network_available (m));

  /* A change on its own is still told, once. */
  guint before = b.changes.count;
  b.want = TRUE;
  b.settled = FALSE;
  g_autofree char *line = app_event (200, TRUE);
  write_all (fd, line);
  run_until (&b.settled, "network-changed for one change");
  g_assert_cmpuint (b.changes.count, ==, before + 1);
  g_assert_true (g_network_monitor_get_network_available (m));
  close (fd);
}

typedef struct
{
  GNetworkMonitor *monitor;
  gboolean dropped;
} Drop;

static void
on_changed_drop (GNetworkMonitor *m, gboolean available G_GNUC_UNUSED, gpointer data)
{
  Drop *d = data;
  g_assert_true (m == d->monitor);
  d->dropped = TRUE;
  g_object_unref (m);
}

/* The handler drops the app's last reference to the monitor, with more lines behind the change in the socket. */
static void
test_last_unref_in_handler (void)
{
  int fd;
  Drop d = { 0 };
  d.monitor = connected_monitor ("drop.sock", &fd);
  g_object_add_weak_pointer (G_OBJECT (d.monitor), (gpointer *)&d.monitor);
  GNetworkMonitor *m = d.monitor;
  g_signal_connect (m, "network-changed", G_CALLBACK (on_changed_drop), &d);
  g_autoptr (GString) lines = g_string_new (NULL);
  for (guint i = 0; i < 3; i++)
    {
      g_autofree char *line = app_event (2 + i, i % 2 == 1);
      g_string_append (lines, line);
    }
  write_all (fd, lines->str);
  run_until (&d.dropped, "network-changed");
  g_assert_null (d.monitor);
  close (fd);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (argc != 2)
    g_error ("usage: %s MODULE_DIR", argv[0]);
  module_dir = argv[1];
  g_autoptr (GError) error = NULL;
  scratch = g_dir_make_tmp ("netpermd-monitor-XXXXXX", &error);
  g_assert_no_error (error);
  /* No NetworkManager: its Connectivity would be part of what is reported. */
  g_autofree char *no_bus = g_strdup_printf ("unix:path=%s/no-system-bus", scratch);
  g_setenv ("DBUS_SYSTEM_BUS_ADDRESS", no_bus, TRUE);
  /* The extension point as GLib registers it (the same one if GLib already has), then the module as GLib loads it. */
  GIOExtensionPoint *point = g_io_extension_point_register (G_NETWORK_MONITOR_EXTENSION_POINT_NAME);
  g_io_extension_point_set_required_type (point, G_TYPE_NETWORK_MONITOR);
  GList *modules = g_io_modules_load_all_in_directory (module_dir);
  g_assert_nonnull (modules);
  g_list_free (modules);
  g_test_add_func ("/monitor/init-repeated", test_init_repeated);
  g_test_add_func ("/monitor/burst-coalesced", test_burst_coalesced);
  g_test_add_func ("/monitor/last-unref-in-handler", test_last_unref_in_handler);
  int status = g_test_run ();
  g_autoptr (GDir) dir = g_dir_open (scratch, 0, NULL);
  for (const char *name; dir && (name = g_dir_read_name (dir));)
    {
      g_autofree char *path = g_build_filename (scratch, name, NULL);
      unlink (path);
    }
  rmdir (scratch);
  g_free (scratch);
  return status;
}
