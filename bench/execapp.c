// SPDX-License-Identifier: LGPL-2.1-or-later
/* The program of the bench's installed app (a desktop entry's Exec=, figures 22 and 23). Started by execfound, it
 * sends a datagram to PEER:PORT every INTERVAL_US from its first instruction on, each from a socket opened for it
 * (a socket keeps the cgroup it was opened in: one opened before the app is in its scope is judged as its place's
 * for good), and looks at its own cgroup before each, until a send is refused by the kernel (EPERM: the rules of
 * its app's scope) or TIMEOUT_MS pass; the times are from T0_US, the moment execfound took just before the execve
 * (CLOCK_MONOTONIC, in µs). Then one datagram more from a socket it opened at its start, to show what such a
 * socket does. Prints one JSON object: when it was first seen in a scope netpermd had made (`app-netpermd-`), when
 * a send was first refused, how many passed before (what escaped), the first and last that passed, the longest gap
 * between sends (the resolution of both times), and whether the early socket's datagram passed.
 *
 *   execapp T0_US PEER PORT INTERVAL_US TIMEOUT_MS
 * Without arguments (started by anyone else) it waits until it is killed. */
#include "common.h"

/* Whether /proc/self/cgroup names a scope the daemon had made for it. */
static int in_own_scope(void) {
    char buf[4096];
    int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    return strstr(buf, "/app-netpermd-") != NULL;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        for (;;) pause();
    }
    double t0 = atof(argv[1]), interval = atof(argv[4]), timeout_us = atof(argv[5]) * 1e3;
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
    if (inet_pton(AF_INET, argv[2], &to.sin_addr) != 1) die("bad peer %s", argv[2]);
    int early = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (early < 0) die("socket");
    double start = now_us(), scoped = -1, refused = -1, first_passed = -1, last_passed = -1, prev = -1, max_gap = 0;
    long passed = 0, sends = 0, other_errors = 0;
    while (now_us() - t0 < timeout_us) {
        if (scoped < 0 && in_own_scope()) scoped = now_us() - t0;
        double t = now_us();
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0) die("socket");
        ssize_t r = sendto(s, "np", 2, 0, (struct sockaddr *)&to, sizeof to);
        int err = r < 0 ? errno : 0;
        close(s);
        sends++;
        if (prev >= 0 && t - prev > max_gap) max_gap = t - prev;
        prev = t;
        if (err == EPERM) {
            /* Moved between the look at its cgroup and the socket: in its scope by the time of this send. */
            if (scoped < 0 && in_own_scope()) scoped = t - t0;
            refused = t - t0;
            break;
        }
        if (err == 0) {
            passed++;
            if (first_passed < 0) first_passed = t - t0;
            last_passed = t - t0;
        } else {
            other_errors++;
        }
        /* Paced from the start, absolute: a late wake-up is not carried into the next. */
        double next = start + sends * interval;
        struct timespec ts = {(time_t)(next / 1e6), (long)((next - (time_t)(next / 1e6) * 1e6) * 1e3)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
    int early_passed = sendto(early, "np", 2, 0, (struct sockaddr *)&to, sizeof to) == 2;
    printf("{\"pid\":%d,\"early_socket_passed\":%s,\"started_us\":%.1f,\"scoped_us\":%.1f,\"refused_us\":%.1f,\"passed\":%ld,\"sends\":%ld,"
           "\"first_passed_us\":%.1f,\"last_passed_us\":%.1f,\"max_gap_us\":%.1f,\"other_errors\":%ld}\n",
           (int)getpid(), early_passed ? "true" : "false", start - t0, scoped, refused, passed, sends, first_passed, last_passed, max_gap, other_errors);
    return 0;
}
