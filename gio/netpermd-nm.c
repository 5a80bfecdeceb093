// SPDX-License-Identifier: LGPL-2.1-or-later
/* NetworkManager's Connectivity property over GDBus: the bus and one Get at start on a thread of their own (waited
 * for at most a bound), then PropertiesChanged and the name's owner coming and going. */
#define G_LOG_DOMAIN "netpermd"

#include "netpermd-nm.h"

#define NM_NAME "org.freedesktop.NetworkManager"
#define NM_PATH "/org/freedesktop/NetworkManager"

struct _NetpermdNM
{
  gint refs;
  GDBusConnection *bus;
  guint watch;
  guint signal;
  GCancellable *cancellable;
  /* Atomic: the getter may be called from any thread. */
  gint connectivity;
  NetpermdNMFunc func;
  gpointer user_data;
  /* Where func runs, and the bus is watched from: the context of netpermd_nm_new()'s caller. */
  GMainContext *context;
  /* The start, done on a thread of its own (a system bus that accepts and never answers must not hold the app):
   * the caller waits for it at most its time-out. */
  GMutex lock;
  GCond started;
  gboolean done;
  gboolean freed;
};

static NetpermdNM *
nm_ref (NetpermdNM *nm)
{
  g_atomic_int_inc (&nm->refs);
  return nm;
}

static void
nm_unref (NetpermdNM *nm)
{
  if (!g_atomic_int_dec_and_test (&nm->refs))
    return;
  g_clear_object (&nm->cancellable);
  g_clear_object (&nm->bus);
  g_main_context_unref (nm->context);
  g_mutex_clear (&nm->lock);
  g_cond_clear (&nm->started);
  g_free (nm);
}

static void
set_connectivity (NetpermdNM *nm, gint value)
{
  if (g_atomic_int_exchange (&nm->connectivity, value) != value)
    nm->func (nm->user_data);
}

/* `v` is the property's value (a "u" inside a variant or not). */
static void
take_value (NetpermdNM *nm, GVariant *v)
{
  g_autoptr (GVariant) inner = g_variant_is_of_type (v, G_VARIANT_TYPE_VARIANT) ? g_variant_get_variant (v)
                                                                               : g_variant_ref (v);
  if (g_variant_is_of_type (inner, G_VARIANT_TYPE_UINT32))
    set_connectivity (nm, (gint)g_variant_get_uint32 (inner));
}

static void
on_properties_changed (GDBusConnection *bus G_GNUC_UNUSED, const char *sender G_GNUC_UNUSED,
                       const char *path G_GNUC_UNUSED, const char *interface G_GNUC_UNUSED,
                       const char *signal G_GNUC_UNUSED, GVariant *parameters, gpointer user_data)
{
  if (!g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(sa{sv}as)")))
    return;
  g_autoptr (GVariant) changed = g_variant_get_child_value (parameters, 1);
  g_autoptr (GVariant) v = g_variant_lookup_value (changed, "Connectivity", G_VARIANT_TYPE_UINT32);
  if (v)
    take_value (user_data, v);
}

static GVariant *
get_call_parameters (void)
{
  return g_variant_new ("(ss)", NM_NAME, "Connectivity");
}

static void
on_got (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), result, &error);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  if (reply)
    {
      g_autoptr (GVariant) v = g_variant_get_child_value (reply, 0);
      take_value (user_data, v);
    }
  else
    g_debug ("NetworkManager's Connectivity: %s", error->message);
}

static void
on_appeared (GDBusConnection *bus, const char *name G_GNUC_UNUSED, const char *owner G_GNUC_UNUSED, gpointer user_data)
{
  NetpermdNM *nm = user_data;
  g_dbus_connection_call (bus, NM_NAME, NM_PATH, "org.freedesktop.DBus.Properties", "Get", get_call_parameters (),
                          G_VARIANT_TYPE ("(v)"), G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, nm->cancellable, on_got, nm);
}

static void
on_vanished (GDBusConnection *bus G_GNUC_UNUSED, const char *name G_GNUC_UNUSED, gpointer user_data)
{
  set_connectivity (user_data, -1);
}

static void
ignore_change (gpointer user_data G_GNUC_UNUSED)
{
}

/* Where GLib connects for the system bus when DBUS_SYSTEM_BUS_ADDRESS is unset. */
#define SYSTEM_BUS_SOCKET "/var/run/dbus/system_bus_socket"

/* On the monitor's context, once the thread has the bus: follow the property from there (signals are delivered to
 * the context they were subscribed from). */
static gboolean
follow (gpointer user_data)
{
  NetpermdNM *nm = user_data;
  if (!nm->freed && nm->bus)
    {
      nm->signal = g_dbus_connection_signal_subscribe (nm->bus, NM_NAME, "org.freedesktop.DBus.Properties",
                                                       "PropertiesChanged", NM_PATH, NM_NAME, G_DBUS_SIGNAL_FLAGS_NONE,
                                                       on_properties_changed, nm, NULL);
      nm->watch = g_bus_watch_name_on_connection (nm->bus, NM_NAME, G_BUS_NAME_WATCHER_FLAGS_NONE, on_appeared,
                                                  on_vanished, nm, NULL);
    }
  return G_SOURCE_REMOVE;
}

/* The bus and the property's value now, on a thread of its own. */
static gpointer
start (gpointer user_data)
{
  NetpermdNM *nm = user_data;
  g_autoptr (GError) error = NULL;
  GDBusConnection *bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, nm->cancellable, &error);
  gint value = -1;
  if (!bus)
    g_debug ("no system bus, so no NetworkManager: %s", error->message);
  else
    {
      g_autoptr (GVariant) reply = g_dbus_connection_call_sync (bus, NM_NAME, NM_PATH, "org.freedesktop.DBus.Properties",
                                                                "Get", get_call_parameters (), G_VARIANT_TYPE ("(v)"),
                                                                G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, nm->cancellable,
                                                                &error);
      if (reply)
        {
          g_autoptr (GVariant) v = g_variant_get_child_value (reply, 0);
          g_autoptr (GVariant) inner = g_variant_is_of_type (v, G_VARIANT_TYPE_VARIANT) ? g_variant_get_variant (v)
                                                                                       : g_variant_ref (v);
          if (g_variant_is_of_type (inner, G_VARIANT_TYPE_UINT32))
            value = (gint)g_variant_get_uint32 (inner);
        }
      else
        g_debug ("NetworkManager's Connectivity: %s", error->message);
    }
  g_mutex_lock (&nm->lock);
  nm->bus = bus;
  nm->done = TRUE;
  /* In time, the value is there before the caller reads it; late, the name watch that `follow` sets up reads it
   * again and tells it as a change, on the monitor's context. */
  if (!nm->freed && nm->func == ignore_change)
    g_atomic_int_set (&nm->connectivity, value);
  g_cond_signal (&nm->started);
  g_mutex_unlock (&nm->lock);
  if (bus)
    g_main_context_invoke_full (nm->context, G_PRIORITY_DEFAULT, follow, nm_ref (nm), (GDestroyNotify)nm_unref);
  nm_unref (nm);
  return NULL;
}

NetpermdNM *
netpermd_nm_new (int timeout_ms, NetpermdNMFunc func, gpointer user_data)
{
  /* Without a system bus, no NetworkManager: say so before GDBus is set up for nothing (measured: 0.4 ms and
   * 1.2 MB of a process's RSS for the failed connection). */
  if (!g_getenv ("DBUS_SYSTEM_BUS_ADDRESS") && !g_file_test (SYSTEM_BUS_SOCKET, G_FILE_TEST_EXISTS))
    {
      g_debug ("no system bus (%s), so no NetworkManager", SYSTEM_BUS_SOCKET);
      return NULL;
    }
  NetpermdNM *nm = g_new0 (NetpermdNM, 1);
  nm->refs = 1;
  nm->connectivity = -1;
  nm->cancellable = g_cancellable_new ();
  nm->context = g_main_context_ref_thread_default ();
  nm->func = ignore_change;
  g_mutex_init (&nm->lock);
  g_cond_init (&nm->started);
  /* The bus and the value now, waited for at most timeout_ms: a bus that accepts and never answers (or a slow
   * NetworkManager) is heard of later, never holding the app's start. */
  g_autoptr (GError) error = NULL;
  g_autoptr (GThread) thread = g_thread_try_new ("netpermd-nm", start, nm_ref (nm), &error);
  if (!thread)
    {
      g_debug ("no thread to reach NetworkManager with: %s", error->message);
      nm_unref (nm);
      netpermd_nm_free (nm);
      return NULL;
    }
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;
  g_mutex_lock (&nm->lock);
  while (!nm->done && g_cond_wait_until (&nm->started, &nm->lock, deadline))
    ;
  if (!nm->done)
    g_debug ("the system bus or NetworkManager did not answer in %d ms: heard of when they do", timeout_ms);
  nm->func = func;
  nm->user_data = user_data;
  g_mutex_unlock (&nm->lock);
  return nm;
}

gint
netpermd_nm_connectivity (NetpermdNM *nm)
{
  return nm ? g_atomic_int_get (&nm->connectivity) : -1;
}

void
netpermd_nm_free (NetpermdNM *nm)
{
  if (!nm)
    return;
  g_mutex_lock (&nm->lock);
  nm->freed = TRUE;
  g_mutex_unlock (&nm->lock);
  g_cancellable_cancel (nm->cancellable);
  if (nm->watch)
    g_bus_unwatch_name (nm->watch);
  if (nm->signal)
    g_dbus_connection_signal_unsubscribe (nm->bus, nm->signal);
  nm_unref (nm);
}
