// SPDX-License-Identifier: LGPL-2.1-or-later
/* New connections at a steady rate: one UDP datagram each, RATE a second for SECONDS, every one a new conntrack
 * entry. Destinations cycle over SPREAD addresses from BASE up (BASE, BASE+1, ... in the last two bytes) and over
 * destination ports 1024-60999; the socket is replaced every 50,000 datagrams, so no 5-tuple repeats while its
 * entry may live. What the privacy report's figure floods the daemon's conntrack reader with (figure 24).
 *
 *   connflood BASE SPREAD RATE SECONDS
 * Prints one JSON object: datagrams sent, failures, the seconds it took. */
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: connflood BASE SPREAD RATE SECONDS\n");
        return 2;
    }
    struct in_addr base;
    if (inet_pton(AF_INET, argv[1], &base) != 1) die("bad address %s", argv[1]);
    long spread = atol(argv[2]);
    double rate = atof(argv[3]), seconds = atof(argv[4]);
    if (spread < 1 || spread > 65536 || rate <= 0) die("bad spread or rate");
    long total = (long)(rate * seconds), sent = 0, failed = 0;
    int fd = -1;
    double start = now_us(), gap = 1e6 / rate;
    for (long i = 0; i < total; i++) {
        if (i % 50000 == 0) {
            if (fd >= 0) close(fd);
            fd = socket(AF_INET, SOCK_DGRAM, 0);
            if (fd < 0) die("socket");
        }
        /* Paced by the clock, not by sleeps of a fixed length: a late batch catches up. */
        double due = start + (double)i * gap;
        while (now_us() < due) {
            double left = due - now_us();
            if (left > 200) usleep((useconds_t)(left - 100));
        }
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(1024 + i % 60000))};
        to.sin_addr.s_addr = htonl(ntohl(base.s_addr) + (uint32_t)(i % spread));
        if (sendto(fd, "c", 1, 0, (struct sockaddr *)&to, sizeof to) == 1) sent++; else failed++;
    }
    printf("{\"sent\":%ld,\"failed\":%ld,\"seconds\":%.3f}\n", sent, failed, (now_us() - start) / 1e6);
    return 0;
}
