// SPDX-License-Identifier: LGPL-2.1-or-later
/* The lines the module reads after `SUBSCRIBE self` (docs/PROTOCOL.md): its acknowledgement, then the snapshot,
 * `app` events and resyncs that carry the app's verdict. Pure: bytes in, meaning out. */
#pragma once

#include "netpermd-verdict.h"

/* The request the module sends on each connection. */
#define NETPERMD_SUBSCRIBE "SUBSCRIBE self\n"

typedef enum {
  /* Nothing for the module (stopping, a future event). */
  NETPERMD_LINE_OTHER,
  /* SUBSCRIBE's reply: `*app` names the caller's app. */
  NETPERMD_LINE_ACK,
  /* The app's verdict, in `*verdict`. */
  NETPERMD_LINE_VERDICT,
  /* An error reply, or a line that is not a JSON object: `*error` says which. */
  NETPERMD_LINE_ERROR,
} NetpermdLine;

/* Reads one line (without its newline). `app` is the app the acknowledgement named (NULL before it); a verdict of
 * another app (a reload made the process that app) sets `*app_out` to its name. */
NetpermdLine netpermd_protocol_read (JsonParser *parser, const char *line, gsize length, const char *app,
                                     char **app_out, NetpermdVerdict *verdict, GError **error);
