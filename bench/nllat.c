// SPDX-License-Identifier: LGPL-2.1-or-later
/* Event latency: toggles a veth peer's IFF_UP with RTM_NEWLINK (so the other end's carrier flips and an app's
 * verdict with it), and timestamps, in one poll loop, (a) a raw RTMGRP_LINK listener receiving the kernel's
 * message about the other end's carrier and (b) a netpermd subscriber reading the `link` event of that link and
 * the `app` event of the app. Runs inside the benchmark's namespace.
 *
 *   nllat SOCKET PEER LINK APP COUNT GAP_MS
 * Prints one JSON object: samples in microseconds. */
#include "common.h"

typedef struct {
    int fd;
    char buf[1 << 17];
    size_t len;
} sub_t;

static int contains(const char *line, const char *needle) { return strstr(line, needle) != NULL; }

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: nllat SOCKET PEER LINK APP COUNT GAP_MS\n");
        return 2;
    }
    const char *sock = argv[1], *peer = argv[2], *link = argv[3], *app = argv[4];
    int count = atoi(argv[5]), gap_ms = atoi(argv[6]);
    unsigned peer_idx = ifindex_or_die(peer), link_idx = ifindex_or_die(link);

    int raw = rtnl_open(RTMGRP_LINK, 4 << 20);
    int tog = rtnl_open(0, 0);
    fcntl(raw, F_SETFL, O_NONBLOCK);

    static sub_t sub;
    sub.fd = unix_connect(sock);
    if (sub.fd < 0) die("connect %s", sock);
    write_all(sub.fd, "SUBSCRIBE links apps\n", 21);
    /* The reply and the snapshot. */
    {
        linereader_t *r = calloc(1, sizeof *r);
        r->fd = sub.fd;
        static char line[1 << 17];
        for (int i = 0; i < 2; i++)
            if (read_line(r, line, sizeof line) < 0) die("subscriber: EOF before the snapshot");
        if (r->end != r->start) die("subscriber: unexpected event before the first toggle");
        free(r);
    }
    fcntl(sub.fd, F_SETFL, O_NONBLOCK);

    char link_needle[128], app_needle[128];
    snprintf(link_needle, sizeof link_needle, "\"name\":\"%s\",", link);
    snprintf(app_needle, sizeof app_needle, "\"app\":\"%s\",", app);

    samples_t kernel = {0}, added_link = {0}, added = {0}, total = {0}, added_dir[2] = {{0}, {0}};
    int timeouts = 0, link_events = 0, app_events = 0, other_events = 0;
    static char nlbuf[1 << 16];

    for (int i = 0; i < count; i++) {
        int up = i % 2; /* start from up: first toggle takes the peer down */
        /* Drain what the previous toggle left (follow-up messages, the peer's own events). */
        while (recv(raw, nlbuf, sizeof nlbuf, 0) > 0) {}
        for (;;) {
            ssize_t n = read(sub.fd, sub.buf, sizeof sub.buf);
            if (n <= 0) break;
        }
        sub.len = 0;

        double t0 = now_us(), t_raw = 0, t_link = 0, t_app = 0;
        rtnl_set_up(tog, peer_idx, up, 0);
        const char *carrier = up ? "\"carrier\":true" : "\"carrier\":false";
        const char *avail = up ? "\"available\":true" : "\"available\":false";
        while (!(t_raw && t_link && t_app)) {
            double left = t0 + 2e6 - now_us();
            if (left <= 0) break;
            struct pollfd p[2] = {{raw, POLLIN, 0}, {sub.fd, POLLIN, 0}};
            int r = poll(p, 2, (int)(left / 1000) + 1);
            if (r < 0 && errno != EINTR) die("poll");
            if (p[0].revents & POLLIN) {
                double t = now_us();
                ssize_t n;
                while ((n = recv(raw, nlbuf, sizeof nlbuf, 0)) > 0) {
                    for (struct nlmsghdr *h = (struct nlmsghdr *)nlbuf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
                        linkstate_t st;
                        if (parse_link(h, &st) == link_idx && !t_raw && !!(st.flags & IFF_LOWER_UP) == up) t_raw = t;
                    }
                }
            }
            if (p[1].revents & (POLLIN | POLLHUP)) {
                double t = now_us();
                ssize_t n = read(sub.fd, sub.buf + sub.len, sizeof sub.buf - sub.len - 1);
                if (n == 0) die("netpermd closed the subscription");
                if (n > 0) {
                    sub.len += n;
                    sub.buf[sub.len] = 0;
                    char *start = sub.buf, *nl;
                    while ((nl = strchr(start, '\n'))) {
                        *nl = 0;
                        if (contains(start, "\"event\":\"link\"")) {
                            link_events++;
                            if (!t_link && contains(start, link_needle) && contains(start, carrier)) t_link = t;
                        } else if (contains(start, "\"event\":\"app\"")) {
                            app_events++;
                            if (!t_app && contains(start, app_needle) && contains(start, avail)) t_app = t;
                        } else {
                            other_events++;
                        }
                        start = nl + 1;
                    }
                    sub.len = strlen(start);
                    memmove(sub.buf, start, sub.len);
                }
            }
        }
        if (!(t_raw && t_link && t_app)) {
            fprintf(stderr, "nllat: toggle %d (%s): raw %s, link event %s, app event %s within 2 s\n", i,
                    up ? "up" : "down", t_raw ? "seen" : "MISSING", t_link ? "seen" : "MISSING",
                    t_app ? "seen" : "MISSING");
            timeouts++;
        } else {
            double done = t_link > t_app ? t_link : t_app;
            samples_add(&kernel, t_raw - t0);
            samples_add(&added_link, t_link - t_raw);
            samples_add(&added, done - t_raw);
            samples_add(&added_dir[up], done - t_raw);
            samples_add(&total, done - t0);
        }
        usleep(gap_ms * 1000);
    }
    printf("{\"toggles\":%d,\"timeouts\":%d,\"link_events\":%d,\"app_events\":%d,\"other_events\":%d,", count,
           timeouts, link_events, app_events, other_events);
    samples_json(stdout, "kernel_us", &kernel);
    printf(",");
    samples_json(stdout, "added_link_us", &added_link);
    printf(",");
    samples_json(stdout, "added_us", &added);
    printf(",");
    samples_json(stdout, "netpermd_us", &total);
    printf(",");
    samples_json(stdout, "added_down_us", &added_dir[0]);
    printf(",");
    samples_json(stdout, "added_up_us", &added_dir[1]);
    printf("}\n");
    return timeouts ? 1 : 0;
}
