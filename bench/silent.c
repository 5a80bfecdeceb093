// SPDX-License-Identifier: LGPL-2.1-or-later
/* Subscribers that never read: N connections that send SUBSCRIBE and never read a byte, while IFNAME's admin
 * state toggles (one change at a time, each acknowledged, INTERVAL_US apart) for SECONDS. Then waits (at most
 * WAIT seconds more) until the daemon has closed every one, and reads what each got: its last line must be the
 * overflow line PROTOCOL.md promises. Runs inside the benchmark's namespace.
 *
 *   silent SOCKET N IFNAME INTERVAL_US SECONDS WAIT
 * Prints {"subscribers":N,"toggles":T,"closed":C,"last_closed_s":X,"overflow":O} (seconds since the toggling began). */
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: silent SOCKET N IFNAME INTERVAL_US SECONDS WAIT\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int n = atoi(argv[2]);
    unsigned ifidx = ifindex_or_die(argv[3]);
    double interval = atof(argv[4]), secs = atof(argv[5]), wait_s = atof(argv[6]);
    if (raise_nofile((rlim_t)n + 64) < (rlim_t)n + 64) die("the descriptor limit is below %d", n + 64);
    int *fds = calloc(n, sizeof *fds);
    double *closed = calloc(n, sizeof *closed);
    for (int i = 0; i < n; i++) {
        fds[i] = unix_connect(argv[1]);
        if (fds[i] < 0) die("connect %s (subscriber %d)", argv[1], i);
        write_all(fds[i], "SUBSCRIBE\n", 10);
        closed[i] = -1;
    }
    int nl = rtnl_open(0, 0);
    struct pollfd *p = calloc(n, sizeof *p);
    double start = now_us(), next = start;
    long toggles = 0;
    int open = n;
    for (;;) {
        double now = now_us();
        if (now - start < secs * 1e6 && now >= next) {
            rtnl_set_up(nl, ifidx, (int)(toggles % 2), 1);
            toggles++;
            next = now + interval;
        }
        if (now - start >= (secs + wait_s) * 1e6 || (open == 0 && now - start >= secs * 1e6)) break;
        for (int i = 0; i < n; i++) p[i] = (struct pollfd){.fd = fds[i], .events = POLLRDHUP};
        poll(p, n, 1);
        for (int i = 0; i < n; i++) {
            if (closed[i] < 0 && (p[i].revents & (POLLRDHUP | POLLHUP))) {
                closed[i] = (now_us() - start) / 1e6;
                open--;
            }
        }
    }
    rtnl_set_up(nl, ifidx, 1, 1);
    double last = 0;
    int overflow = 0;
    static char buf[1 << 16];
    char tail[64];
    for (int i = 0; i < n; i++) {
        if (closed[i] > last) last = closed[i];
        if (closed[i] < 0) continue;
        /* What matters is the end: the last bytes read, at most sizeof tail. */
        size_t have = 0;
        ssize_t k;
        while ((k = read(fds[i], buf, sizeof buf)) > 0) {
            size_t take = (size_t)k < sizeof tail ? (size_t)k : sizeof tail;
            size_t keep = have + take > sizeof tail ? sizeof tail - take : have;
            memmove(tail, tail + have - keep, keep);
            memcpy(tail + keep, buf + k - take, take);
            have = keep + take;
        }
        const char *want = "\n{\"event\":\"overflow\"}\n";
        size_t wl = strlen(want);
        if (have >= wl && memcmp(tail + have - wl, want, wl) == 0) overflow++;
    }
    printf("{\"subscribers\":%d,\"toggles\":%ld,\"closed\":%d,\"last_closed_s\":%.3f,\"overflow\":%d}\n", n, toggles,
           n - open, last, overflow);
    return 0;
}
