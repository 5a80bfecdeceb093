// SPDX-License-Identifier: LGPL-2.1-or-later
/* The subscriber swarm, used unchanged against netpermd and against the raw fan-out baseline: N connections each
 * send "SUBSCRIBE links" and read the reply and the snapshot; then (after "go" on stdin) each round toggles IFNAME
 * with RTM_NEWLINK and times until every subscriber has read one event line. Runs inside the namespace.
 *
 *   swarm SOCKET N ROUNDS IFNAME
 * stdout: {"connected":N,...} once set up, then (after a line on stdin) the result; exits at stdin EOF. */
#include "common.h"
#include <sys/epoll.h>

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: swarm SOCKET N ROUNDS IFNAME\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    const char *sock = argv[1];
    int n = atoi(argv[2]), rounds = atoi(argv[3]);
    unsigned ifidx = ifindex_or_die(argv[4]);
    if (raise_nofile((rlim_t)n + 64) < (rlim_t)n + 64) die("the descriptor limit is below %d", n + 64);
    int tog = rtnl_open(0, 0), q = rtnl_open(0, 0);

    int *fds = calloc(n, sizeof *fds), *lines = calloc(n, sizeof *lines);
    double *at = calloc(n, sizeof *at);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    double t_setup = now_us();
    for (int i = 0; i < n; i++) {
        fds[i] = unix_connect(sock);
        if (fds[i] < 0) die("connect %s (subscriber %d)", sock, i);
        write_all(fds[i], "SUBSCRIBE links\n", 16);
        fcntl(fds[i], F_SETFL, O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0) die("epoll_ctl");
    }
    static char buf[1 << 16];
    struct epoll_event evs[1024];
    /* Reply and snapshot on every connection. */
    int ready = 0;
    double deadline = now_us() + 60e6;
    while (ready < n) {
        int k = epoll_wait(ep, evs, 1024, 1000);
        if (now_us() > deadline) die("only %d of %d subscribers got their snapshot within 60 s", ready, n);
        for (int e = 0; e < k; e++) {
            int i = (int)evs[e].data.u32;
            ssize_t r = read(fds[i], buf, sizeof buf);
            if (r == 0) die("subscriber %d: closed during set-up", i);
            if (r < 0) continue;
            int before = lines[i];
            for (char *p = buf; (p = memchr(p, '\n', buf + r - p)); p++) lines[i]++;
            if (before < 2 && lines[i] >= 2) ready++;
            if (lines[i] > 2) die("subscriber %d: an event arrived before the first toggle", i);
        }
    }
    printf("{\"connected\":%d,\"setup_ms\":%.1f}\n", n, (now_us() - t_setup) / 1e3);
    fflush(stdout);
    char go[64];
    if (!fgets(go, sizeof go, stdin)) return 0;

    samples_t last = {0}, first = {0}, median = {0};
    int up = !(rtnl_get_link(q, ifidx).flags & IFF_UP);
    long event_len = -1, extra = 0;
    int timeouts = 0;
    for (int round = 0; round < rounds; round++, up = !up) {
        memset(lines, 0, n * sizeof *lines);
        int got = 0;
        double t0 = now_us(), t_first = 0, t_last = 0;
        rtnl_set_up(tog, ifidx, up, 1);
        deadline = t0 + 10e6;
        while (got < n && now_us() < deadline) {
            int k = epoll_wait(ep, evs, 1024, 100);
            double t = now_us();
            for (int e = 0; e < k; e++) {
                int i = (int)evs[e].data.u32;
                ssize_t r = read(fds[i], buf, sizeof buf);
                if (r == 0) die("subscriber %d: the server closed it", i);
                if (r < 0) continue;
                char *nl = memchr(buf, '\n', r);
                if (!nl) continue;
                if (event_len < 0) event_len = nl - buf + 1;
                if (lines[i]++ == 0) {
                    at[got++] = t - t0;
                    if (!t_first) t_first = t;
                    t_last = t;
                }
            }
        }
        if (got < n) {
            fprintf(stderr, "swarm: round %d: only %d of %d subscribers got an event within 10 s\n", round, got, n);
            timeouts++;
            continue;
        }
        samples_add(&last, t_last - t0);
        samples_add(&first, t_first - t0);
        qsort(at, n, sizeof *at, cmp_double);
        samples_add(&median, at[n / 2]);
        /* Let follow-up events (operstate, a second message) arrive and be read before the next round. */
        double quiet_until = now_us() + 30e3, hard = now_us() + 2e6;
        while (now_us() < quiet_until && now_us() < hard) {
            int k = epoll_wait(ep, evs, 1024, 10);
            for (int e = 0; e < k; e++) {
                ssize_t r = read(fds[evs[e].data.u32], buf, sizeof buf);
                if (r > 0) {
                    extra++;
                    quiet_until = now_us() + 30e3;
                }
            }
        }
    }
    printf("{\"subscribers\":%d,\"rounds\":%d,\"timeouts\":%d,\"event_len\":%ld,\"late_reads\":%ld,", n, rounds,
           timeouts, event_len, extra);
    samples_json(stdout, "last_us", &last);
    printf(",");
    samples_json(stdout, "first_us", &first);
    printf(",");
    samples_json(stdout, "median_sub_us", &median);
    printf("}\n");
    fflush(stdout);
    while (fgets(go, sizeof go, stdin)) {}
    return timeouts ? 1 : 0;
}
