// SPDX-License-Identifier: LGPL-2.1-or-later
/* The fan-out baseline: a minimal single-threaded epoll server that takes the same subscribers as netpermd
 * (answers their SUBSCRIBE line with a reply and a snapshot line) and, for every RTM_NEWLINK the kernel sends on
 * RTMGRP_LINK, writes one line of LINE_LEN bytes (netpermd's link event length) to every subscriber in a loop.
 * Runs inside the benchmark's namespace.
 *
 *   fanout SOCKET LINE_LEN */
#include "common.h"
#include <sys/epoll.h>

typedef struct {
    int fd;
    int subscribed;
} sub_t;

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: fanout SOCKET LINE_LEN\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    raise_nofile(65536);
    size_t len = (size_t)atoi(argv[2]);
    if (len < 40) len = 40;
    char *line = malloc(len);
    memset(line, 'x', len);
    const char *head = "{\"event\":\"link\",\"seq\":2,\"pad\":\"";
    memcpy(line, head, strlen(head));
    memcpy(line + len - 3, "\"}\n", 3);
    const char *hello = "{\"ok\":true,\"subscribed\":[\"links\"]}\n{\"event\":\"snapshot\",\"seq\":1}\n";

    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", argv[1]);
    unlink(argv[1]);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) != 0) die("bind %s", argv[1]);
    if (listen(lfd, 4096) != 0) die("listen");
    int nl = rtnl_open(RTMGRP_LINK, 4 << 20);
    fcntl(nl, F_SETFL, O_NONBLOCK);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    sub_t lsub = {lfd, 0}, nsub = {nl, 0};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &lsub};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    ev.data.ptr = &nsub;
    epoll_ctl(ep, EPOLL_CTL_ADD, nl, &ev);

    size_t nsubs = 0, cap = 1024;
    sub_t **subs = malloc(cap * sizeof *subs);
    static char buf[1 << 16];
    struct epoll_event evs[256];
    long dropped = 0;
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            sub_t *s = evs[i].data.ptr;
            if (s == &lsub) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    sub_t *c = calloc(1, sizeof *c);
                    c->fd = fd;
                    struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
                }
            } else if (s == &nsub) {
                ssize_t r;
                while ((r = recv(nl, buf, sizeof buf, 0)) > 0) {
                    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, r); h = NLMSG_NEXT(h, r)) {
                        if (h->nlmsg_type != RTM_NEWLINK) continue;
                        /* The fan-out loop proper. */
                        double t0 = now_us();
                        for (size_t k = 0; k < nsubs; k++)
                            if (write(subs[k]->fd, line, len) != (ssize_t)len) dropped++;
                        if (getenv("FANOUT_DEBUG")) fprintf(stderr, "fanout: %zu writes in %.0f us\n", nsubs, now_us() - t0);
                    }
                }
            } else {
                ssize_t r = read(s->fd, buf, sizeof buf);
                if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                if (r <= 0) {
                    epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
                    close(s->fd);
                    if (s->subscribed)
                        for (size_t k = 0; k < nsubs; k++)
                            if (subs[k] == s) {
                                subs[k] = subs[--nsubs];
                                break;
                            }
                    free(s);
                    continue;
                }
                if (!s->subscribed && memchr(buf, '\n', r)) {
                    s->subscribed = 1;
                    write_all(s->fd, hello, strlen(hello));
                    if (nsubs == cap) subs = realloc(subs, (cap *= 2) * sizeof *subs);
                    subs[nsubs++] = s;
                }
            }
        }
        if (dropped) {
            fprintf(stderr, "fanout: %ld lines could not be written whole\n", dropped);
            dropped = 0;
        }
    }
}
