// SPDX-License-Identifier: LGPL-2.1-or-later
/* A UDP socket's connect() makes the kernel look the route up (with the process's uid, marks and rules, as its
 * real connection would) and sends nothing. */
#include "netpermd-reach.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

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
  int fd = socket (native.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int e = fd < 0 ? errno : connect (fd, (struct sockaddr *)&native, (socklen_t)size) == 0 ? 0 : errno;
  if (fd >= 0)
    close (fd);
  if (e == 0)
    return TRUE;
  g_autofree char *text = G_IS_INET_SOCKET_ADDRESS (address)
      ? g_inet_address_to_string (g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (address)))
      : g_strdup ("the address");
  g_set_error (error, G_IO_ERROR, g_io_error_from_errno (e), "no route to %s: %s", text, g_strerror (e));
  return FALSE;
}
