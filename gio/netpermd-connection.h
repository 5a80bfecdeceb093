// SPDX-License-Identifier: LGPL-2.1-or-later
/* The module's connection to netpermd: `SUBSCRIBE self`, the app's verdict as it changes, and reconnection with
 * back-off when the daemon goes. Transport only: what the lines mean is netpermd-protocol's. */
#pragma once

#include "netpermd-verdict.h"

typedef struct _NetpermdConnection NetpermdConnection;

/* A verdict of `app` the daemon sent, from the connection's main context. */
typedef void (*NetpermdVerdictFunc) (const char *app, const NetpermdVerdict *verdict, gpointer user_data);

/* Connects to `path`, subscribes, and waits at most `timeout_us` for the app's verdict (the only time the module
 * blocks). Then `app` and `first` have it, and the connection follows the daemon from `context` without blocking,
 * calling `func` with each new verdict. NULL and `error` when the daemon is not there or does not answer in time. */
NetpermdConnection *netpermd_connection_open (const char *path, GMainContext *context, gint64 timeout_us,
                                              NetpermdVerdictFunc func, gpointer user_data, char **app,
                                              NetpermdVerdict *first, GError **error);

void netpermd_connection_free (NetpermdConnection *c);

/* After the connection was lost, the first attempt waits this long, each next one twice as long up to the most. */
#define NETPERMD_RETRY_FIRST_MS 50
#define NETPERMD_RETRY_MAX_MS 5000
/* A daemon that accepts a reconnection but sends no verdict within this is given up on and tried again. */
#define NETPERMD_ANSWER_MS 5000
