// SPDX-License-Identifier: LGPL-2.1-or-later
/* Shared helpers of the benchmark's load generators and baselines (the C files in bench/).
 * Everything here is plain libc + Linux: monotonic time, sample statistics printed as JSON, Unix-socket
 * clients, and rtnetlink requests (set a link's IFF_UP, add an address, read a link's state). */
#ifndef NPBENCH_COMMON_H
#define NPBENCH_COMMON_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

unsigned int if_nametoindex(const char *ifname);

static inline double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "npbench: ");
    vfprintf(stderr, fmt, ap);
    if (errno) fprintf(stderr, ": %s", strerror(errno));
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/* ---- samples ---------------------------------------------------------------------------------------------- */

typedef struct {
    double *v;
    size_t n, cap;
} samples_t;

static inline void samples_add(samples_t *s, double x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = realloc(s->v, s->cap * sizeof(double));
        if (!s->v) die("out of memory");
    }
    s->v[s->n++] = x;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted samples. */
static inline double pct_sorted(const double *v, size_t n, double p) {
    if (n == 0) return 0;
    size_t rank = (size_t)(p / 100.0 * n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return v[rank - 1];
}

/* Prints "name":{"n":..,"min":..,"median":..,"p99":..,"max":..,"mean":..} (values as given, e.g. µs). */
static inline void samples_json(FILE *f, const char *name, samples_t *s) {
    double sum = 0;
    for (size_t i = 0; i < s->n; i++) sum += s->v[i];
    qsort(s->v, s->n, sizeof(double), cmp_double);
    fprintf(f, "\"%s\":{\"n\":%zu,\"min\":%.3f,\"median\":%.3f,\"p99\":%.3f,\"max\":%.3f,\"mean\":%.3f}", name, s->n,
            s->n ? s->v[0] : 0, pct_sorted(s->v, s->n, 50), pct_sorted(s->v, s->n, 99),
            s->n ? s->v[s->n - 1] : 0, s->n ? sum / s->n : 0);
}

/* ---- Unix sockets ----------------------------------------------------------------------------------------- */

static inline int unix_connect(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static inline void write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("write");
        }
        buf += n;
        len -= n;
    }
}

/* Reads one '\n'-terminated line (blocking) into buf; returns its length including '\n', or -1 on EOF/error. */
typedef struct {
    int fd;
    char buf[1 << 16];
    size_t start, end;
} linereader_t;

static inline ssize_t read_line(linereader_t *r, char *out, size_t cap) {
    for (;;) {
        char *nl = memchr(r->buf + r->start, '\n', r->end - r->start);
        if (nl) {
            size_t len = nl - (r->buf + r->start) + 1;
            size_t c = len < cap - 1 ? len : cap - 1;
            memcpy(out, r->buf + r->start, c);
            out[c] = 0;
            r->start += len;
            return (ssize_t)len;
        }
        if (r->start > 0) {
            memmove(r->buf, r->buf + r->start, r->end - r->start);
            r->end -= r->start;
            r->start = 0;
        }
        if (r->end == sizeof r->buf) die("line too long");
        ssize_t n = read(r->fd, r->buf + r->end, sizeof r->buf - r->end);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        r->end += n;
    }
}

/* ---- rtnetlink -------------------------------------------------------------------------------------------- */

static inline int rtnl_open(unsigned groups, int rcvbuf) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) die("netlink socket");
    if (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_nl a = {.nl_family = AF_NETLINK, .nl_groups = groups};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) die("netlink bind");
    return fd;
}

static inline unsigned ifindex_or_die(const char *name) {
    unsigned i = if_nametoindex(name);
    if (!i) die("no link %s in this namespace", name);
    return i;
}

/* Reads the kernel's answer to a request sent with NLM_F_ACK; dies on an error, naming `what`. */
static inline void nl_ack_or_die(int fd, const char *what) {
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) die("netlink recv (%s)", what);
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    if (h->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *e = NLMSG_DATA(h);
        if (e->error) {
            errno = -e->error;
            die("%s", what);
        }
    }
}

/* Sends RTM_NEWLINK setting or clearing IFF_UP; with ack, waits for the kernel's answer and dies on error. */
static inline void rtnl_set_up(int fd, unsigned ifindex, int up, int ack) {
    static unsigned seq;
    struct {
        struct nlmsghdr nh;
        struct ifinfomsg ifi;
    } req = {
        .nh = {.nlmsg_len = sizeof req, .nlmsg_type = RTM_NEWLINK,
               .nlmsg_flags = NLM_F_REQUEST | (ack ? NLM_F_ACK : 0), .nlmsg_seq = ++seq},
        .ifi = {.ifi_family = AF_UNSPEC, .ifi_index = (int)ifindex, .ifi_flags = up ? IFF_UP : 0, .ifi_change = IFF_UP},
    };
    if (send(fd, &req, sizeof req, 0) != (ssize_t)sizeof req) die("netlink send");
    if (!ack) return;
    char what[48];
    snprintf(what, sizeof what, "RTM_NEWLINK on ifindex %u", ifindex);
    nl_ack_or_die(fd, what);
}

/* RTM_NEWADDR of an IPv4 address (host byte order) with a prefix length, with ack. */
static inline void rtnl_add_addr4_prefix(int fd, unsigned ifindex, uint32_t addr, unsigned char prefixlen) {
    struct {
        struct nlmsghdr nh;
        struct ifaddrmsg ifa;
        char attrs[64];
    } req;
    memset(&req, 0, sizeof req);
    req.nh.nlmsg_type = RTM_NEWADDR;
    req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    req.ifa.ifa_family = AF_INET;
    req.ifa.ifa_prefixlen = prefixlen;
    req.ifa.ifa_index = ifindex;
    uint32_t be = htonl(addr);
    char *p = req.attrs;
    unsigned short types[2] = {IFA_LOCAL, IFA_ADDRESS};
    for (int i = 0; i < 2; i++) {
        struct rtattr *rta = (struct rtattr *)p;
        rta->rta_type = types[i];
        rta->rta_len = RTA_LENGTH(4);
        memcpy(RTA_DATA(rta), &be, 4);
        p += RTA_ALIGN(rta->rta_len);
    }
    req.nh.nlmsg_len = NLMSG_LENGTH(sizeof req.ifa) + (p - req.attrs);
    if (send(fd, &req, req.nh.nlmsg_len, 0) < 0) die("netlink send RTM_NEWADDR");
    char buf[4096];
    if (recv(fd, buf, sizeof buf, 0) < 0) die("netlink recv");
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    if (h->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *e = NLMSG_DATA(h);
        if (e->error) {
            errno = -e->error;
            die("RTM_NEWADDR");
        }
    }
}

/* RTM_NEWADDR of an IPv4 /32 (host byte order), with ack. */
static inline void rtnl_add_addr4(int fd, unsigned ifindex, uint32_t addr) { rtnl_add_addr4_prefix(fd, ifindex, addr, 32); }

typedef struct {
    unsigned flags;
    int operstate; /* IF_OPER_* */
} linkstate_t;

/* Fills st from an RTM_NEWLINK message; returns its ifindex (0 if not a link message). */
static inline unsigned parse_link(struct nlmsghdr *h, linkstate_t *st) {
    if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) return 0;
    struct ifinfomsg *ifi = NLMSG_DATA(h);
    st->flags = ifi->ifi_flags;
    st->operstate = -1;
    int len = h->nlmsg_len - NLMSG_LENGTH(sizeof *ifi);
    for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len))
        if (a->rta_type == IFLA_OPERSTATE) st->operstate = *(unsigned char *)RTA_DATA(a);
    return (unsigned)ifi->ifi_index;
}

/* The kernel's current state of one link (RTM_GETLINK on a private socket). */
static inline linkstate_t rtnl_get_link(int fd, unsigned ifindex) {
    struct {
        struct nlmsghdr nh;
        struct ifinfomsg ifi;
    } req = {
        .nh = {.nlmsg_len = sizeof req, .nlmsg_type = RTM_GETLINK, .nlmsg_flags = NLM_F_REQUEST},
        .ifi = {.ifi_family = AF_UNSPEC, .ifi_index = (int)ifindex},
    };
    if (send(fd, &req, sizeof req, 0) < 0) die("netlink send RTM_GETLINK");
    static char buf[1 << 16];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) die("netlink recv RTM_GETLINK");
    linkstate_t st = {0, -1};
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n))
        if (parse_link(h, &st) == ifindex) return st;
    die("RTM_GETLINK %u: no answer", ifindex);
    return st;
}

static inline const char *operstate_name(int s) {
    static const char *names[] = {"unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up"};
    return s >= 0 && s <= 6 ? names[s] : "unknown";
}

/* Raises the soft descriptor limit to `want`, or to the hard limit when that is lower (without
 * CAP_SYS_RESOURCE the hard limit cannot be raised); returns the limit now in force. */
static inline rlim_t raise_nofile(rlim_t want) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur >= want) return rl.rlim_cur;
    if (rl.rlim_max < want) {
        struct rlimit more = {want, want};
        if (setrlimit(RLIMIT_NOFILE, &more) == 0) return want;
        want = rl.rlim_max;
    }
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) die("setrlimit NOFILE %lu", (unsigned long)want);
    return want;
}

/* A unit starting: makes the cgroup DIR/SCOPE, moves a child process into it, which sends a UDP datagram to HOST:PORT
 * every millisecond until the kernel refuses one (EPERM), at most 5 s; then removes the cgroup. The microseconds
 * from the mkdir to that refusal, or -1 when none came. Needs root and the host's cgroup hierarchy. */
static inline double first_refused(const char *dir, const char *scope, const char *host, int port) {
    char path[1024], procs[1100];
    snprintf(path, sizeof path, "%s/%s", dir, scope);
    int report[2];
    if (pipe(report) != 0) die("pipe");
    double start = now_us();
    if (mkdir(path, 0755) != 0) die("mkdir %s", path);
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        close(report[0]);
        snprintf(procs, sizeof procs, "%s/cgroup.procs", path);
        int fd = open(procs, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1) die("join %s", procs);
        close(fd);
        /* A socket is its cgroup's from when it is made: after the move. */
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, host, &to.sin_addr);
        double refused = -1;
        while (now_us() - start < 5e6) {
            if (sendto(s, "x", 1, 0, (struct sockaddr *)&to, sizeof to) < 0) {
                if (errno != EPERM) die("sendto");
                refused = now_us() - start;
                break;
            }
            usleep(1000);
        }
        if (write(report[1], &refused, sizeof refused) != sizeof refused) die("report");
        _exit(0);
    }
    close(report[1]);
    double refused = -1;
    if (read(report[0], &refused, sizeof refused) != sizeof refused) refused = -1;
    close(report[0]);
    waitpid(child, NULL, 0);
    for (int i = 0; i < 500 && rmdir(path) != 0; i++) {
        if (errno != EBUSY) die("rmdir %s", path);
        usleep(10000);
    }
    return refused;
}


#endif
