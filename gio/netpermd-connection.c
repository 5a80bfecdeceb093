// SPDX-License-Identifier: LGPL-2.1-or-later
/* netpermd's socket from inside a GLib process: one bounded blocking wait at start, then a non-blocking socket
 * in a GSource of the monitor's main context. */
#define G_LOG_DOMAIN "netpermd"

#include "netpermd-connection.h"

#include <errno.h>
#include <glib-unix.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "netpermd-protocol.h"

/* An event line for one app is a few hundred bytes; past this without a newline the stream is not netpermd's. */
#define MAX_LINE (1 << 20)

struct _NetpermdConnection
{
  char *path;
  GMainContext *context;
  NetpermdVerdictFunc func;
  gpointer user_data;
  int fd;
  GSource *io;
  /* The retry after a loss, or the wait for a reconnection's first verdict. */
  GSource *timer;
  GByteArray *in;
  JsonParser *parser;
  char *app;
  /* This connection has delivered a verdict. */
  gboolean answered;
  guint retry_ms;
  /* While open() waits: the first verdict goes here instead of to func. */
  NetpermdVerdict *first;
  /* The process that made the connection: a child forked since shares the socket, and would read half its lines. */
  pid_t pid;
};

static void schedule_retry (NetpermdConnection *c);

/* The open connections, for fork(): a child forked with the monitor shares each socket with its parent, and each
 * would read part of the other's lines. In the child, each socket is replaced at once (async-signal-safe calls only)
 * by one whose peer is gone: the child's source wakes, finds itself in another process, and connects anew, leaving
 * the parent its socket untouched. */
#define MAX_OPEN 8
static NetpermdConnection *open_connections[MAX_OPEN];
static GMutex open_lock;

static void
in_forked_child (void)
{
  for (int i = 0; i < MAX_OPEN; i++)
    {
      NetpermdConnection *c = open_connections[i];
      int pair[2];
      if (c && c->fd >= 0 && socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0)
        {
          dup2 (pair[0], c->fd);
          close (pair[0]);
          close (pair[1]);
        }
    }
}

static void
remember (NetpermdConnection *c, gboolean open)
{
  static gsize registered = 0;
  if (g_once_init_enter (&registered))
    g_once_init_leave (&registered, pthread_atfork (NULL, NULL, in_forked_child) == 0 ? 1 : 2);
  g_mutex_lock (&open_lock);
  for (int i = 0; i < MAX_OPEN; i++)
    if (open ? open_connections[i] == NULL : open_connections[i] == c)
      {
        open_connections[i] = open ? c : NULL;
        break;
      }
  g_mutex_unlock (&open_lock);
}

/* A non-blocking connection with SUBSCRIBE sent; -1 and `error` when the daemon is not there. */
static int
connect_socket (const char *path, GError **error)
{
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  if (strlen (path) >= sizeof a.sun_path)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "socket path %s is too long", path);
      return -1;
    }
  memcpy (a.sun_path, path, strlen (path) + 1);
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    {
      int e = errno;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (e), "socket: %s", g_strerror (e));
      return -1;
    }
  /* A fresh socket's buffer takes the request whole: the write cannot block or be short. */
  if (connect (fd, (struct sockaddr *)&a, sizeof a) != 0
      || send (fd, NETPERMD_SUBSCRIBE, strlen (NETPERMD_SUBSCRIBE), MSG_NOSIGNAL) != (ssize_t)strlen (NETPERMD_SUBSCRIBE))
    {
      int e = errno;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (e), "cannot reach netpermd at %s: %s", path,
                   g_strerror (e));
      close (fd);
      return -1;
    }
  return fd;
}

/* Hands each whole line read so far to the protocol. FALSE and `error` when the stream must be dropped. */
static gboolean
take_lines (NetpermdConnection *c, GError **error)
{
  guint8 *start = c->in->data, *end = start + c->in->len;
  gboolean ok = TRUE;
  while (ok)
    {
      guint8 *nl = memchr (start, '\n', (size_t)(end - start));
      if (!nl)
        break;
      g_autofree char *app = NULL;
      NetpermdVerdict v = { 0 };
      switch (netpermd_protocol_read (c->parser, (const char *)start, (gsize)(nl - start), c->app, &app, &v, error))
        {
        case NETPERMD_LINE_ACK:
          g_free (c->app);
          c->app = g_steal_pointer (&app);
          break;
        case NETPERMD_LINE_VERDICT:
          if (app)
            {
              g_free (c->app);
              c->app = g_steal_pointer (&app);
            }
          c->answered = TRUE;
          if (c->first)
            netpermd_verdict_copy (&v, c->first);
          else
            c->func (c->app, &v, c->user_data);
          break;
        case NETPERMD_LINE_ERROR:
          ok = FALSE;
          break;
        case NETPERMD_LINE_OTHER:
          break;
        }
      netpermd_verdict_clear (&v);
      start = nl + 1;
    }
  g_byte_array_remove_range (c->in, 0, (guint)(start - c->in->data));
  if (ok && c->in->len > MAX_LINE)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "netpermd sent a line of over %d bytes", MAX_LINE);
      ok = FALSE;
    }
  return ok;
}

/* Reads what the socket has, without blocking, at most 64 KiB a dispatch: a socket that never runs dry (a flood of
 * valid lines) must leave the app's main loop its turn; the rest waits in the socket, whose source stays ready. FALSE
 * and `error` at its end or on an error. */
static gboolean
read_available (NetpermdConnection *c, GError **error)
{
  for (int round = 0; round < 4; round++)
    {
      guint8 buf[16384];
      ssize_t n = recv (c->fd, buf, sizeof buf, 0);
      if (n > 0)
        {
          g_byte_array_append (c->in, buf, (guint)n);
          if (!take_lines (c, error))
            return FALSE;
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return TRUE;
      int e = n == 0 ? 0 : errno;
      g_set_error (error, G_IO_ERROR, e ? g_io_error_from_errno (e) : G_IO_ERROR_CLOSED, "%s",
                   e ? g_strerror (e) : "netpermd closed the connection");
      return FALSE;
    }
  return TRUE;
}

static void
clear_timer (NetpermdConnection *c)
{
  if (c->timer)
    {
      g_source_destroy (c->timer);
      g_clear_pointer (&c->timer, g_source_unref);
    }
}

static void
close_socket (NetpermdConnection *c)
{
  if (c->io)
    {
      g_source_destroy (c->io);
      g_clear_pointer (&c->io, g_source_unref);
    }
  if (c->fd >= 0)
    close (c->fd);
  c->fd = -1;
  g_byte_array_set_size (c->in, 0);
  c->answered = FALSE;
}

/* The daemon went (stopped, restarted, crashed) or said something wrong: what the module reports stays, and the
 * connection is made again later. */
static void
lose (NetpermdConnection *c, const char *why)
{
  g_debug ("connection to netpermd at %s lost (%s); trying again in %u ms", c->path, why, c->retry_ms);
  close_socket (c);
  clear_timer (c);
  schedule_retry (c);
}

static gboolean
on_readable (gint fd G_GNUC_UNUSED, GIOCondition condition G_GNUC_UNUSED, gpointer user_data)
{
  NetpermdConnection *c = user_data;
  g_autoptr (GError) error = NULL;
  if (getpid () != c->pid)
    {
      /* A forked child with a main loop of its own: it leaves the shared socket to its parent, unread, and makes a
       * connection of its own (each then hears every event). */
      lose (c, "this process was forked: a connection of its own");
      return G_SOURCE_REMOVE;
    }
  gboolean was_answered = c->answered;
  if (!read_available (c, &error))
    {
      lose (c, error->message);
      return G_SOURCE_REMOVE;
    }
  if (c->answered && !was_answered)
    {
      /* Back on its feet: the next loss starts from a short wait again. */
      clear_timer (c);
      c->retry_ms = NETPERMD_RETRY_FIRST_MS;
      g_debug ("reconnected to netpermd at %s", c->path);
    }
  return G_SOURCE_CONTINUE;
}

static void
watch_socket (NetpermdConnection *c)
{
  c->io = g_unix_fd_source_new (c->fd, G_IO_IN | G_IO_HUP | G_IO_ERR);
  g_source_set_callback (c->io, (GSourceFunc)(void (*) (void))on_readable, c, NULL);
  g_source_attach (c->io, c->context);
}

static GSource *
arm (NetpermdConnection *c, guint ms, GSourceFunc func)
{
  GSource *s = g_timeout_source_new (ms);
  g_source_set_callback (s, func, c, NULL);
  g_source_attach (s, c->context);
  return s;
}

static gboolean
on_no_answer (gpointer user_data)
{
  NetpermdConnection *c = user_data;
  g_clear_pointer (&c->timer, g_source_unref);
  lose (c, "no verdict in time");
  return G_SOURCE_REMOVE;
}

static gboolean
on_retry (gpointer user_data)
{
  NetpermdConnection *c = user_data;
  g_clear_pointer (&c->timer, g_source_unref);
  g_autoptr (GError) error = NULL;
  c->fd = connect_socket (c->path, &error);
  c->pid = getpid ();
  if (c->fd < 0)
    {
      g_debug ("%s; trying again in %u ms", error->message, c->retry_ms);
      schedule_retry (c);
      return G_SOURCE_REMOVE;
    }
  watch_socket (c);
  c->timer = arm (c, NETPERMD_ANSWER_MS, on_no_answer);
  return G_SOURCE_REMOVE;
}

/* The next attempt, after the current wait give or take a quarter (so that the processes of a desktop do not all
 * come back in the same millisecond); the wait after it is twice as long. */
static void
schedule_retry (NetpermdConnection *c)
{
  guint ms = (guint)g_random_double_range (c->retry_ms * 0.75, c->retry_ms * 1.25);
  c->timer = arm (c, ms, on_retry);
  c->retry_ms = MIN (c->retry_ms * 2, NETPERMD_RETRY_MAX_MS);
}

/* Waits for the first verdict until `deadline` (monotonic µs). */
static gboolean
wait_for_verdict (NetpermdConnection *c, gint64 deadline, GError **error)
{
  while (!c->answered)
    {
      gint64 left = deadline - g_get_monotonic_time ();
      if (left <= 0)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "netpermd at %s did not answer in time", c->path);
          return FALSE;
        }
      struct pollfd p = { .fd = c->fd, .events = POLLIN };
      int n = poll (&p, 1, (int)((left + 999) / 1000));
      if (n < 0 && errno != EINTR)
        {
          int e = errno;
          g_set_error (error, G_IO_ERROR, g_io_error_from_errno (e), "poll: %s", g_strerror (e));
          return FALSE;
        }
      if (n > 0 && !read_available (c, error))
        return FALSE;
    }
  return TRUE;
}

NetpermdConnection *
netpermd_connection_open (const char *path, GMainContext *context, gint64 timeout_us, NetpermdVerdictFunc func,
                          gpointer user_data, char **app, NetpermdVerdict *first, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + timeout_us;
  int fd = connect_socket (path, error);
  if (fd < 0)
    return NULL;
  NetpermdConnection *c = g_new0 (NetpermdConnection, 1);
  c->path = g_strdup (path);
  c->context = g_main_context_ref (context);
  c->func = func;
  c->user_data = user_data;
  c->fd = fd;
  c->pid = getpid ();
  c->in = g_byte_array_new ();
  c->parser = json_parser_new_immutable ();
  c->retry_ms = NETPERMD_RETRY_FIRST_MS;
  c->first = first;
  if (!wait_for_verdict (c, deadline, error))
    {
      netpermd_connection_free (c);
      return NULL;
    }
  c->first = NULL;
  *app = g_strdup (c->app);
  watch_socket (c);
  remember (c, TRUE);
  return c;
}

void
netpermd_connection_free (NetpermdConnection *c)
{
  if (!c)
    return;
  remember (c, FALSE);
  close_socket (c);
  clear_timer (c);
  g_byte_array_unref (c->in);
  g_object_unref (c->parser);
  g_main_context_unref (c->context);
  g_free (c->app);
  g_free (c->path);
  g_free (c);
}
