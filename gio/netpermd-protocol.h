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

/* REACH's answer for one destination (docs/PROTOCOL.md). */
typedef enum {
  /* The daemon could not be asked, or did not answer the question (an older daemon: `unknown-verb`): judge
   * without it. */
  NETPERMD_REACH_UNASKED,
  NETPERMD_REACH_YES,
  /* Not now: `*error` has the verdict's code and sentence. */
  NETPERMD_REACH_NO,
  /* The kernel would not route it (a blocking route, a link without carrier, no route): the kernel's own error
   * says it best; `*error` has the daemon's sentence. */
  NETPERMD_REACH_UNROUTED,
} NetpermdReach;

/* `REACH ADDRESS [SECONDS]\n`: `wait_s` 0 asks for an answer at once, else the reply may wait that long for the
 * person to answer the prompt it raises. */
char *netpermd_reach_request (GInetAddress *address, guint wait_s);

/* Reads REACH's reply (one line, without its newline). */
NetpermdReach netpermd_reach_reply (JsonParser *parser, const char *line, gsize length, GError **error);
