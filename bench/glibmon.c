// SPDX-License-Identifier: LGPL-2.1-or-later
/* The GLib module's figures (13), from inside a GLib process, against what GLib itself does in the same run.
 *
 *   glibmon init
 *     One g_network_monitor_get_default(): which monitor GLib chose, how long the call took, and the process's
 *     RSS before and after (kB). The harness runs it with the module (GIO_EXTRA_MODULES) and without it, where
 *     GLib's netlink monitor answers.
 *   glibmon latency SOCKET PEER COUNT GAP_MS
 *     Toggles PEER's IFF_UP (its veth partner's carrier, and with it this process's verdict) COUNT times and
 *     timestamps (a) a plain subscriber of the same app (`SUBSCRIBE self` on SOCKET, read by a thread of its own)
 *     reading the `app` event and (b) the module's network-changed signal in the main loop.
 * Prints one JSON object; samples in microseconds. Runs inside the benchmark's namespace. */
#include "common.h"

#include <gio/gio.h>
#include <pthread.h>

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb;
}

static int init_figure(void) {
    long before = rss_kb();
    double t0 = now_us();
    GNetworkMonitor *m = g_network_monitor_get_default();
    double took = now_us() - t0;
    /* What the first pass of the main loop does (the module's socket source, GLib's netlink dump) counts too. */
    while (g_main_context_iteration(NULL, FALSE)) {}
    printf("{\"type\":\"%s\",\"init_us\":%.1f,\"rss_kb_before\":%ld,\"rss_kb_after\":%ld,\"available\":%s}\n",
           G_OBJECT_TYPE_NAME(m), took, before, rss_kb(), g_network_monitor_get_network_available(m) ? "true" : "false");
    return 0;
}

/* ---- latency ---------------------------------------------------------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The availability the next toggle should produce, and when each side saw it (0: not yet). */
static int want_available;
static double t_raw, t_signal;

static void *raw_subscriber(void *arg) {
    linereader_t *r = arg;
    static char line[1 << 16];
    while (read_line(r, line, sizeof line) >= 0) {
        if (!strstr(line, "\"event\":\"app\"")) continue;
        double t = now_us();
        int available = strstr(line, "\"available\":true") != NULL;
        pthread_mutex_lock(&lock);
        if (!t_raw && available == want_available) t_raw = t;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void on_changed(GNetworkMonitor *m, gboolean available, gpointer data) {
    (void)m, (void)data;
    double t = now_us();
    pthread_mutex_lock(&lock);
    if (!t_signal && available == want_available) t_signal = t;
    pthread_mutex_unlock(&lock);
}

static gboolean on_deadline(gpointer flag) {
    *(int *)flag = 1;
    return G_SOURCE_REMOVE;
}

static int latency_figure(const char *sock, const char *peer, int count, int gap_ms) {
    unsigned peer_idx = ifindex_or_die(peer);
    int tog = rtnl_open(0, 0);
    GNetworkMonitor *m = g_network_monitor_get_default();
    if (strcmp(G_OBJECT_TYPE_NAME(m), "NetpermdNetworkMonitor") != 0) die("GLib chose %s, not the module", G_OBJECT_TYPE_NAME(m));
    g_signal_connect(m, "network-changed", G_CALLBACK(on_changed), NULL);

    linereader_t *r = calloc(1, sizeof *r);
    r->fd = unix_connect(sock);
    if (r->fd < 0) die("connect %s", sock);
    write_all(r->fd, "SUBSCRIBE self\n", 15);
    static char line[1 << 16];
    for (int i = 0; i < 2; i++)
        if (read_line(r, line, sizeof line) < 0) die("subscriber: EOF before the snapshot");
    pthread_t thread;
    if (pthread_create(&thread, NULL, raw_subscriber, r) != 0) die("pthread_create");

    samples_t raw = {0}, module = {0}, added = {0};
    int timeouts = 0;
    for (int i = 0; i < count; i++) {
        int up = i % 2; /* the link starts up: the first toggle takes the verdict away */
        pthread_mutex_lock(&lock);
        want_available = up;
        t_raw = t_signal = 0;
        pthread_mutex_unlock(&lock);
        double t0 = now_us();
        rtnl_set_up(tog, peer_idx, up, 0);
        int late = 0;
        guint deadline = g_timeout_add(2000, on_deadline, &late);
        double seen_raw = 0, seen_signal = 0;
        while (!late) {
            pthread_mutex_lock(&lock);
            seen_raw = t_raw, seen_signal = t_signal;
            pthread_mutex_unlock(&lock);
            if (seen_raw && seen_signal) break;
            /* Blocks in the loop until the module's source fires; once the signal is in, waits for the thread. */
            if (seen_signal) g_usleep(50);
            else g_main_context_iteration(NULL, TRUE);
        }
        if (!late) g_source_remove(deadline);
        if (!(seen_raw && seen_signal)) {
            fprintf(stderr, "glibmon: toggle %d (%s): app event %s, network-changed %s within 2 s\n", i,
                    up ? "up" : "down", seen_raw ? "seen" : "MISSING", seen_signal ? "seen" : "MISSING");
            timeouts++;
        } else {
            samples_add(&raw, seen_raw - t0);
            samples_add(&module, seen_signal - t0);
            samples_add(&added, seen_signal - seen_raw);
        }
        usleep(gap_ms * 1000);
    }
    printf("{\"toggles\":%d,\"timeouts\":%d,", count, timeouts);
    samples_json(stdout, "raw_us", &raw);
    printf(",");
    samples_json(stdout, "module_us", &module);
    printf(",");
    samples_json(stdout, "added_us", &added);
    printf("}\n");
    return timeouts ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "init") == 0) return init_figure();
    if (argc == 6 && strcmp(argv[1], "latency") == 0)
        return latency_figure(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
    fprintf(stderr, "usage: glibmon init | glibmon latency SOCKET PEER COUNT GAP_MS\n");
    return 2;
}
