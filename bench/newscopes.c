// SPDX-License-Identifier: LGPL-2.1-or-later
/* Units starting at random moments while others come and go (issue 37): COUNT scopes PREFIX-I.scope made in DIR,
 * one after another with a random pause before each (up to 2 * SECONDS / COUNT, so SECONDS in all on average), each
 * measured as desktopapps measures a launch (first_refused: from its mkdir to its first refused datagram to
 * HOST:PORT).
 *
 *   newscopes DIR PREFIX COUNT SECONDS HOST PORT
 * Prints {"made":N,"refused":R,"first_refused_us":{stats}}. Run as root in the link's network namespace with the
 * host's cgroup hierarchy (nsenter --net=). */
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: newscopes DIR PREFIX COUNT SECONDS HOST PORT\n");
        return 2;
    }
    int count = atoi(argv[3]);
    double gap = atof(argv[4]) * 2e6 / (count > 0 ? count : 1);
    srand48((long)now_us());
    samples_t first = {0};
    for (int i = 0; i < count; i++) {
        usleep((useconds_t)(drand48() * gap));
        char scope[256];
        snprintf(scope, sizeof scope, "%s-%d.scope", argv[2], i);
        double us = first_refused(argv[1], scope, argv[5], atoi(argv[6]));
        if (us >= 0) samples_add(&first, us);
    }
    printf("{\"made\":%d,\"refused\":%zu,", count, first.n);
    samples_json(stdout, "first_refused_us", &first);
    printf("}\n");
    return 0;
}
