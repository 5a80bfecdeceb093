// SPDX-License-Identifier: LGPL-2.1-or-later
/* A link flapping: IFNAME's admin state down and up in turn, INTERVAL_US apart (each change acknowledged), for
 * SECONDS. Runs inside the benchmark's namespace.
 *
 *   flap IFNAME INTERVAL_US SECONDS
 * Prints {"toggles":T}; leaves the link up. */
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: flap IFNAME INTERVAL_US SECONDS\n");
        return 2;
    }
    unsigned ifidx = ifindex_or_die(argv[1]);
    double interval = atof(argv[2]), end = now_us() + atof(argv[3]) * 1e6;
    int nl = rtnl_open(0, 0);
    long toggles = 0;
    while (now_us() < end) {
        rtnl_set_up(nl, ifidx, (int)(toggles % 2), 1);
        toggles++;
        usleep((useconds_t)interval);
    }
    rtnl_set_up(nl, ifidx, 1, 1);
    printf("{\"toggles\":%ld}\n", toggles);
    return 0;
}
