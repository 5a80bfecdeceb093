// SPDX-License-Identifier: LGPL-2.1-or-later
/* An allowed app's traffic between two network namespaces (the enforcement figure: its cost with netpermd's rules
 * loaded against none).
 *
 *   tput recv PORT                  accept connections on PORT one after another, read each to EOF (runs until killed)
 *   tput send ADDR PORT SECONDS     connect, write 128 KiB buffers for SECONDS, print {"bytes":..,"seconds":..,"mbit_s":..}
 *   tput dgram ADDR PORT COUNT      send COUNT 64-byte UDP datagrams, print the CPU time (user + system) and the wall
 *                                   time per datagram: {"cpu_ns":..,"wall_ns":..}. Every datagram passes the output
 *                                   hook once, so this is the rules' cost per packet; bulk TCP hides it behind 64 KiB
 *                                   segments. CPU time, not wall time, so another process's load counts less.
 *
 * The sender is started as the app's uid (setpriv), so its packets are the app's in the kernel's rules. */
#include "common.h"
#include <netinet/in.h>

#define CHUNK (128 * 1024)

static _Noreturn void do_recv(int port) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 4) < 0) die("listen: %s\n", strerror(errno));
    static char buf[CHUNK];
    for (;;) {
        int c = accept(l, NULL, NULL);
        if (c < 0) die("accept: %s\n", strerror(errno));
        while (read(c, buf, sizeof buf) > 0) {}
        close(c);
    }
}

static int do_send(const char *addr, int port, double seconds) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (s < 0 || inet_pton(AF_INET, addr, &a.sin_addr) != 1) die("bad address %s\n", addr);
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) die("connect: %s\n", strerror(errno));
    static char buf[CHUNK];
    memset(buf, 0x5a, sizeof buf);
    double t0 = now_us(), end = t0 + seconds * 1e6, t = t0;
    long long bytes = 0;
    while (t < end) {
        ssize_t n = write(s, buf, sizeof buf);
        if (n < 0) die("write: %s\n", strerror(errno));
        bytes += n;
        t = now_us();
    }
    close(s);
    double secs = (t - t0) / 1e6;
    printf("{\"bytes\":%lld,\"seconds\":%.3f,\"mbit_s\":%.1f}\n", bytes, secs, bytes * 8 / secs / 1e6);
    return 0;
}

static int do_dgram(const char *addr, int port, long count) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (s < 0 || inet_pton(AF_INET, addr, &a.sin_addr) != 1) die("bad address %s\n", addr);
    char buf[64] = {0};
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = now_us();
    for (long i = 0; i < count; i++) {
        // Unconnected: the closed port's ICMP errors are not reported to the socket, so every call sends.
        if (sendto(s, buf, sizeof buf, 0, (struct sockaddr *)&a, sizeof a) < 0) die("sendto: %s\n", strerror(errno));
    }
    double t1 = now_us();
    getrusage(RUSAGE_SELF, &r1);
    double cpu_us = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e6
                    + (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
    printf("{\"cpu_ns\":%.1f,\"wall_ns\":%.1f}\n", cpu_us * 1e3 / count, (t1 - t0) * 1e3 / count);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "recv")) do_recv(atoi(argv[2]));
    if (argc == 5 && !strcmp(argv[1], "send")) return do_send(argv[2], atoi(argv[3]), atof(argv[4]));
    if (argc == 5 && !strcmp(argv[1], "dgram")) return do_dgram(argv[2], atoi(argv[3]), atol(argv[4]));
    die("usage: tput recv PORT | tput send ADDR PORT SECONDS | tput dgram ADDR PORT COUNT\n");
    return 2;
}
