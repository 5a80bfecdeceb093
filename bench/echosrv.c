// SPDX-License-Identifier: LGPL-2.1-or-later
/* The query baseline: a minimal single-threaded epoll Unix-socket server that answers every request line with a
 * fixed reply of REPLY_LEN bytes (netpermd's reply length), so the client, the message sizes and the syscall
 * pattern are the same as with netpermd and only the server's own work differs. With NOTIFY_SOCKET set it
 * sends READY=1 once listening (the start-up baseline).
 *
 *   echosrv SOCKET REPLY_LEN */
#include "common.h"
#include <sys/epoll.h>

typedef struct {
    int fd;
    char *out;
    size_t outlen, outcap;
} conn_t;

static char *reply;
static size_t reply_len;

static void notify_ready(void) {
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path) return;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    sendto(fd, "READY=1", 7, 0, (struct sockaddr *)&a, sizeof a);
    close(fd);
}

static void conn_close(int ep, conn_t *c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->out);
    free(c);
}

/* Writes what is queued; returns -1 if the peer is gone. */
static int conn_flush(int ep, conn_t *c) {
    size_t off = 0;
    while (off < c->outlen) {
        ssize_t n = write(c->fd, c->out + off, c->outlen - off);
        if (n < 0) {
            if (errno == EAGAIN) break;
            if (errno == EINTR) continue;
            return -1;
        }
        off += n;
    }
    memmove(c->out, c->out + off, c->outlen - off);
    c->outlen -= off;
    struct epoll_event ev = {.events = EPOLLIN | (c->outlen ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: echosrv SOCKET REPLY_LEN\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    raise_nofile(65536);
    reply_len = (size_t)atoi(argv[2]);
    if (reply_len < 16) reply_len = 16;
    reply = malloc(reply_len);
    const char *head = "{\"ok\":true,\"pad\":\"";
    memset(reply, 'x', reply_len);
    memcpy(reply, head, strlen(head));
    memcpy(reply + reply_len - 3, "\"}\n", 3);

    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", argv[1]);
    unlink(argv[1]);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) != 0) die("bind %s", argv[1]);
    if (listen(lfd, 4096) != 0) die("listen");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
    notify_ready();

    static char buf[1 << 16];
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    conn_t *nc = calloc(1, sizeof *nc);
                    nc->fd = fd;
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                }
                continue;
            }
            if (evs[i].events & EPOLLOUT && conn_flush(ep, c) < 0) {
                conn_close(ep, c);
                continue;
            }
            if (!(evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
            ssize_t r = read(c->fd, buf, sizeof buf);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (r <= 0) {
                conn_close(ep, c);
                continue;
            }
            size_t lines = 0;
            for (char *p = buf; (p = memchr(p, '\n', buf + r - p)); p++) lines++;
            if (!lines) continue;
            size_t need = c->outlen + lines * reply_len;
            if (need > c->outcap) {
                c->outcap = need * 2;
                c->out = realloc(c->out, c->outcap);
            }
            for (size_t k = 0; k < lines; k++) memcpy(c->out + c->outlen + k * reply_len, reply, reply_len);
            c->outlen = need;
            if (conn_flush(ep, c) < 0) conn_close(ep, c);
        }
    }
}
