// SPDX-License-Identifier: LGPL-2.1-or-later
/* The monitor: a GInitable that connects to netpermd (bounded), and afterwards only reacts to what the daemon and
 * NetworkManager send, from the main context that was current when it was made. */
#define G_LOG_DOMAIN "netpermd"
#define _GNU_SOURCE

#include "netpermd-monitor.h"

#include <errno.h>
#include <string.h>

#include "netpermd-connection.h"
#include "netpermd-nm.h"
#include "netpermd-reach.h"
#include "netpermd-verdict.h"

#ifndef NETPERMD_DEFAULT_SOCKET
#error "build with -DNETPERMD_DEFAULT_SOCKET=\"...\" (the Makefile does)"
#endif

/* What the monitor reports: one value, so that network-changed fires exactly when any part of it changes. */
typedef struct
{
  NetpermdVerdict verdict;
  GNetworkConnectivity connectivity;
} Report;

struct _NetpermdNetworkMonitor
{
  GObject parent_instance;
  gboolean initialised;
  /* Why the first initable_init failed: a repeated one fails with it again (GInitable sets an error with FALSE). */
  GError *init_error;
  GMainContext *context;
  /* A change is waiting for its idle to be reported (main context only). */
  gboolean report_queued;
  /* The daemon's socket, for can_reach()'s questions. */
  char *path;
  NetpermdConnection *connection;
  NetpermdNM *nm;
  /* The daemon's latest verdict (main context only). */
  NetpermdVerdict verdict;
  /* Guards `app` and `reported`: properties and can_reach() may be read from any thread. */
  GMutex lock;
  char *app;
  Report reported;
};

enum
{
  PROP_0,
  PROP_NETWORK_AVAILABLE,
  PROP_NETWORK_METERED,
  PROP_CONNECTIVITY,
};

static void netpermd_network_monitor_iface_init (GNetworkMonitorInterface *iface);
static void netpermd_network_monitor_initable_iface_init (GInitableIface *iface);

/* GInitable first: GNetworkMonitor requires it. */
G_DEFINE_DYNAMIC_TYPE_EXTENDED (NetpermdNetworkMonitor, netpermd_network_monitor, G_TYPE_OBJECT, G_TYPE_FLAG_FINAL,
                                G_IMPLEMENT_INTERFACE_DYNAMIC (G_TYPE_INITABLE,
                                                               netpermd_network_monitor_initable_iface_init)
                                G_IMPLEMENT_INTERFACE_DYNAMIC (G_TYPE_NETWORK_MONITOR,
                                                               netpermd_network_monitor_iface_init))

void
netpermd_network_monitor_register (GIOModule *module)
{
  netpermd_network_monitor_register_type (G_TYPE_MODULE (module));
  g_io_extension_point_implement (G_NETWORK_MONITOR_EXTENSION_POINT_NAME, NETPERMD_TYPE_NETWORK_MONITOR, "netpermd",
                                  NETPERMD_MONITOR_PRIORITY);
}

/* Recomputes the report from the verdict and NetworkManager; when it differs, notifies each property that changed
 * and emits network-changed once. From the idle alone, never from inside the reader or a D-Bus callback. */
static void
report (NetpermdNetworkMonitor *self)
{
  Report now = { .connectivity = netpermd_connectivity (self->verdict.available, netpermd_nm_connectivity (self->nm)) };
  netpermd_verdict_copy (&self->verdict, &now.verdict);
  netpermd_verdict_cap (&now.verdict, now.connectivity);
  g_mutex_lock (&self->lock);
  Report old = self->reported;
  gboolean same = netpermd_verdict_equal (&old.verdict, &now.verdict) && old.connectivity == now.connectivity;
  if (!same)
    self->reported = now;
  g_mutex_unlock (&self->lock);
  if (same)
    {
      netpermd_verdict_clear (&now.verdict);
      return;
    }
  g_debug ("%s: available %d -> %d, metered %d -> %d, connectivity %d -> %d, %s", self->app, old.verdict.available,
           now.verdict.available, old.verdict.metered, now.verdict.metered, old.connectivity, now.connectivity,
           now.verdict.message ? now.verdict.message : "ok");
  g_object_freeze_notify (G_OBJECT (self));
  if (old.verdict.available != now.verdict.available)
    g_object_notify (G_OBJECT (self), "network-available");
  if (old.verdict.metered != now.verdict.metered)
    g_object_notify (G_OBJECT (self), "network-metered");
  if (old.connectivity != now.connectivity)
    g_object_notify (G_OBJECT (self), "connectivity");
  g_object_thaw_notify (G_OBJECT (self));
  netpermd_verdict_clear (&old.verdict);
  g_signal_emit_by_name (self, "network-changed", now.verdict.available);
}

/* The idle's reference keeps the monitor alive through the handlers: one may drop the app's last reference. */
static gboolean
on_report_due (gpointer user_data)
{
  NetpermdNetworkMonitor *self = user_data;
  self->report_queued = FALSE;
  report (self);
  return G_SOURCE_REMOVE;
}

/* A change is reported from an idle of the monitor's context, once for all that came before it runs: below the
 * reader's priority, so that a burst of lines (or NetworkManager's signals beside them) becomes one network-changed
 * with the last state, as GNetworkMonitorBase coalesces; and no handler runs inside the reader, which could free the
 * connection it is reading. Queued only from the context's own callbacks, so the idle runs at its next turn. */
static void
queue_report (NetpermdNetworkMonitor *self)
{
  if (self->report_queued)
    return;
  self->report_queued = TRUE;
  GSource *idle = g_idle_source_new ();
  g_source_set_priority (idle, G_PRIORITY_HIGH_IDLE);
  g_source_set_callback (idle, on_report_due, g_object_ref (self), g_object_unref);
  g_source_set_static_name (idle, "[netpermd] network-changed");
  g_source_attach (idle, self->context);
  g_source_unref (idle);
}

static void
on_verdict (const char *app, const NetpermdVerdict *verdict, gpointer user_data)
{
  NetpermdNetworkMonitor *self = user_data;
  if (g_strcmp0 (app, self->app) != 0)
    {
      g_mutex_lock (&self->lock);
      g_free (self->app);
      self->app = g_strdup (app);
      g_mutex_unlock (&self->lock);
    }
  netpermd_verdict_copy (verdict, &self->verdict);
  queue_report (self);
}

static void
on_nm_changed (gpointer user_data)
{
  queue_report (user_data);
}

/* xdg-desktop-portal answers sandboxed apps with its own monitor's view: that must stay the host's. */
static gboolean
is_portal (void)
{
  if (g_strcmp0 (program_invocation_short_name, NETPERMD_PORTAL_PROGRAM) == 0)
    return TRUE;
  g_autofree char *exe = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *base = exe ? g_path_get_basename (exe) : NULL;
  return g_strcmp0 (base, NETPERMD_PORTAL_PROGRAM) == 0;
}

/* Connects to the daemon and reads the app's first verdict; FALSE and `error` when GLib must take another monitor. */
static gboolean
connect_monitor (NetpermdNetworkMonitor *self, GError **error)
{
  if (is_portal ())
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                   "netpermd does not answer inside %s, which reports the host's network to sandboxed apps",
                   NETPERMD_PORTAL_PROGRAM);
      return FALSE;
    }
  const char *path = g_getenv ("NETPERMD_SOCKET");
  if (!path || !*path)
    path = NETPERMD_DEFAULT_SOCKET;
  self->path = g_strdup (path);
  self->context = g_main_context_ref_thread_default ();
  char *app = NULL;
  self->connection = netpermd_connection_open (path, self->context, NETPERMD_INIT_TIMEOUT_MS * 1000, on_verdict, self,
                                               &app, &self->verdict, error);
  if (!self->connection)
    return FALSE;
  self->app = app;
  self->nm = netpermd_nm_new (NETPERMD_NM_TIMEOUT_MS, on_nm_changed, self);
  self->reported.connectivity = netpermd_connectivity (self->verdict.available, netpermd_nm_connectivity (self->nm));
  netpermd_verdict_copy (&self->verdict, &self->reported.verdict);
  netpermd_verdict_cap (&self->reported.verdict, self->reported.connectivity);
  g_debug ("%s: %s", app, self->verdict.message ? self->verdict.message : "ok");
  return TRUE;
}

/* Once: a repeated call gives the first one's result, its error too, as GLib's own GInitables do. */
static gboolean
initable_init (GInitable *initable, GCancellable *cancellable G_GNUC_UNUSED, GError **error)
{
  NetpermdNetworkMonitor *self = NETPERMD_NETWORK_MONITOR (initable);
  if (!self->initialised)
    {
      self->initialised = TRUE;
      if (!connect_monitor (self, &self->init_error) && !self->init_error)
        g_set_error_literal (&self->init_error, G_IO_ERROR, G_IO_ERROR_FAILED, "netpermd could not be reached");
    }
  if (self->init_error)
    {
      g_propagate_error (error, g_error_copy (self->init_error));
      return FALSE;
    }
  return TRUE;
}

/* FALSE and the verdict's error when the app may not use the network now. */
static gboolean
allowed_now (NetpermdNetworkMonitor *self, GError **error)
{
  g_mutex_lock (&self->lock);
  gboolean available = self->reported.verdict.available;
  if (!available)
    g_set_error_literal (error, G_IO_ERROR, self->reported.verdict.code,
                         self->reported.verdict.message ? self->reported.verdict.message : "netpermd has not answered");
  g_mutex_unlock (&self->lock);
  return available;
}

static void
no_address (GError **error)
{
  g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_HOST_UNREACHABLE, "the name resolves to no address");
}

static GInetAddress *
inet_of (GSocketAddress *address)
{
  return G_IS_INET_SOCKET_ADDRESS (address) ? g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (address)) : NULL;
}

/* One address's answer: the daemon's judgment of it (by the link the kernel sends it by); when the daemon cannot
 * be asked, the app's verdict and whether the kernel routes the address at all. */
static gboolean
judged (NetpermdNetworkMonitor *self, NetpermdReach answer, GSocketAddress *address, GError **error)
{
  GInetAddress *inet = inet_of (address);
  switch (answer)
    {
    case NETPERMD_REACH_YES:
      /* NetworkManager's "none" holds for every destination but this machine itself, as network-available says. */
      if (netpermd_nm_connectivity (self->nm) == 1 && !(inet && g_inet_address_get_is_loopback (inet)))
        {
          g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NETWORK_UNREACHABLE, NETPERMD_NM_NONE_MESSAGE);
          return FALSE;
        }
      return TRUE;
    case NETPERMD_REACH_NO:
      return FALSE;
    case NETPERMD_REACH_UNROUTED:
      {
        g_autoptr (GError) kernel = NULL;
        if (netpermd_reach_route (address, &kernel))
          return FALSE;
        g_clear_error (error);
        g_propagate_error (error, g_steal_pointer (&kernel));
        return FALSE;
      }
    case NETPERMD_REACH_UNASKED:
      return allowed_now (self, error) && netpermd_reach_route (address, error);
    }
  return FALSE;
}


/* An app that checks before it connects is asked as its first connection would be: the daemon raises the prompt,
 * and the error says the person is being asked. */
static gboolean
can_reach (GNetworkMonitor *monitor, GSocketConnectable *connectable, GCancellable *cancellable, GError **error)
{
  NetpermdNetworkMonitor *self = NETPERMD_NETWORK_MONITOR (monitor);
  g_autoptr (GSocketAddressEnumerator) e = g_socket_connectable_enumerate (connectable);
  g_autoptr (GError) refused = NULL;
  for (;;)
    {
      g_autoptr (GError) failure = NULL;
      g_autoptr (GSocketAddress) address = g_socket_address_enumerator_next (e, cancellable, &failure);
      if (!address)
        {
          if (failure)
            g_propagate_error (error, g_steal_pointer (&failure));
          else if (refused)
            g_propagate_error (error, g_steal_pointer (&refused));
          else
            no_address (error);
          return FALSE;
        }
      g_clear_error (&refused);
      GInetAddress *inet = inet_of (address);
      NetpermdReach answer = inet ? netpermd_reach_ask (self->path, inet, NETPERMD_REACH_TIMEOUT_MS * 1000, &refused)
                                  : NETPERMD_REACH_UNASKED;
      if (judged (self, answer, address, &refused))
        return TRUE;
    }
}

/* can_reach_async: the addresses one by one, each asked as it comes; a question the person is asked waits for
 * their answer (or the prompt's expiry), as the first request of an iOS app waits for its alert. */
typedef struct
{
  GSocketAddressEnumerator *enumerator;
  GSocketAddress *address;
  GError *refused;
} Reach;

static void
reach_free (gpointer data)
{
  Reach *r = data;
  g_object_unref (r->enumerator);
  g_clear_object (&r->address);
  g_clear_error (&r->refused);
  g_free (r);
}

static void on_next_address (GObject *source, GAsyncResult *result, gpointer user_data);

static void
on_answer (GObject *source G_GNUC_UNUSED, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (GTask) task = user_data;
  Reach *r = g_task_get_task_data (task);
  GError *failure = NULL;
  NetpermdReach answer = netpermd_reach_ask_finish (result, &failure);
  if (g_error_matches (failure, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      g_task_return_error (task, failure);
      return;
    }
  g_clear_error (&r->refused);
  r->refused = failure;
  failure = NULL;
  if (answer == NETPERMD_REACH_UNASKED)
    g_clear_error (&r->refused);
  if (judged (g_task_get_source_object (task), answer, r->address, &r->refused))
    {
      g_task_return_boolean (task, TRUE);
      return;
    }
  /* Read before the task is stolen: a function's arguments are evaluated in no set order. */
  GCancellable *cancellable = g_task_get_cancellable (task);
  g_socket_address_enumerator_next_async (r->enumerator, cancellable, on_next_address, g_steal_pointer (&task));
}

static void
on_next_address (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (GTask) task = user_data;
  Reach *r = g_task_get_task_data (task);
  GError *failure = NULL;
  g_clear_object (&r->address);
  r->address = g_socket_address_enumerator_next_finish (G_SOCKET_ADDRESS_ENUMERATOR (source), result, &failure);
  if (!r->address)
    {
      if (failure)
        g_task_return_error (task, failure);
      else if (r->refused)
        g_task_return_error (task, g_steal_pointer (&r->refused));
      else
        {
          no_address (&failure);
          g_task_return_error (task, failure);
        }
      return;
    }
  NetpermdNetworkMonitor *self = g_task_get_source_object (task);
  GCancellable *cancellable = g_task_get_cancellable (task);
  GInetAddress *inet = inet_of (r->address);
  if (!inet)
    {
      g_clear_error (&r->refused);
      if (judged (self, NETPERMD_REACH_UNASKED, r->address, &r->refused))
        g_task_return_boolean (task, TRUE);
      else
        g_socket_address_enumerator_next_async (r->enumerator, cancellable, on_next_address, g_steal_pointer (&task));
      return;
    }
  netpermd_reach_ask_async (self->path, inet, NETPERMD_REACH_WAIT_S, cancellable, on_answer, g_steal_pointer (&task));
}

static void
can_reach_async (GNetworkMonitor *monitor, GSocketConnectable *connectable, GCancellable *cancellable,
                 GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (monitor, cancellable, callback, user_data);
  g_task_set_source_tag (task, can_reach_async);
  Reach *r = g_new0 (Reach, 1);
  r->enumerator = g_socket_connectable_enumerate (connectable);
  g_task_set_task_data (task, r, reach_free);
  g_socket_address_enumerator_next_async (r->enumerator, cancellable, on_next_address, task);
}

static gboolean
can_reach_finish (GNetworkMonitor *monitor, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, monitor), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

static void
get_property (GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
  NetpermdNetworkMonitor *self = NETPERMD_NETWORK_MONITOR (object);
  g_mutex_lock (&self->lock);
  switch (id)
    {
    case PROP_NETWORK_AVAILABLE:
      g_value_set_boolean (value, self->reported.verdict.available);
      break;
    case PROP_NETWORK_METERED:
      g_value_set_boolean (value, self->reported.verdict.metered);
      break;
    case PROP_CONNECTIVITY:
      g_value_set_enum (value, self->reported.connectivity);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, pspec);
      break;
    }
  g_mutex_unlock (&self->lock);
}

static void
finalize (GObject *object)
{
  NetpermdNetworkMonitor *self = NETPERMD_NETWORK_MONITOR (object);
  netpermd_connection_free (self->connection);
  netpermd_nm_free (self->nm);
  g_clear_pointer (&self->context, g_main_context_unref);
  netpermd_verdict_clear (&self->verdict);
  netpermd_verdict_clear (&self->reported.verdict);
  g_free (self->app);
  g_free (self->path);
  g_clear_error (&self->init_error);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (netpermd_network_monitor_parent_class)->finalize (object);
}

static void
netpermd_network_monitor_init (NetpermdNetworkMonitor *self)
{
  g_mutex_init (&self->lock);
  self->reported.connectivity = G_NETWORK_CONNECTIVITY_LOCAL;
}

static void
netpermd_network_monitor_class_init (NetpermdNetworkMonitorClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  object_class->get_property = get_property;
  object_class->finalize = finalize;
  g_object_class_override_property (object_class, PROP_NETWORK_AVAILABLE, "network-available");
  g_object_class_override_property (object_class, PROP_NETWORK_METERED, "network-metered");
  g_object_class_override_property (object_class, PROP_CONNECTIVITY, "connectivity");
}

static void
netpermd_network_monitor_class_finalize (NetpermdNetworkMonitorClass *klass G_GNUC_UNUSED)
{
}

static void
netpermd_network_monitor_iface_init (GNetworkMonitorInterface *iface)
{
  iface->can_reach = can_reach;
  iface->can_reach_async = can_reach_async;
  iface->can_reach_finish = can_reach_finish;
}

static void
netpermd_network_monitor_initable_iface_init (GInitableIface *iface)
{
  iface->init = initable_init;
}
