// SPDX-License-Identifier: LGPL-2.1-or-later
/* A good client at a steady pace: one connection, REQUEST every INTERVAL_US microseconds (each after the previous
 * reply) for SECONDS, the round trip of each. What another client waits while the daemon is under a load some
 * other program makes (cgroup churn, silent subscribers, a soak), beside the same at rest in the same run.
 *
 *   pacedq SOCKET REQUEST INTERVAL_US SECONDS
 * Prints one JSON object: the round trips in microseconds. Every reply must begin with {"ok":true. */
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: pacedq SOCKET REQUEST INTERVAL_US SECONDS\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char req[600];
    snprintf(req, sizeof req, "%s\n", argv[2]);
    double interval = atof(argv[3]), end = now_us() + atof(argv[4]) * 1e6;
    int fd = unix_connect(argv[1]);
    if (fd < 0) die("connect %s", argv[1]);
    static linereader_t r;
    r.fd = fd;
    char line[1 << 16];
    samples_t rtt = {0};
    long errors = 0;
    while (now_us() < end) {
        double t = now_us();
        write_all(fd, req, strlen(req));
        if (read_line(&r, line, sizeof line) < 0) die("the daemon closed the connection");
        samples_add(&rtt, now_us() - t);
        if (strncmp(line, "{\"ok\":true", 10) != 0) errors++;
        double next = t + interval;
        while (now_us() < next) usleep((useconds_t)(next - now_us()));
    }
    printf("{\"errors\":%ld,", errors);
    samples_json(stdout, "rtt_us", &rtt);
    printf("}\n");
    return errors ? 1 : 0;
}
