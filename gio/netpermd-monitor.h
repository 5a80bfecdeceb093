// SPDX-License-Identifier: LGPL-2.1-or-later
/* GNetworkMonitor backed by netpermd: the calling process's own app's verdict (docs/APPS.md). */
#pragma once

#include <gio/gio.h>

#define NETPERMD_TYPE_NETWORK_MONITOR (netpermd_network_monitor_get_type ())
G_DECLARE_FINAL_TYPE (NetpermdNetworkMonitor, netpermd_network_monitor, NETPERMD, NETWORK_MONITOR, GObject)

/* Registers the type in `module` and implements the network-monitor extension point with it. */
void netpermd_network_monitor_register (GIOModule *module);

/* Above GLib's networkmanager (30), below its portal (40), which sandboxed apps must keep. */
#define NETPERMD_MONITOR_PRIORITY 35
/* How long initialisation waits for the daemon before giving way to the next monitor. */
#define NETPERMD_INIT_TIMEOUT_MS 100
/* How long can_reach() waits for the daemon's judgment of a destination before judging without it. */
#define NETPERMD_REACH_TIMEOUT_MS 100
/* How long can_reach_async() waits for the person to answer the prompt it raised (the prompt's own expiry,
 * PromptTimeoutSec=, usually ends it sooner). */
#define NETPERMD_REACH_WAIT_S 600
/* How long it waits for NetworkManager's Connectivity (heard of later when slower). */
#define NETPERMD_NM_TIMEOUT_MS 50
/* The program that answers sandboxed apps for the host: it must report the host's state, never its own verdict. */
#define NETPERMD_PORTAL_PROGRAM "xdg-desktop-portal"
