// SPDX-License-Identifier: LGPL-2.1-or-later
/* The query load generator, used unchanged against netpermd and against the echo baseline: CLIENTS persistent
 * connections, each with one request outstanding (closed loop), until TOTAL replies have arrived (after WARMUP
 * unmeasured ones). One client runs a plain blocking write/read loop; several are driven by one epoll thread.
 * REQUEST may hold alternatives separated by '|': each connection sends them in turn, so no connection repeats
 * its previous request (which the daemon would answer from its per-connection cache).
 * Every reply must begin with {"ok":true.
 *
 *   qclient SOCKET 'REQUEST' CLIENTS TOTAL WARMUP MAX_SECONDS
 * Prints one JSON object: round trips in microseconds, throughput in replies per second. */
#include "common.h"
#include <sys/epoll.h>

typedef struct {
    int fd;
    double sent;
    size_t got; /* bytes of the current reply so far */
    unsigned next; /* the alternative it sends next */
} cl_t;

#define MAX_ALTS 8
static char reqs[MAX_ALTS][512];
static size_t req_lens[MAX_ALTS];
static unsigned nalts;

/* Sends the connection's next request. */
static void send_next(int fd, unsigned *next) {
    write_all(fd, reqs[*next], req_lens[*next]);
    *next = (*next + 1) % nalts;
}
static long errors, reply_len = -1;
static char first_reply[512];

static void check_reply(const char *data, size_t len) {
    if (reply_len < 0) {
        reply_len = (long)len;
        size_t c = len < sizeof first_reply - 1 ? len : sizeof first_reply - 1;
        memcpy(first_reply, data, c);
        first_reply[c] = 0;
        if (c && first_reply[c - 1] == '\n') first_reply[c - 1] = 0;
    }
    if (len < 10 || memcmp(data, "{\"ok\":true", 10) != 0) errors++;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: qclient SOCKET REQUEST CLIENTS TOTAL WARMUP MAX_SECONDS\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    const char *sock = argv[1];
    for (const char *p = argv[2];; nalts++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (nalts == MAX_ALTS || n + 2 > sizeof reqs[0]) die("too many or too long requests");
        memcpy(reqs[nalts], p, n);
        reqs[nalts][n] = '\n';
        req_lens[nalts] = n + 1;
        if (!bar) {
            nalts++;
            break;
        }
        p = bar + 1;
    }
    int nclients = atoi(argv[3]);
    long total = atol(argv[4]), warmup = atol(argv[5]);
    double max_us = atof(argv[6]) * 1e6;
    if (raise_nofile((rlim_t)nclients + 64) < (rlim_t)nclients + 64) die("the descriptor limit is too low");

    samples_t rtt = {0};
    rtt.cap = (size_t)total;
    rtt.v = malloc(sizeof(double) * (total ? total : 1));
    long done = 0, measured = 0;
    double t_start = 0, t_end = 0;
    int timed_out = 0;

    if (nclients == 1) {
        int fd = unix_connect(sock);
        if (fd < 0) die("connect %s", sock);
        linereader_t *r = calloc(1, sizeof *r);
        r->fd = fd;
        static char line[1 << 16];
        double deadline = now_us() + max_us;
        unsigned next = 0;
        while (measured < total) {
            if (done == warmup) t_start = now_us();
            double t0 = now_us();
            send_next(fd, &next);
            ssize_t n = read_line(r, line, sizeof line);
            double t1 = now_us();
            if (n < 0) die("server closed the connection");
            check_reply(line, (size_t)n);
            if (done >= warmup) {
                rtt.v[rtt.n++] = t1 - t0;
                measured++;
            }
            done++;
            if (t1 > deadline) {
                timed_out = 1;
                break;
            }
        }
        t_end = now_us();
    } else {
        cl_t *cl = calloc(nclients, sizeof *cl);
        int ep = epoll_create1(EPOLL_CLOEXEC);
        for (int i = 0; i < nclients; i++) {
            cl[i].fd = unix_connect(sock);
            if (cl[i].fd < 0) die("connect %s (client %d)", sock, i);
            fcntl(cl[i].fd, F_SETFL, O_NONBLOCK);
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cl[i]};
            epoll_ctl(ep, EPOLL_CTL_ADD, cl[i].fd, &ev);
        }
        long issued = 0, want = warmup + total;
        for (int i = 0; i < nclients && issued < want; i++, issued++) {
            cl[i].sent = now_us();
            send_next(cl[i].fd, &cl[i].next);
        }
        if (warmup == 0) t_start = now_us();
        static char buf[1 << 16];
        struct epoll_event evs[256];
        double deadline = now_us() + max_us;
        while (done < want) {
            int n = epoll_wait(ep, evs, 256, 1000);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) die("epoll_wait");
            double t = now_us();
            if (t > deadline) {
                timed_out = 1;
                break;
            }
            for (int i = 0; i < n; i++) {
                cl_t *c = evs[i].data.ptr;
                ssize_t r = read(c->fd, buf, sizeof buf);
                if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                if (r <= 0) die("server closed a connection");
                /* Whole replies in this read (one request outstanding: at most one). */
                char *p = buf, *end = buf + r, *nl;
                while ((nl = memchr(p, '\n', end - p))) {
                    size_t part = nl - p + 1;
                    /* A reply that arrived whole is checked; one split across reads (rare) only counted. */
                    if (c->got == 0) check_reply(p, part);
                    c->got = 0;
                    if (done >= warmup) {
                        if (done == warmup && warmup) t_start = c->sent;
                        rtt.v[rtt.n++] = t - c->sent;
                        measured++;
                    }
                    done++;
                    if (issued < want) {
                        c->sent = now_us();
                        send_next(c->fd, &c->next);
                        issued++;
                    }
                    p = nl + 1;
                }
                c->got += end - p;
            }
        }
        t_end = now_us();
    }
    double secs = (t_end - t_start) / 1e6;
    printf("{\"clients\":%d,\"replies\":%ld,\"errors\":%ld,\"timed_out\":%s,\"reply_len\":%ld,\"seconds\":%.4f,"
           "\"throughput\":%.1f,",
           nclients, measured, errors, timed_out ? "true" : "false", reply_len, secs, secs > 0 ? measured / secs : 0);
    samples_json(stdout, "rtt_us", &rtt);
    printf(",\"first_reply\":\"");
    for (char *p = first_reply; *p; p++) {
        if (*p == '"' || *p == '\\') putchar('\\');
        putchar(*p);
    }
    printf("\"}\n");
    return errors || timed_out ? 1 : 0;
}
