// SPDX-License-Identifier: LGPL-2.1-or-later
#include "netpermd-reach.h"

#include "netpermd-route.h"

#include <errno.h>
#include <gio/gunixsocketaddress.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A UDP socket's connect() makes the kernel look the route up (with the process's uid, marks and rules, as its
 * real connection would) and sends nothing. */
gboolean
netpermd_reach_route (GSocketAddress *address, GError **error)
{
  struct sockaddr_storage native;
  gssize size = g_socket_address_get_native_size (address);
  if (size <= 0 || !g_socket_address_to_native (address, &native, sizeof native, error))
    {
      if (error && !*error)
        g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "not an address a route can lead to");
      return FALSE;
    }
  g_autofree char *text = G_IS_INET_SOCKET_ADDRESS (address)
      ? g_inet_address_to_string (g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (address)))
      : g_strdup ("the address");
  int fd = socket (native.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    {
      int e = errno;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (e), "cannot ask the kernel for a route to %s: %s", text,
                   g_strerror (e));
      return FALSE;
    }
  /* A broadcast destination is one an app may send to (with SO_BROADCAST, as it would): EACCES is then only a
   * prohibit route's. */
  int on = 1;
  setsockopt (fd, SOL_SOCKET, SO_BROADCAST, &on, sizeof on);
  int e = connect (fd, (struct sockaddr *)&native, (socklen_t)size) == 0 ? 0 : errno;
  close (fd);
  if (e == 0)
    return TRUE;
  netpermd_route_refused (e, text, error);
  return FALSE;
}

/* Waits for `events` on `fd` until `deadline` (monotonic µs); FALSE on time-out or error. */
static gboolean
wait_for (int fd, short events, gint64 deadline)
{
  for (;;)
    {
      gint64 left = deadline - g_get_monotonic_time ();
      if (left <= 0)
        return FALSE;
      struct pollfd p = { .fd = fd, .events = events };
      int n = poll (&p, 1, (int)((left + 999) / 1000));
      if (n > 0)
        return TRUE;
      if (n == 0 || errno != EINTR)
        return FALSE;
    }
}

NetpermdReach
netpermd_reach_ask (const char *path, GInetAddress *address, gint64 timeout_us, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + timeout_us;
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  if (strlen (path) >= sizeof a.sun_path)
    return NETPERMD_REACH_UNASKED;
  memcpy (a.sun_path, path, strlen (path) + 1);
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return NETPERMD_REACH_UNASKED;
  g_autofree char *request = netpermd_reach_request (address, 0);
  GByteArray *in = g_byte_array_new ();
  NetpermdReach r = NETPERMD_REACH_UNASKED;
  /* A fresh socket's buffer takes the request whole. */
  if (connect (fd, (struct sockaddr *)&a, sizeof a) != 0
      || send (fd, request, strlen (request), MSG_NOSIGNAL) != (ssize_t)strlen (request))
    goto out;
  for (;;)
    {
      guint8 *nl = memchr (in->data, '\n', in->len);
      if (nl)
        {
          g_autoptr (JsonParser) parser = json_parser_new ();
          r = netpermd_reach_reply (parser, (const char *)in->data, (gsize)(nl - in->data), error);
          break;
        }
      if (in->len >= NETPERMD_REACH_MAX_REPLY || !wait_for (fd, POLLIN, deadline))
        break;
      guint8 chunk[4096];
      ssize_t n = recv (fd, chunk, sizeof chunk, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (n <= 0)
        break;
      g_byte_array_append (in, chunk, (guint)n);
    }
out:
  close (fd);
  g_byte_array_unref (in);
  return r;
}

typedef struct
{
  GSocketConnection *connection;
  /* The reply as it comes, up to NETPERMD_REACH_MAX_REPLY: a line, never read unbounded. */
  GByteArray *in;
  guint8 chunk[4096];
  char *request;
} Ask;

static void
ask_free (gpointer data)
{
  Ask *a = data;
  if (a->connection)
    g_io_stream_close (G_IO_STREAM (a->connection), NULL, NULL);
  g_clear_pointer (&a->in, g_byte_array_unref);
  g_clear_object (&a->connection);
  g_free (a->request);
  g_free (a);
}

/* The task's answer: unasked for anything but a cancellation, which is the caller's to hear. */
static void
return_unasked (GTask *task, GError *error)
{
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    g_task_return_error (task, error);
  else
    {
      g_clear_error (&error);
      g_task_return_int (task, NETPERMD_REACH_UNASKED);
    }
}

static void on_read (GObject *source, GAsyncResult *result, gpointer user_data);

static void
read_more (GTask *task)
{
  Ask *a = g_object_get_data (G_OBJECT (task), "ask");
  g_input_stream_read_async (g_io_stream_get_input_stream (G_IO_STREAM (a->connection)), a->chunk, sizeof a->chunk,
                             G_PRIORITY_DEFAULT, g_task_get_cancellable (task), on_read, task);
}

static void
on_read (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (GTask) task = user_data;
  Ask *a = g_object_get_data (G_OBJECT (task), "ask");
  GError *error = NULL;
  gssize n = g_input_stream_read_finish (G_INPUT_STREAM (source), result, &error);
  if (n < 0)
    return return_unasked (task, error);
  g_byte_array_append (a->in, a->chunk, (guint)n);
  guint8 *nl = memchr (a->in->data, '\n', a->in->len);
  if (!nl)
    {
      /* The daemon closed before a whole line, or sent more than any reply is: judged without it. */
      if (n == 0 || a->in->len >= NETPERMD_REACH_MAX_REPLY)
        return g_task_return_int (task, NETPERMD_REACH_UNASKED);
      read_more (g_steal_pointer (&task));
      return;
    }
  g_autoptr (JsonParser) parser = json_parser_new ();
  NetpermdReach r = netpermd_reach_reply (parser, (const char *)a->in->data, (gsize)(nl - a->in->data), &error);
  if (r == NETPERMD_REACH_NO || r == NETPERMD_REACH_UNROUTED)
    {
      /* The verdict's reason travels in the error, beside the answer. */
      g_task_set_task_data (task, error, (GDestroyNotify)g_error_free);
      g_task_return_int (task, r);
      return;
    }
  g_clear_error (&error);
  g_task_return_int (task, r);
}

static void
on_written (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  GError *error = NULL;
  if (!g_output_stream_write_all_finish (G_OUTPUT_STREAM (source), result, NULL, &error))
    {
      return_unasked (task, error);
      g_object_unref (task);
      return;
    }
  read_more (task);
}

static void
on_connected (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *task = user_data;
  GError *error = NULL;
  Ask *a = g_object_get_data (G_OBJECT (task), "ask");
  a->connection = g_socket_client_connect_finish (G_SOCKET_CLIENT (source), result, &error);
  if (!a->connection)
    {
      return_unasked (task, error);
      g_object_unref (task);
      return;
    }
  a->in = g_byte_array_new ();
  g_output_stream_write_all_async (g_io_stream_get_output_stream (G_IO_STREAM (a->connection)), a->request,
                                   strlen (a->request), G_PRIORITY_DEFAULT, g_task_get_cancellable (task), on_written,
                                   task);
}

void
netpermd_reach_ask_async (const char *path, GInetAddress *address, guint wait_s, GCancellable *cancellable,
                          GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (NULL, cancellable, callback, user_data);
  g_task_set_source_tag (task, netpermd_reach_ask_async);
  Ask *a = g_new0 (Ask, 1);
  a->request = netpermd_reach_request (address, wait_s);
  g_object_set_data_full (G_OBJECT (task), "ask", a, ask_free);
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GSocketAddress) where = g_unix_socket_address_new (path);
  g_socket_client_connect_async (client, G_SOCKET_CONNECTABLE (where), cancellable, on_connected, task);
}

NetpermdReach
netpermd_reach_ask_finish (GAsyncResult *result, GError **error)
{
  GTask *task = G_TASK (result);
  GError *failure = NULL;
  gssize r = g_task_propagate_int (task, &failure);
  if (failure)
    {
      g_propagate_error (error, failure);
      return NETPERMD_REACH_UNASKED;
    }
  GError *why = g_task_get_task_data (task);
  if ((r == NETPERMD_REACH_NO || r == NETPERMD_REACH_UNROUTED) && why)
    g_propagate_error (error, g_error_copy (why));
  return (NetpermdReach)r;
}
