// SPDX-License-Identifier: LGPL-2.1-or-later
/* Storm: COUNT RTM_NEWLINK toggles of PEER's IFF_UP in a burst (no acks awaited), then one marker address added
 * to MARKER_IF. A netpermd subscriber (own thread) counts link and app events; a raw RTMGRP_LINK listener (own
 * thread, 64 MiB buffer) counts the kernel's messages. Once the subscriber has seen the marker (so the daemon has
 * consumed everything before it), LINKS is polled until the daemon's view of PEER and LINK equals the kernel's
 * (RTM_GETLINK). Then both counters run on until 300 ms of quiet. Runs inside the namespace.
 *
 *   storm SOCKET PEER LINK MARKER_IF MARKER_IPV4 COUNT
 * Prints one JSON object. */
#include "common.h"
#include <pthread.h>

static const char *sock, *peer, *link_name, *marker_if, *marker_ip;
static unsigned peer_idx, link_idx;
static volatile int stop;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static double t_marker, t_last_event, t_last_raw, t_first_raw;
static long link_events, app_events, other_events, raw_msgs, raw_enobufs;
static int overflow, closed;

static void *raw_thread(void *arg) {
    int fd = *(int *)arg;
    static char buf[1 << 16];
    while (!stop) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        double t = now_us();
        if (n < 0) {
            if (errno == ENOBUFS) raw_enobufs++;
            continue;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
            linkstate_t st;
            unsigned idx = parse_link(h, &st);
            if (idx == peer_idx || idx == link_idx) {
                pthread_mutex_lock(&mu);
                raw_msgs++;
                if (!t_first_raw) t_first_raw = t;
                t_last_raw = t;
                pthread_mutex_unlock(&mu);
            }
        }
    }
    return NULL;
}

static void *sub_thread(void *arg) {
    int fd = *(int *)arg;
    static char buf[1 << 20];
    size_t len = 0;
    char link_needle[128], marker_needle[128], marker_addr[64];
    snprintf(link_needle, sizeof link_needle, "\"name\":\"%s\",", marker_if);
    snprintf(marker_addr, sizeof marker_addr, "\"%s/32\"", marker_ip);
    snprintf(marker_needle, sizeof marker_needle, "%s", marker_addr);
    while (!stop) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        ssize_t n = read(fd, buf + len, sizeof buf - len - 1);
        double t = now_us();
        if (n <= 0) {
            closed = 1;
            break;
        }
        len += n;
        buf[len] = 0;
        char *start = buf, *nl;
        pthread_mutex_lock(&mu);
        while ((nl = strchr(start, '\n'))) {
            *nl = 0;
            if (strstr(start, "\"event\":\"link\"")) {
                if (!t_marker && strstr(start, link_needle) && strstr(start, marker_needle)) t_marker = t;
                else link_events++;
                t_last_event = t;
            } else if (strstr(start, "\"event\":\"app\"")) {
                app_events++;
                t_last_event = t;
            } else if (strstr(start, "\"event\":\"overflow\"")) {
                overflow = 1;
            } else {
                other_events++;
            }
            start = nl + 1;
        }
        pthread_mutex_unlock(&mu);
        len = strlen(start);
        memmove(buf, start, len);
    }
    return NULL;
}

/* From LINKS JSON: the state the daemon reports for one link, in the kernel's terms. */
static int daemon_view(const char *json, const char *name, int *admin, int *carrier, char *oper, size_t opercap) {
    char needle[128];
    snprintf(needle, sizeof needle, "\"name\":\"%s\",", name);
    const char *p = strstr(json, needle);
    if (!p) return 0;
    const char *a = strstr(p, "\"admin_up\":"), *c = strstr(p, "\"carrier\":"), *o = strstr(p, "\"operstate\":\"");
    if (!a || !c || !o) return 0;
    *admin = strncmp(a + 11, "true", 4) == 0;
    *carrier = strncmp(c + 10, "true", 4) == 0;
    o += 13;
    size_t k = 0;
    while (o[k] && o[k] != '"' && k + 1 < opercap) {
        oper[k] = o[k];
        k++;
    }
    oper[k] = 0;
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: storm SOCKET PEER LINK MARKER_IF MARKER_IPV4 COUNT\n");
        return 2;
    }
    sock = argv[1], peer = argv[2], link_name = argv[3], marker_if = argv[4], marker_ip = argv[5];
    int count = atoi(argv[6]);
    peer_idx = ifindex_or_die(peer);
    link_idx = ifindex_or_die(link_name);
    unsigned marker_idx = ifindex_or_die(marker_if);
    struct in_addr ma;
    if (inet_pton(AF_INET, marker_ip, &ma) != 1) die("bad marker address %s", marker_ip);

    int raw = rtnl_open(RTMGRP_LINK, 64 << 20);
    int tog = rtnl_open(0, 8 << 20), ctl = rtnl_open(0, 0), q = rtnl_open(0, 0);
    int sub = unix_connect(sock), lq = unix_connect(sock);
    if (sub < 0 || lq < 0) die("connect %s", sock);
    write_all(sub, "SUBSCRIBE links apps\n", 21);
    {
        linereader_t *r = calloc(1, sizeof *r);
        r->fd = sub;
        static char line[1 << 17];
        for (int i = 0; i < 2; i++)
            if (read_line(r, line, sizeof line) < 0) die("subscriber: EOF before the snapshot");
        free(r);
    }
    linereader_t *lr = calloc(1, sizeof *lr);
    lr->fd = lq;
    static char links[1 << 17];

    linkstate_t start_state = rtnl_get_link(q, peer_idx);
    int up = !(start_state.flags & IFF_UP);
    pthread_t rt, st;
    pthread_create(&rt, NULL, raw_thread, &raw);
    pthread_create(&st, NULL, sub_thread, &sub);
    usleep(50000);

    double t_start = now_us();
    for (int i = 0; i < count; i++, up = !up) rtnl_set_up(tog, peer_idx, up, 0);
    double t_last_toggle = now_us();
    rtnl_add_addr4(ctl, marker_idx, ntohl(ma.s_addr));
    double t_marker_sent = now_us();

    /* The daemon has consumed every message before the marker once it reports the marker. */
    double deadline = t_last_toggle + 20e6;
    while (!t_marker && !closed && now_us() < deadline) usleep(200);
    double t_conv = 0;
    int checks = 0;
    char oper_d[2][32];
    int admin_d[2], carrier_d[2];
    linkstate_t k[2] = {{0, -1}, {0, -1}};
    if (t_marker) {
        while (now_us() < deadline) {
            write_all(lq, "LINKS\n", 6);
            if (read_line(lr, links, sizeof links) < 0) die("LINKS: connection closed");
            double t = now_us();
            checks++;
            k[0] = rtnl_get_link(q, peer_idx);
            k[1] = rtnl_get_link(q, link_idx);
            const char *names[2] = {peer, link_name};
            int equal = 1;
            for (int i = 0; i < 2; i++) {
                if (!daemon_view(links, names[i], &admin_d[i], &carrier_d[i], oper_d[i], sizeof oper_d[i])) {
                    equal = 0;
                    continue;
                }
                if (admin_d[i] != !!(k[i].flags & IFF_UP) || carrier_d[i] != !!(k[i].flags & IFF_LOWER_UP) ||
                    strcmp(oper_d[i], operstate_name(k[i].operstate)) != 0)
                    equal = 0;
            }
            if (equal) {
                t_conv = t;
                break;
            }
            usleep(500);
        }
    }
    /* Count on until 300 ms without a new event or kernel message (at most 5 s). */
    double hard = now_us() + 5e6;
    for (;;) {
        usleep(20000);
        pthread_mutex_lock(&mu);
        double last = t_last_event > t_last_raw ? t_last_event : t_last_raw;
        pthread_mutex_unlock(&mu);
        if (now_us() - last > 300e3 || now_us() > hard) break;
    }
    stop = 1;
    pthread_join(rt, NULL);
    pthread_join(st, NULL);

    long events = link_events + app_events;
    printf("{\"toggles\":%d,\"burst_ms\":%.3f,\"converged\":%s,\"converge_ms\":%.3f,\"marker_ms\":%.3f,"
           "\"marker_sent_ms\":%.3f,\"kernel_settle_ms\":%.3f,\"kernel_msgs\":%ld,\"kernel_enobufs\":%ld,"
           "\"link_events\":%ld,\"app_events\":%ld,\"events\":%ld,\"events_per_toggle\":%.4f,"
           "\"kernel_msgs_per_toggle\":%.4f,\"overflow\":%s,\"subscriber_closed\":%s,\"checks\":%d,"
           "\"final\":{\"kernel\":[\"%s up=%d carrier=%d %s\",\"%s up=%d carrier=%d %s\"]}}\n",
           count, (t_last_toggle - t_start) / 1e3, t_conv ? "true" : "false",
           t_conv ? (t_conv - t_last_toggle) / 1e3 : -1.0, t_marker ? (t_marker - t_last_toggle) / 1e3 : -1.0,
           (t_marker_sent - t_last_toggle) / 1e3, (t_last_raw - t_last_toggle) / 1e3, raw_msgs, raw_enobufs,
           link_events, app_events, events, count ? (double)events / count : 0, count ? (double)raw_msgs / count : 0,
           overflow ? "true" : "false", closed ? "true" : "false", checks, peer, !!(k[0].flags & IFF_UP),
           !!(k[0].flags & IFF_LOWER_UP), operstate_name(k[0].operstate), link_name, !!(k[1].flags & IFF_UP),
           !!(k[1].flags & IFF_LOWER_UP), operstate_name(k[1].operstate));
    return t_conv && !overflow && !closed ? 0 : 1;
}
